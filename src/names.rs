//! Identifiers shared across layers: the validated name of an upstream server, and when it
//! prefixes what clients see.
//!
//! Upstream names appear in prefixed tool names and in the URI scheme of mapped resources, so the
//! rules here are what keep those mappings reversible and the resulting URIs valid.

use std::{fmt, sync::Arc};

/// When tool and prompt names (and resource URIs) carry their upstream's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrefixMode {
    Always,
    /// Only when more than one upstream is configured.
    Conditional,
    Never,
}

/// Longest upstream name accepted.
pub const MAX_UPSTREAM_NAME_LEN: usize = 32;

/// The name of a configured upstream: 1–32 characters of `[a-z0-9-]`, starting with a letter.
///
/// The leading letter is required because the name becomes the first part of a URI scheme
/// (`{name}+{scheme}:…`, see `catalog::naming`), and RFC 3986 schemes start with a letter.
/// Cloning is cheap (a shared string).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct UpstreamName(Arc<str>);

impl UpstreamName {
    /// Validates `name`, returning the reason it is not acceptable.
    pub fn new(name: &str) -> Result<Self, String> {
        validate_upstream_name(name)?;
        Ok(Self(Arc::from(name)))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Checks the upstream name rules; the error says which rule failed.
pub fn validate_upstream_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("upstream name is empty".into());
    }
    if name.len() > MAX_UPSTREAM_NAME_LEN {
        return Err(format!(
            "upstream name `{name}` is {} characters long; the limit is {MAX_UPSTREAM_NAME_LEN}",
            name.len()
        ));
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
    {
        return Err(format!(
            "upstream name `{name}` contains {bad:?}; use lowercase letters, digits and `-` \
             (for example `{}`)",
            suggest_upstream_name(name)
        ));
    }
    if !name.starts_with(|c: char| c.is_ascii_lowercase()) {
        return Err(format!(
            "upstream name `{name}` must start with a lowercase letter \
             (it becomes part of a URI scheme)"
        ));
    }
    Ok(())
}

/// A valid name close to `name`, offered in error messages.
pub fn suggest_upstream_name(name: &str) -> String {
    let mut out: String = name
        .chars()
        .map(|c| match c.to_ascii_lowercase() {
            c @ ('a'..='z' | '0'..='9' | '-') => c,
            _ => '-',
        })
        .collect();
    if !out.starts_with(|c: char| c.is_ascii_lowercase()) {
        out.insert(0, 's');
    }
    out.truncate(MAX_UPSTREAM_NAME_LEN);
    out
}

impl fmt::Display for UpstreamName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for UpstreamName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl AsRef<str> for UpstreamName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl std::borrow::Borrow<str> for UpstreamName {
    fn borrow(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_valid_names() {
        for name in ["a", "github", "brave-search", "fs2", &"x".repeat(32)] {
            assert!(UpstreamName::new(name).is_ok(), "{name}");
        }
    }

    #[test]
    fn rejects_invalid_names_with_reason() {
        let cases = [
            ("", "empty"),
            ("GitHub", "contains 'G'"),
            ("my_server", "contains '_'"),
            ("1password", "must start with a lowercase letter"),
            ("-x", "must start with a lowercase letter"),
        ];
        for (name, reason) in cases {
            let err = UpstreamName::new(name).unwrap_err();
            assert!(err.contains(reason), "{name}: {err}");
        }
        let long = "a".repeat(33);
        assert!(
            UpstreamName::new(&long)
                .unwrap_err()
                .contains("limit is 32")
        );
    }

    #[test]
    fn suggests_a_valid_name() {
        let err = UpstreamName::new("Brave Search").unwrap_err();
        assert!(err.contains("`brave-search`"), "{err}");
    }
}
