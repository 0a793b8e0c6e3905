//! WordPiece, as an uncased BERT vocabulary splits text: whitespace and punctuation separate
//! words, which are lowercased and lose their accents; each word becomes the longest pieces of
//! the vocabulary that spell it from its start (`##` marks a piece inside a word), or `[UNK]`
//! when none do. Chinese, Japanese and Korean ideographs are words of their own.

use std::collections::HashMap;

use unicode_normalization::{UnicodeNormalization, char::is_combining_mark};

/// Longer words are not split: they are unknown.
const MAX_WORD_CHARS: usize = 100;

pub struct WordPiece {
    ids: HashMap<Box<str>, u32>,
    unknown: u32,
    start: u32,
    end: u32,
}

impl WordPiece {
    /// The vocabulary of `vocab.txt`: one piece per line, its id its line number.
    pub fn new(vocab: &str) -> Result<Self, String> {
        let ids: HashMap<Box<str>, u32> = vocab
            .lines()
            .enumerate()
            .map(|(id, piece)| (piece.into(), id as u32))
            .collect();
        let special = |name: &str| {
            ids.get(name)
                .copied()
                .ok_or_else(|| format!("it lacks the special token {name}"))
        };
        Ok(Self {
            unknown: special("[UNK]")?,
            start: special("[CLS]")?,
            end: special("[SEP]")?,
            ids,
        })
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// The ids of `text` between `[CLS]` and `[SEP]`, at most `limit` in all.
    pub fn encode(&self, text: &str, limit: usize) -> Vec<u32> {
        // No word is longer than `MAX_WORD_CHARS` and every word is one piece at least: what
        // lies beyond this many bytes cannot be among the first `limit` pieces.
        let text = &text[..text.floor_char_boundary(limit.saturating_mul(MAX_WORD_CHARS * 4))];
        let mut ids = vec![self.start];
        let room = limit.saturating_sub(1);
        let mut piece = String::new();
        for word in words(text) {
            if ids.len() >= room {
                break;
            }
            self.pieces(&word, &mut piece, &mut ids);
        }
        ids.truncate(room.max(1));
        ids.push(self.end);
        ids
    }

    /// Appends the pieces of `word` (or `[UNK]`) to `ids`; `buffer` is scratch space.
    fn pieces(&self, word: &str, buffer: &mut String, ids: &mut Vec<u32>) {
        if word.chars().count() > MAX_WORD_CHARS {
            ids.push(self.unknown);
            return;
        }
        let before = ids.len();
        let mut start = 0;
        while start < word.len() {
            let mut end = word.len();
            let found = loop {
                buffer.clear();
                if start > 0 {
                    buffer.push_str("##");
                }
                buffer.push_str(&word[start..end]);
                if let Some(&id) = self.ids.get(buffer.as_str()) {
                    break Some(id);
                }
                match word[start..end].char_indices().last() {
                    Some((last, _)) if last > 0 => end = start + last,
                    _ => break None,
                }
            };
            match found {
                Some(id) => {
                    ids.push(id);
                    start = end;
                }
                None => {
                    ids.truncate(before);
                    ids.push(self.unknown);
                    return;
                }
            }
        }
    }
}

/// The words of `text`, lowercased and without accents, punctuation apart.
fn words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut current = String::new();
    let flush = |current: &mut String, words: &mut Vec<String>| {
        if !current.is_empty() {
            words.push(std::mem::take(current));
        }
    };
    for c in text.chars() {
        if c == '\0' || c == '\u{fffd}' || (c.is_control() && !c.is_whitespace()) {
            continue;
        }
        if c.is_whitespace() {
            flush(&mut current, &mut words);
        } else if is_punctuation(c) || is_ideograph(c) {
            flush(&mut current, &mut words);
            words.push(c.to_string());
        } else {
            for lower in c.to_lowercase() {
                current.extend(lower.nfd().filter(|c| !is_combining_mark(*c)));
            }
        }
    }
    flush(&mut current, &mut words);
    words
}

/// ASCII's punctuation and symbols, and any other character that is neither a letter, a digit
/// nor a mark (close to BERT's rule, which takes Unicode's punctuation classes).
fn is_punctuation(c: char) -> bool {
    c.is_ascii_punctuation() || (!c.is_ascii() && !c.is_alphanumeric() && !is_combining_mark(c))
}

/// The CJK ideograph blocks BERT's tokenizer sets apart.
fn is_ideograph(c: char) -> bool {
    matches!(c as u32,
        0x4E00..=0x9FFF | 0x3400..=0x4DBF | 0x20000..=0x2A6DF | 0x2A700..=0x2B73F
        | 0x2B740..=0x2B81F | 0x2B820..=0x2CEAF | 0xF900..=0xFAFF | 0x2F800..=0x2FA1F)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vocabulary() -> WordPiece {
        let pieces = [
            "[PAD]", "[UNK]", "[CLS]", "[SEP]", "read", "a", "file", "##s", "un", "##know", "##n",
            ",", "cafe", "!", "中",
        ];
        WordPiece::new(&pieces.join("\n")).unwrap()
    }

    #[test]
    fn words_split_into_the_longest_pieces() {
        let vocabulary = vocabulary();
        // [CLS] read a file ##s , unknown→un ##know ##n [SEP]
        assert_eq!(
            vocabulary.encode("Read a FILES, unknown", 64),
            [2, 4, 5, 6, 7, 11, 8, 9, 10, 3]
        );
    }

    #[test]
    fn accents_go_and_what_cannot_be_spelt_is_unknown() {
        let vocabulary = vocabulary();
        assert_eq!(
            vocabulary.encode("Café! zebra 中", 64),
            [2, 12, 13, 1, 14, 3]
        );
    }

    #[test]
    fn the_limit_keeps_the_ends() {
        let vocabulary = vocabulary();
        let ids = vocabulary.encode("read read read read read", 4);
        assert_eq!(ids, [2, 4, 4, 3]);
        assert_eq!(vocabulary.encode("", 4), [2, 3]);
    }
}
