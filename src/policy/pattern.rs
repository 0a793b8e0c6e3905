//! Name patterns of policy rules and endpoints: shell-style globs (`*`, `?`, `[…]`, `{a,b}`)
//! over upstream names, and `UPSTREAM:ITEM` pairs over an upstream's own tool and prompt names
//! and resource URIs. A `*` also matches `/`, so `file:///public/*` covers a whole tree.

use std::fmt;

use globset::{GlobBuilder, GlobMatcher};

/// One glob, compiled; two are equal when written the same.
#[derive(Clone)]
pub struct Glob {
    text: Box<str>,
    matcher: GlobMatcher,
}

impl Glob {
    /// Compiles `text`, or says why it is not a pattern.
    pub fn new(text: &str) -> Result<Self, String> {
        let glob = GlobBuilder::new(text)
            .literal_separator(false)
            .backslash_escape(true)
            .build()
            .map_err(|error| format!("`{text}` is not a valid pattern: {}", error.kind()))?;
        Ok(Self {
            text: text.into(),
            matcher: glob.compile_matcher(),
        })
    }

    pub fn is_match(&self, candidate: &str) -> bool {
        self.matcher.is_match(candidate)
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl PartialEq for Glob {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl fmt::Debug for Glob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.text, f)
    }
}

/// `UPSTREAM:ITEM`: a glob over upstream names and one over the item's own name (or URI) at
/// that upstream. Upstream names hold no `:`, so the first one splits.
#[derive(Debug, Clone, PartialEq)]
pub struct ItemPattern {
    upstream: Glob,
    item: Glob,
}

impl ItemPattern {
    pub fn new(text: &str) -> Result<Self, String> {
        let Some((upstream, item)) = text.split_once(':') else {
            return Err(format!(
                "`{text}` needs the form UPSTREAM:NAME (e.g. `github:create_*`, `*:delete_*`)"
            ));
        };
        if item.is_empty() {
            return Err(format!("`{text}` names no item after the `:`"));
        }
        Ok(Self {
            upstream: Glob::new(upstream)?,
            item: Glob::new(item)?,
        })
    }

    pub fn is_match(&self, upstream: &str, item: &str) -> bool {
        self.upstream.is_match(upstream) && self.item.is_match(item)
    }

    /// Whether some item of `upstream` may match.
    pub fn upstream_matches(&self, upstream: &str) -> bool {
        self.upstream.is_match(upstream)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_cross_slashes_and_items_split_at_the_first_colon() {
        let glob = Glob::new("file:///public/*").unwrap();
        assert!(glob.is_match("file:///public/a/b.md"));
        assert!(!glob.is_match("file:///private/a"));
        let pattern = ItemPattern::new("files:file:///public/*").unwrap();
        assert!(pattern.is_match("files", "file:///public/x"));
        assert!(!pattern.is_match("files2", "file:///public/x"));
        let any = ItemPattern::new("*:delete_*").unwrap();
        assert!(any.is_match("github", "delete_repo"));
        assert!(!any.is_match("github", "create_repo"));
        assert!(ItemPattern::new("{a,b}:x?").unwrap().is_match("b", "x1"));
    }

    #[test]
    fn bad_patterns_say_why() {
        assert!(
            ItemPattern::new("github")
                .unwrap_err()
                .contains("UPSTREAM:NAME")
        );
        assert!(ItemPattern::new("github:").unwrap_err().contains("no item"));
        assert!(Glob::new("[a").unwrap_err().contains("not a valid pattern"));
    }
}
