//! Resource URIs as policy sees them: normalized as RFC 3986 §6.2.2 says (the scheme and host
//! in lowercase, percent-encoded unreserved characters decoded and other escapes in uppercase
//! hex, `.` and `..` segments removed), and with runs of `/` in the path taken as one (as
//! file systems take them), so that `file:///public/../secret`, `FILE:///secret`,
//! `file:////secret` and `file:///%73ecret` are all judged as `file:///secret`. A URI whose
//! `..` would climb above its root, or that hides a `..` segment in escapes or behind a
//! backslash (which some servers take for a separator), is refused outright.

use std::borrow::Cow;

/// Why a URI cannot be judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UriRefusal {
    /// A `..` segment climbs above the root of the path.
    Climbs,
    /// A `..` segment hides in percent-escapes or behind a backslash.
    Hidden,
}

/// `uri` normalized (borrowed when it already is), or why it is refused.
pub fn normalize_uri(uri: &str) -> Result<Cow<'_, str>, UriRefusal> {
    let (scheme, rest) = split_scheme(uri);
    let (before_path, path, after_path) = split_path(rest);
    let mut out = String::with_capacity(uri.len());
    if let Some(scheme) = scheme {
        out.push_str(&scheme.to_ascii_lowercase());
        out.push(':');
    }
    if let Some(authority) = before_path {
        out.push_str("//");
        push_authority(&mut out, authority);
    }
    let path = decode_unreserved(path);
    let path = collapse_slashes(&path);
    let path = remove_dot_segments(&path)?;
    if hides_dot_dot(&path) {
        return Err(UriRefusal::Hidden);
    }
    // A reference without a scheme whose first segment now holds a `:` would read as one
    // with a scheme: `./` keeps it a path (RFC 3986 §4.2).
    if scheme.is_none() && before_path.is_none() && split_scheme(&path).0.is_some() {
        out.push_str("./");
    }
    out.push_str(&path);
    out.push_str(&decode_unreserved(after_path));
    Ok(if out == uri {
        Cow::Borrowed(uri)
    } else {
        Cow::Owned(out)
    })
}

/// The scheme (when `uri` starts with a valid one) and what follows its `:`.
fn split_scheme(uri: &str) -> (Option<&str>, &str) {
    let Some((scheme, rest)) = uri.split_once(':') else {
        return (None, uri);
    };
    let valid = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    if valid {
        (Some(scheme), rest)
    } else {
        (None, uri)
    }
}

/// The authority (after `//`, if any), the path, and the query and fragment as one.
fn split_path(rest: &str) -> (Option<&str>, &str, &str) {
    let (authority, rest) = match rest.strip_prefix("//") {
        Some(after) => {
            let end = after.find(['/', '?', '#']).unwrap_or(after.len());
            (Some(&after[..end]), &after[end..])
        }
        None => (None, rest),
    };
    let end = rest.find(['?', '#']).unwrap_or(rest.len());
    (authority, &rest[..end], &rest[end..])
}

/// The authority with its host in lowercase (user information and port kept as written).
fn push_authority(out: &mut String, authority: &str) {
    let (userinfo, hostport) = match authority.rsplit_once('@') {
        Some((userinfo, hostport)) => (Some(userinfo), hostport),
        None => (None, authority),
    };
    if let Some(userinfo) = userinfo {
        out.push_str(&decode_unreserved(userinfo));
        out.push('@');
    }
    // Decoded first (`%4A` is a `J`), then lowercased but for the hex of escapes left.
    let decoded = decode_unreserved(hostport);
    let mut escape = 0;
    for c in decoded.chars() {
        if c == '%' {
            escape = 2;
            out.push(c);
        } else if escape > 0 {
            escape -= 1;
            out.push(c);
        } else {
            out.push(c.to_ascii_lowercase());
        }
    }
}

fn is_unreserved(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~')
}

fn hex(byte: u8) -> Option<u8> {
    char::from(byte).to_digit(16).map(|d| d as u8)
}

/// The byte a `%XX` escape at `i` stands for, if one is there.
fn escape_at(bytes: &[u8], i: usize) -> Option<u8> {
    if bytes.get(i) != Some(&b'%') {
        return None;
    }
    let high = hex(*bytes.get(i + 1)?)?;
    let low = hex(*bytes.get(i + 2)?)?;
    Some(high << 4 | low)
}

/// `text` with escapes of unreserved characters decoded, the others in uppercase hex, and a
/// stray `%` escaped.
fn decode_unreserved(text: &str) -> Cow<'_, str> {
    if !text.contains('%') {
        return Cow::Borrowed(text);
    }
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < bytes.len() {
        if let Some(byte) = escape_at(bytes, i) {
            if is_unreserved(byte) {
                out.push(char::from(byte));
            } else {
                out.push('%');
                out.push_str(&text[i + 1..i + 3].to_ascii_uppercase());
            }
            i += 3;
            continue;
        }
        if bytes[i] == b'%' {
            // A `%` that starts no escape is written as one, or decoding could make one of it
            // and what follows (`%3%32` would become `%32`, then `2`).
            out.push_str("%25");
            i += 1;
            continue;
        }
        let len = utf8_len(bytes[i]);
        out.push_str(&text[i..i + len]);
        i += len;
    }
    Cow::Owned(out)
}

/// The length of the UTF-8 sequence starting with `first`.
fn utf8_len(first: u8) -> usize {
    match first {
        0xF0.. => 4,
        0xE0.. => 3,
        0xC0.. => 2,
        _ => 1,
    }
}

/// `path` with every run of `/` made one.
fn collapse_slashes(path: &str) -> Cow<'_, str> {
    if !path.contains("//") {
        return Cow::Borrowed(path);
    }
    let mut out = String::with_capacity(path.len());
    for c in path.chars() {
        if c != '/' || !out.ends_with('/') {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// RFC 3986 §5.2.4 on `path`, except that a `..` above the root is refused rather than
/// dropped.
fn remove_dot_segments(path: &str) -> Result<Cow<'_, str>, UriRefusal> {
    let has_dots = path
        .split('/')
        .any(|segment| segment == "." || segment == "..");
    if !has_dots {
        return Ok(Cow::Borrowed(path));
    }
    let absolute = path.starts_with('/');
    let mut kept: Vec<&str> = Vec::new();
    let segments: Vec<&str> = path.split('/').skip(usize::from(absolute)).collect();
    let last = segments.len().saturating_sub(1);
    let mut trailing_slash = false;
    for (i, segment) in segments.iter().enumerate() {
        match *segment {
            "." => trailing_slash = i == last,
            ".." => {
                if kept.pop().is_none() {
                    return Err(UriRefusal::Climbs);
                }
                trailing_slash = i == last;
            }
            other => {
                kept.push(other);
                trailing_slash = false;
            }
        }
    }
    let mut out = String::with_capacity(path.len());
    if absolute {
        out.push('/');
    }
    out.push_str(&kept.join("/"));
    if trailing_slash && !kept.is_empty() {
        out.push('/');
    }
    Ok(Cow::Owned(out))
}

/// Whether a `..` segment remains once every escape is decoded and backslashes are taken for
/// separators.
fn hides_dot_dot(path: &str) -> bool {
    if !path.contains('%') && !path.contains('\\') {
        return false;
    }
    let bytes = path.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if let Some(byte) = escape_at(bytes, i) {
            decoded.push(byte);
            i += 3;
        } else {
            decoded.push(bytes[i]);
            i += 1;
        }
    }
    decoded
        .split(|b| *b == b'/' || *b == b'\\')
        .any(|segment| segment == b"..")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn normal(uri: &str) -> String {
        normalize_uri(uri).unwrap().into_owned()
    }

    #[test]
    fn dot_segments_case_and_escapes_are_normalized() {
        for (given, expected) in [
            ("file:///public/../secret", "file:///secret"),
            ("file:///public/./a/./b", "file:///public/a/b"),
            ("file:///public//x", "file:///public/x"),
            ("file:////secret", "file:///secret"),
            ("FILE:///Secret", "file:///Secret"),
            (
                "HTTPS://Example.COM/A/%7euser",
                "https://example.com/A/~user",
            ),
            ("file:///%73ecret", "file:///secret"),
            ("file:///a%2fb", "file:///a%2Fb"),
            ("file:///a/b/..", "file:///a/"),
            ("notes://note/1?x=%41#Top", "notes://note/1?x=A#Top"),
            ("urn:isbn:0451450523", "urn:isbn:0451450523"),
            ("file:///é/%C3%A9", "file:///é/%C3%A9"),
            ("./a:b//", "./a:b/"),
            ("file:///a%3%32b", "file:///a%2532b"),
            ("file:///100%", "file:///100%25"),
            ("./a/../b:c", "./b:c"),
        ] {
            assert_eq!(normal(given), expected, "{given}");
        }
        assert!(matches!(
            normalize_uri("demo://about"),
            Ok(Cow::Borrowed(_))
        ));
    }

    #[test]
    fn climbing_and_hidden_dot_dots_are_refused() {
        for climbing in ["file:///../etc/passwd", "file:///a/../../b", "x:../y"] {
            assert_eq!(
                normalize_uri(climbing),
                Err(UriRefusal::Climbs),
                "{climbing}"
            );
        }
        for hidden in [
            "file:///public/..%2fsecret",
            "file:///public/%2e%2e%2fsecret",
            "file:///public/..\\secret",
            "file:///public/%2E%2E%5Csecret",
        ] {
            assert!(normalize_uri(hidden).is_err(), "{hidden}");
        }
        // Two dots inside a name are no segment.
        assert_eq!(normal("file:///a/b..c"), "file:///a/b..c");
    }

    proptest::proptest! {
        #[test]
        fn normalizing_twice_changes_nothing(uri in "[a-zA-Z]{1,5}:(//[a-zA-Z.%0-9]{0,8})?[a-zA-Z0-9./%~\\\\-]{0,24}") {
            if let Ok(once) = normalize_uri(&uri) {
                let twice = normalize_uri(&once).expect("a normalized URI is accepted");
                proptest::prop_assert_eq!(twice.as_ref(), once.as_ref());
            }
        }
    }
}
