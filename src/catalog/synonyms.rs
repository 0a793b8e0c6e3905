//! Tool search's query expansion: the words a query means besides its own, from a table of the
//! words and phrases people use for what tools' texts call otherwise (`synonyms.txt`: "folder"
//! for directory, "kick off" for run, "pr" for pull request). Only queries are expanded, so the
//! index stays as it is built, and an expanded word weighs less than one the query says.

use std::{collections::HashMap, sync::LazyLock};

use super::words::words;

/// How much a word a query gets from the table weighs, against 1 for its own words.
pub const EXPANDED: f32 = 0.6;

/// The groups of `synonyms.txt`, each member as the index's words.
struct Table {
    groups: Vec<Vec<Vec<String>>>,
    /// A member's first word → (its group, its place in the group).
    by_first: HashMap<String, Vec<(usize, usize)>>,
}

static TABLE: LazyLock<Table> = LazyLock::new(|| {
    Table::parse(include_str!("synonyms.txt")).expect("synonyms.txt is well formed")
});

impl Table {
    /// Reads the table: a group per line, members separated by commas, `#` starting a
    /// comment line.
    fn parse(text: &str) -> Result<Self, String> {
        let mut groups = Vec::new();
        let mut by_first: HashMap<String, Vec<(usize, usize)>> = HashMap::new();
        for (number, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let mut group: Vec<Vec<String>> = Vec::new();
            for member in line.split(',') {
                let member_words = words(member);
                if member_words.is_empty() {
                    return Err(format!(
                        "line {}: `{}` has no word the index keeps",
                        number + 1,
                        member.trim()
                    ));
                }
                if !group.contains(&member_words) {
                    group.push(member_words);
                }
            }
            if group.len() < 2 {
                return Err(format!("line {}: a group needs two members", number + 1));
            }
            for (position, member) in group.iter().enumerate() {
                by_first
                    .entry(member[0].clone())
                    .or_default()
                    .push((groups.len(), position));
            }
            groups.push(group);
        }
        Ok(Self { groups, by_first })
    }

    /// For each distinct word of `query`, what a search looks for in its place: the word
    /// itself (weighing 1), then the words of every group that a word or phrase starting there
    /// belongs to (weighing `EXPANDED`), each once.
    fn expand(&self, query: &[String]) -> Vec<Vec<(String, f32)>> {
        let mut slots: Vec<Vec<(String, f32)>> = Vec::with_capacity(query.len());
        // A word's slot, found in constant time: a query may be long.
        let mut slot_of: HashMap<&str, usize> = HashMap::with_capacity(query.len());
        for (at, word) in query.iter().enumerate() {
            let known = *slot_of.entry(word).or_insert_with(|| {
                slots.push(vec![(word.clone(), 1.0)]);
                slots.len() - 1
            });
            let slot = &mut slots[known];
            for &(group, position) in self.by_first.get(word).into_iter().flatten() {
                let members = &self.groups[group];
                if !query[at..].starts_with(&members[position]) {
                    continue;
                }
                for word in members.iter().flatten() {
                    if !slot.iter().any(|(known, _)| known == word) {
                        slot.push((word.clone(), EXPANDED));
                    }
                }
            }
        }
        slots
    }
}

/// What a search for `query`'s words looks for: for each distinct word, the word and what the
/// table adds for it, with their weights. A tool scores, for each word, by the best of these it
/// has, so that several words of one meaning do not add up.
pub fn expand(query: &[String]) -> Vec<Vec<(String, f32)>> {
    TABLE.expand(query)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn terms(query: &str) -> Vec<(String, f32)> {
        expand(&words(query)).concat()
    }

    fn weight(terms: &[(String, f32)], word: &str) -> Option<f32> {
        terms
            .iter()
            .find(|(w, _)| w == word)
            .map(|(_, weight)| *weight)
    }

    #[test]
    fn the_shipped_table_parses() {
        assert!(TABLE.groups.len() > 50);
    }

    #[test]
    fn each_word_brings_its_groups_words_weighing_less() {
        let slots = expand(&words("make a new folder, a new one"));
        // One slot per distinct word, led by the word itself.
        let leads: Vec<&str> = slots.iter().map(|slot| slot[0].0.as_str()).collect();
        assert_eq!(leads, ["make", "new", "folder", "one"]);
        assert!(slots.iter().all(|slot| slot[0].1 == 1.0));
        assert_eq!(weight(&slots[0], "create"), Some(EXPANDED));
        assert_eq!(weight(&slots[2], "directory"), Some(EXPANDED));
        assert_eq!(slots[3].len(), 1);
        // Within a slot, each word once, the slot's own first.
        for slot in &slots {
            let mut seen: Vec<&str> = slot.iter().map(|(word, _)| word.as_str()).collect();
            seen.sort_unstable();
            seen.dedup();
            assert_eq!(seen.len(), slot.len());
            assert!(slot[1..].iter().all(|(_, weight)| *weight == EXPANDED));
        }
    }

    #[test]
    fn a_phrase_counts_only_as_consecutive_words() {
        assert_eq!(
            weight(&terms("kick off the nightly job"), "run"),
            Some(EXPANDED)
        );
        assert_eq!(weight(&terms("open my pull request"), "pr"), Some(EXPANDED));
        // The same words apart are not the phrase.
        assert_eq!(weight(&terms("kick the ball off"), "run"), None);
        // Endings are taken off as the index does.
        assert_eq!(weight(&terms("kicked off"), "execute"), Some(EXPANDED));
    }

    #[test]
    fn a_query_outside_the_table_is_its_own_words() {
        assert_eq!(
            terms("zebra quantum"),
            [("zebra".to_owned(), 1.0), ("quantum".to_owned(), 1.0)]
        );
    }

    /// Each group bridges to the tools: one of its members at least is said in the words of
    /// the real servers' recorded tools (names, titles, descriptions, parameters), so that no
    /// group only links words no tool uses.
    #[test]
    fn every_group_reaches_words_that_real_tools_use() {
        let fixtures = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/fixtures");
        let mut used = std::collections::HashSet::new();
        let mut add = |text: Option<&str>| used.extend(words(text.unwrap_or_default()));
        for dir in ["recorded", "recorded-more"] {
            for entry in std::fs::read_dir(format!("{fixtures}/{dir}")).unwrap() {
                let path = entry.unwrap().path();
                if path.extension().is_none_or(|extension| extension != "json") {
                    continue;
                }
                let recorded: serde_json::Value =
                    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
                for tool in recorded["tools"].as_array().unwrap() {
                    for field in ["name", "title", "description"] {
                        add(tool[field].as_str());
                    }
                    let properties = tool["inputSchema"]["properties"].as_object();
                    for (name, property) in properties.into_iter().flatten() {
                        add(Some(name));
                        add(property["description"].as_str());
                    }
                }
            }
        }
        assert!(used.len() > 1_000, "{} words", used.len());
        for group in &TABLE.groups {
            assert!(
                group
                    .iter()
                    .any(|member| member.iter().all(|word| used.contains(word))),
                "no recorded tool uses any of {group:?}"
            );
        }
    }

    #[test]
    fn malformed_tables_are_refused_with_their_line() {
        let error = Table::parse("# groups\nfolder, directory\nthe, of\n")
            .err()
            .unwrap();
        assert!(error.contains("line 3"), "{error}");
        let error = Table::parse("folder\n").err().unwrap();
        assert!(error.contains("line 1") && error.contains("two"), "{error}");
    }
}
