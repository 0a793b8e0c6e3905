//! The reversible mapping between upstream names/URIs and the names/URIs clients see.
//!
//! - Tools and prompts: `{upstream}{separator}{name}`, e.g. `github__create_issue`. The separator
//!   always holds a character upstream names cannot contain, so the first occurrence splits.
//! - Resources and templates: `{upstream}+{uri}`, e.g. `files+file:///notes.md`. Upstream names
//!   start with a letter and hold only `[a-z0-9-]`, so `{upstream}+{scheme}` is itself a valid
//!   URI scheme (RFC 3986: `ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )`) and the result stays a
//!   valid URI; templates stay valid RFC 6570 templates because only a literal prefix is added,
//!   which expansion leaves alone. The first `+` splits, as names cannot contain one.
//!
//! Without prefixes (mode `never`, or `conditional` with one upstream) names and URIs pass
//! through unchanged and the catalog's tables decide the owner.

use std::sync::Arc;

use crate::names::{PrefixMode, UpstreamName};

/// Joins an upstream name and its URI in the mapped scheme.
const URI_JOINER: char = '+';

/// How this catalog names things; derived from the config and the number of upstreams.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameScheme {
    /// `None` when names pass through unprefixed.
    separator: Option<Arc<str>>,
}

impl NameScheme {
    /// The scheme for `mode` with `upstream_count` configured upstreams.
    pub fn new(mode: PrefixMode, separator: &str, upstream_count: usize) -> Self {
        let prefixed = match mode {
            PrefixMode::Always => true,
            PrefixMode::Conditional => upstream_count > 1,
            PrefixMode::Never => false,
        };
        Self {
            separator: prefixed.then(|| Arc::from(separator)),
        }
    }

    /// A scheme that prefixes with `separator`.
    pub fn prefixed(separator: &str) -> Self {
        Self {
            separator: Some(Arc::from(separator)),
        }
    }

    /// A scheme that leaves names and URIs as the upstreams give them.
    pub fn unprefixed() -> Self {
        Self { separator: None }
    }

    pub fn is_prefixed(&self) -> bool {
        self.separator.is_some()
    }

    /// The name clients see for tool or prompt `name` of `upstream`.
    pub fn expose_name(&self, upstream: &UpstreamName, name: &str) -> String {
        match &self.separator {
            Some(sep) => {
                let mut out =
                    String::with_capacity(upstream.as_str().len() + sep.len() + name.len());
                out.push_str(upstream.as_str());
                out.push_str(sep);
                out.push_str(name);
                out
            }
            None => name.to_owned(),
        }
    }

    /// Splits an exposed tool or prompt name into (upstream name, original name). `None` when the
    /// scheme is unprefixed or the name carries no prefix.
    pub fn split_name<'a>(&self, exposed: &'a str) -> Option<(&'a str, &'a str)> {
        exposed.split_once(&**self.separator.as_ref()?)
    }

    /// The URI (or URI template) clients see for `uri` of `upstream`.
    pub fn expose_uri(&self, upstream: &UpstreamName, uri: &str) -> String {
        if self.separator.is_none() {
            return uri.to_owned();
        }
        let mut out = String::with_capacity(upstream.as_str().len() + 1 + uri.len());
        out.push_str(upstream.as_str());
        out.push(URI_JOINER);
        out.push_str(uri);
        out
    }

    /// Splits an exposed URI into (upstream name, original URI). `None` when the scheme is
    /// unprefixed or the URI carries no prefix.
    pub fn split_uri<'a>(&self, exposed: &'a str) -> Option<(&'a str, &'a str)> {
        self.separator.as_ref()?;
        exposed.split_once(URI_JOINER)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn up(name: &str) -> UpstreamName {
        UpstreamName::new(name).unwrap()
    }

    #[test]
    fn prefix_modes() {
        assert!(NameScheme::new(PrefixMode::Always, "__", 1).is_prefixed());
        assert!(!NameScheme::new(PrefixMode::Conditional, "__", 1).is_prefixed());
        assert!(NameScheme::new(PrefixMode::Conditional, "__", 2).is_prefixed());
        assert!(!NameScheme::new(PrefixMode::Never, "__", 2).is_prefixed());
    }

    #[test]
    fn examples() {
        let scheme = NameScheme::prefixed("__");
        let gh = up("github");
        assert_eq!(
            scheme.expose_name(&gh, "create_issue"),
            "github__create_issue"
        );
        assert_eq!(
            scheme.split_name("github__create__issue"),
            Some(("github", "create__issue"))
        );
        assert_eq!(scheme.split_name("plain"), None);
        assert_eq!(
            scheme.expose_uri(&gh, "file:///a b.md"),
            "github+file:///a b.md"
        );
        assert_eq!(
            scheme.split_uri("github+git+ssh://host/repo"),
            Some(("github", "git+ssh://host/repo"))
        );
        assert_eq!(
            scheme.expose_uri(&gh, "test://template/{id}/data"),
            "github+test://template/{id}/data"
        );
    }

    #[test]
    fn mapped_uris_stay_valid_uris() {
        let scheme = NameScheme::prefixed("__");
        for uri in [
            "file:///tmp/notes.md",
            "https://example.com/x?y=1#z",
            "urn:isbn:0451450523",
            "test://static-text",
        ] {
            let exposed = scheme.expose_uri(&up("fs-2"), uri);
            let parsed = url::Url::parse(&exposed).unwrap_or_else(|e| panic!("{exposed}: {e}"));
            assert_eq!(
                parsed.scheme(),
                format!("fs-2+{}", uri.split(':').next().unwrap())
            );
        }
    }

    #[test]
    fn unprefixed_passes_through() {
        let scheme = NameScheme::unprefixed();
        assert_eq!(scheme.expose_name(&up("a"), "t"), "t");
        assert_eq!(scheme.expose_uri(&up("a"), "x://y"), "x://y");
        assert_eq!(scheme.split_name("a__t"), None);
        assert_eq!(scheme.split_uri("a+x://y"), None);
    }

    fn upstream_name() -> impl Strategy<Value = UpstreamName> {
        "[a-z][a-z0-9-]{0,31}".prop_map(|s| UpstreamName::new(&s).unwrap())
    }

    fn separator() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("__".to_owned()),
            Just(".".to_owned()),
            Just("_".to_owned()),
            "[a-z0-9-]{0,3}[_.A-Z][A-Za-z0-9_.-]{0,3}",
        ]
    }

    proptest! {
        #[test]
        fn name_round_trip(upstream in upstream_name(), sep in separator(), name in ".{0,40}") {
            prop_assert!(crate::config::check_separator(&sep).is_ok());
            let scheme = NameScheme::prefixed(&sep);
            let exposed = scheme.expose_name(&upstream, &name);
            prop_assert_eq!(scheme.split_name(&exposed), Some((upstream.as_str(), name.as_str())));
        }

        #[test]
        fn uri_round_trip(upstream in upstream_name(), uri in ".{0,60}") {
            let scheme = NameScheme::prefixed("__");
            let exposed = scheme.expose_uri(&upstream, &uri);
            prop_assert_eq!(scheme.split_uri(&exposed), Some((upstream.as_str(), uri.as_str())));
        }

        #[test]
        fn distinct_pairs_never_collide(
            a in upstream_name(), b in upstream_name(), x in "[a-z_]{0,8}", y in "[a-z_]{0,8}"
        ) {
            let scheme = NameScheme::prefixed("__");
            prop_assume!((a.as_str(), x.as_str()) != (b.as_str(), y.as_str()));
            prop_assert_ne!(scheme.expose_name(&a, &x), scheme.expose_name(&b, &y));
            prop_assert_ne!(scheme.expose_uri(&a, &x), scheme.expose_uri(&b, &y));
        }
    }
}
