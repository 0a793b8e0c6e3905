//! Tool search: a BM25 index over the tools of one catalog (or view), built when the snapshot is
//! published (where an endpoint serves search) or on first use, and kept with it, so that a
//! snapshot is indexed once. A tool is one document whose fields
//! weigh differently: its name (split on `_`, `-`, `.` and camelCase, the prefix too), its
//! title, its upstream's name, its description, and its parameters' names and descriptions.
//! Its words are those `words` keeps, so that "listing files" finds `list_file`; a query also
//! looks, weighing less, for the words that mean what its own do (`synonyms`).

use std::collections::HashMap;

use super::{
    Catalog, ListedTool, SearchModel,
    listed::parameters,
    semantic::{CANDIDATES, best, fuse},
    synonyms::expand,
    view::Lens,
    words::words,
};

/// The most tools a catalog may have for an unknown name's closest tools to be looked up
/// without a search index built already (building one for 1,000 tools takes a few
/// milliseconds).
const CLOSEST_WITHOUT_INDEX: usize = 1_000;

/// BM25's term-frequency saturation and length normalization.
const K1: f32 = 1.2;
const B: f32 = 0.75;

/// How much a word counts in each field.
const NAME: f32 = 3.0;
const TITLE: f32 = 2.0;
const UPSTREAM: f32 = 1.5;
const DESCRIPTION: f32 = 1.0;
const PARAMETER: f32 = 1.0;
const PARAMETER_DESCRIPTION: f32 = 0.5;

/// What one tool offers to be found by.
pub struct Document<'a> {
    pub name: &'a str,
    pub title: Option<&'a str>,
    pub upstream: &'a str,
    pub description: Option<&'a str>,
    /// Its input schema's top-level properties: name and description.
    pub parameters: Vec<(&'a str, Option<&'a str>)>,
}

/// The index of a list of tools.
#[derive(Debug, Default)]
pub struct SearchIndex {
    /// Word → (tool's position, weighted count of the word in it).
    postings: HashMap<Box<str>, Vec<(u32, f32)>>,
    /// Each tool's weighted length.
    lengths: Vec<f32>,
    average: f32,
}

impl SearchIndex {
    pub fn build<'a>(documents: impl IntoIterator<Item = Document<'a>>) -> Self {
        let mut postings: HashMap<Box<str>, Vec<(u32, f32)>> = HashMap::new();
        let mut lengths = Vec::new();
        let mut counts: HashMap<String, f32> = HashMap::new();
        for (position, document) in documents.into_iter().enumerate() {
            counts.clear();
            let mut add = |text: &str, weight: f32| {
                for word in words(text) {
                    *counts.entry(word).or_default() += weight;
                }
            };
            add(document.name, NAME);
            add(document.title.unwrap_or_default(), TITLE);
            add(document.upstream, UPSTREAM);
            add(document.description.unwrap_or_default(), DESCRIPTION);
            for (parameter, description) in &document.parameters {
                add(parameter, PARAMETER);
                add(description.unwrap_or_default(), PARAMETER_DESCRIPTION);
            }
            lengths.push(counts.values().sum());
            for (word, count) in counts.drain() {
                postings
                    .entry(word.into_boxed_str())
                    .or_default()
                    .push((position as u32, count));
            }
        }
        let average = if lengths.is_empty() {
            1.0
        } else {
            (lengths.iter().sum::<f32>() / lengths.len() as f32).max(1.0)
        };
        Self {
            postings,
            lengths,
            average,
        }
    }

    /// The positions of the `limit` tools that match `query` best, best first, with their
    /// scores; tools that share no word with it, or with what it means (`synonyms`), are not
    /// returned.
    pub fn search(&self, query: &str, limit: usize) -> Vec<(usize, f32)> {
        let total = self.lengths.len() as f32;
        // Scores by position, and the positions scored (fewer than all, usually); for the
        // query word at hand, each position's best among the word and its synonyms.
        let mut scores = vec![0f32; self.lengths.len()];
        let mut touched: Vec<u32> = Vec::new();
        let mut best_of_word = vec![0f32; self.lengths.len()];
        let mut touched_by_word: Vec<u32> = Vec::new();
        for terms in expand(&words(query)) {
            for (word, weight) in terms {
                let Some(posting) = self.postings.get(word.as_str()) else {
                    continue;
                };
                let found_in = posting.len() as f32;
                let idf = weight * ((total - found_in + 0.5) / (found_in + 0.5) + 1.0).ln();
                for &(position, count) in posting {
                    let length = self.lengths[position as usize];
                    let norm = K1 * (1.0 - B + B * length / self.average);
                    let best = &mut best_of_word[position as usize];
                    if *best == 0.0 {
                        touched_by_word.push(position);
                    }
                    *best = best.max(idf * count * (K1 + 1.0) / (count + norm));
                }
            }
            for position in touched_by_word.drain(..) {
                let score = &mut scores[position as usize];
                if *score == 0.0 {
                    touched.push(position);
                }
                *score += std::mem::take(&mut best_of_word[position as usize]);
            }
        }
        let ranked = touched
            .into_iter()
            .map(|position| (position as usize, scores[position as usize]))
            .collect();
        best(ranked, limit)
    }
}

/// A catalog's tool search.
impl Catalog {
    /// The tools that match `query` best (at most `limit`), best first: by their words, and by
    /// their meaning too where `model` is given and this catalog's vectors are made. The first
    /// search of a snapshot whose index was not prepared builds it.
    pub fn search_tools(
        &self,
        query: &str,
        limit: usize,
        model: Option<&SearchModel>,
    ) -> Vec<&ListedTool> {
        let index = self.search_index();
        let semantic = model
            .filter(|_| self.meanings.ready())
            .and_then(|model| self.meanings.nearest(&model.query(query), CANDIDATES));
        let positions: Vec<usize> = match semantic {
            Some(semantic) => fuse(&index.search(query, CANDIDATES), &semantic, limit),
            None => (index.search(query, limit).into_iter())
                .map(|(position, _)| position)
                .collect(),
        };
        positions
            .into_iter()
            .map(|position| &self.tools[position])
            .collect()
    }

    /// Builds the tool search index now, if it is not built yet, and with `model` the tools'
    /// vectors (when a snapshot is published, so that no search waits for them; or on a
    /// blocking thread after a view's first search).
    pub fn prepare_search(&self, model: Option<&SearchModel>) {
        self.search_index();
        if let Some(model) = model {
            let whole = matches!(self.lens, Lens::Whole) && self.personal().is_empty();
            self.meanings.make(model, &self.tools, whole);
        }
    }

    /// Whether the tool search index is built.
    pub fn search_prepared(&self) -> bool {
        self.search.get().is_some()
    }

    /// Whether the tools' vectors are made (with a search model).
    pub fn meanings_ready(&self) -> bool {
        self.meanings.ready()
    }

    /// Claims the making of this catalog's vectors: true for the first caller, while they are
    /// not made; the caller then makes them (`prepare_search`).
    pub fn claim_meanings(&self) -> bool {
        self.meanings.claim()
    }

    /// The tools whose names and text are closest to `name`, a tool name that is not in this
    /// catalog (at most `limit`): from the search index if it is built, or if the catalog is
    /// small enough to build it on the spot; none otherwise. Words only: a name is not a
    /// sentence.
    pub fn closest_tools(&self, name: &str, limit: usize) -> Vec<&ListedTool> {
        if self.search.get().is_none() && self.tools.len() > CLOSEST_WITHOUT_INDEX {
            return Vec::new();
        }
        self.search_tools(name, limit, None)
    }

    fn search_index(&self) -> &SearchIndex {
        self.search.get_or_init(|| {
            let mut upstream_of = vec![""; self.tools.len()];
            for route in self.tool_routes.values() {
                upstream_of[route.index] = route.route.upstream.as_str();
            }
            SearchIndex::build(self.tools.iter().zip(upstream_of).map(|(tool, upstream)| {
                Document {
                    name: &tool.name,
                    title: tool.title.as_deref(),
                    upstream,
                    description: tool.description.as_deref(),
                    parameters: parameters(&tool.input_schema),
                }
            }))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn document<'a>(name: &'a str, description: &'a str) -> Document<'a> {
        Document {
            name,
            title: None,
            upstream: "up",
            description: Some(description),
            parameters: Vec::new(),
        }
    }

    #[test]
    fn the_tool_that_matches_best_comes_first() {
        let index = SearchIndex::build([
            document("fs__read_file", "Read the contents of a file"),
            document("fs__list_directory", "List the files in a directory"),
            document(
                "web__fetch",
                "Fetch a URL and return its content as markdown",
            ),
        ]);
        assert_eq!(index.search("read a file", 3)[0].0, 0);
        assert_eq!(index.search("listing directories", 3)[0].0, 1);
        assert_eq!(index.search("download a web page url", 3)[0].0, 2);
        assert!(index.search("weather", 3).is_empty());
        assert_eq!(index.search("file", 1).len(), 1);
    }

    #[test]
    fn synonyms_find_a_tool_but_do_not_add_up_past_its_own_words() {
        let index = SearchIndex::build([
            document("fs__get", "Fetch, retrieve, read, view or display anything"),
            document("fs__show", "Show a file"),
            document("fs__list_directory", "List the files in a directory"),
        ]);
        // Five words meaning "show" weigh less than the word itself.
        let found = index.search("show", 3);
        assert_eq!(found[0].0, 1);
        assert!(found.iter().any(|(position, _)| *position == 0));
        // A word the tools do not use finds them by the words they do.
        assert_eq!(index.search("folder", 3)[0].0, 2);
    }
}
