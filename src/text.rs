//! Text that came from elsewhere (a client's file, an upstream, a configuration's keys) made
//! safe to show on a terminal, in a log line or in a comment: control characters, line and
//! paragraph separators and bidirectional overrides are written as escapes, so such text can
//! neither move the cursor, fake a new line nor reorder what a reader sees.

use std::borrow::Cow;

/// Whether `c` is shown as an escape rather than as itself.
fn hidden(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{2028}' | '\u{2029}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}'
                | '\u{2066}'..='\u{2069}'
        )
}

/// `text` with every character that could disguise what is shown escaped (`\n`, `\u{1b}`).
pub fn printable(text: &str) -> Cow<'_, str> {
    if !text.chars().any(hidden) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if hidden(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_could_disguise_text_is_escaped_and_the_rest_kept() {
        assert_eq!(printable("naïve <b>ok</b>"), "naïve <b>ok</b>");
        assert!(matches!(printable("plain"), Cow::Borrowed(_)));
        assert_eq!(printable("a\nb\u{1b}[31m"), "a\\nb\\u{1b}[31m");
        assert_eq!(
            printable("x\u{85}y\u{2028}z\u{202e}"),
            "x\\u{85}y\\u{2028}z\\u{202e}"
        );
    }
}
