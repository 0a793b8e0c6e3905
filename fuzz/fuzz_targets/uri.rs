//! Resource URIs: normalization for policy (idempotent, and never lets a `..` through) and the
//! prefix mapping (`{upstream}+{uri}` splits back into what was joined).
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchyard::{
    catalog::NameScheme,
    names::{PrefixMode, UpstreamName},
    policy::normalize_uri,
};

/// The path of `uri` (RFC 3986 §3): after the scheme and the authority, before `?` or `#`.
fn path_of(uri: &str) -> &str {
    let rest = match uri.split_once(':') {
        Some((scheme, rest))
            if scheme.starts_with(|c: char| c.is_ascii_alphabetic())
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')) =>
        {
            rest
        }
        _ => uri,
    };
    let rest = match rest.strip_prefix("//") {
        Some(after) => &after[after.find(['/', '?', '#']).unwrap_or(after.len())..],
        None => rest,
    };
    rest.split(['?', '#']).next().unwrap_or_default()
}

fuzz_target!(|uri: &str| {
    if let Ok(normal) = normalize_uri(uri) {
        let again = normalize_uri(&normal).expect("a normalized URI is accepted");
        assert_eq!(
            again.as_ref(),
            normal.as_ref(),
            "normalizing twice changes nothing"
        );
        let path = path_of(&normal);
        assert!(
            !path.split('/').any(|segment| segment == ".."),
            "a `..` segment survived: {normal}"
        );
    }
    let scheme = NameScheme::new(PrefixMode::Always, "__", 2);
    let upstream = UpstreamName::new("files").expect("a valid name");
    let exposed = scheme.expose_uri(&upstream, uri);
    if let Some((owner, original)) = scheme.split_uri(&exposed) {
        assert_eq!((owner, original), ("files", uri), "{exposed}");
    }
});
