//! The words of a text as tool search indexes and looks them up: split at anything but letters
//! and digits and at camelCase humps, lowercased, common English words dropped and plural and
//! verb endings taken off, so that "listing files" and `list_file` share their words.

/// The words of `text` as they are indexed: split at anything but letters and digits and at
/// camelCase humps, lowercased, without common words, with endings taken off.
pub fn words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut current = String::new();
    let mut previous: Option<char> = None;
    let flush = |current: &mut String, words: &mut Vec<String>| {
        if !current.is_empty() {
            let word = std::mem::take(current);
            if !STOP_WORDS.contains(&word.as_str()) {
                words.push(stem(&word));
            }
        }
    };
    for c in text.chars() {
        if !c.is_alphanumeric() {
            flush(&mut current, &mut words);
            previous = None;
            continue;
        }
        let hump = previous.is_some_and(|p| {
            (p.is_lowercase() && c.is_uppercase())
                || (p.is_alphabetic() && c.is_numeric())
                || (p.is_numeric() && c.is_alphabetic())
        });
        if hump {
            flush(&mut current, &mut words);
        }
        current.extend(c.to_lowercase());
        previous = Some(c);
    }
    flush(&mut current, &mut words);
    words
}

/// `word` without a plural or verb ending (a light stemmer: enough for tool vocabulary).
fn stem(word: &str) -> String {
    let n = word.len();
    if n <= 3 || !word.is_ascii() {
        return word.to_owned();
    }
    for (ending, replacement, keep) in [
        ("ies", "y", 2),
        ("sses", "ss", 2),
        ("ing", "", 3),
        ("ed", "", 3),
        ("es", "", 3),
        ("s", "", 3),
    ] {
        if let Some(stem) = word.strip_suffix(ending)
            && stem.len() >= keep
            && !(ending == "s" && (stem.ends_with('s') || stem.ends_with('u')))
            && (ending != "es" || ends_in_sibilant(stem))
        {
            return format!("{stem}{replacement}");
        }
    }
    word.to_owned()
}

/// Whether a plural of `stem` takes `-es` (boxes, matches, pushes, passes).
fn ends_in_sibilant(stem: &str) -> bool {
    ["x", "ch", "sh", "ss", "z"]
        .iter()
        .any(|ending| stem.ends_with(ending))
}

/// Words too common to tell tools apart.
const STOP_WORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "by", "can", "do", "for", "from", "has", "have",
    "how", "i", "if", "in", "into", "is", "it", "its", "me", "my", "of", "on", "or", "so", "that",
    "the", "their", "them", "then", "there", "these", "this", "to", "use", "was", "we", "what",
    "when", "where", "which", "who", "will", "with", "you", "your",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_split_on_separators_humps_and_digits() {
        assert_eq!(
            words("fs__readFile list-dirs get_issue2 HTTPServer"),
            [
                "fs",
                "read",
                "file",
                "list",
                "dir",
                "get",
                "issue",
                "2",
                "httpserver"
            ]
        );
        assert_eq!(
            words("Searches the boxes, matching queries"),
            ["search", "box", "match", "query"]
        );
    }
}
