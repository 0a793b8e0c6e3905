//! Tool search's semantic score (`[catalog] search_model`): each tool's text and each query
//! become unit vectors of a sentence encoder (`switchyard-embed`), so that "save this page for
//! later" finds a bookmarking tool that shares none of its words. The vectors' ranking is fused
//! with the lexical one (reciprocal ranks), never replaces it: a product's or a tool's own name
//! still finds it first.
//!
//! A tool's vector costs some milliseconds of CPU, so it is made once per text: the model
//! (`crate::meaning`) keeps what it made by the text's hash, and a snapshot (or a view) whose
//! tools were embedded before costs only lookups. A catalog's vectors are made beside the
//! requests, when the snapshot is published or on its first search; until they are ready,
//! search is lexical.

use std::{
    collections::{HashMap, HashSet},
    sync::{
        OnceLock,
        atomic::{AtomicBool, Ordering},
    },
};

use super::{ListedTool, listed::parameters};
use crate::meaning::{SearchModel, ToolVector};

/// How many of each ranking's best are fused.
pub const CANDIDATES: usize = 200;
/// Reciprocal rank fusion: a tool at rank `r` (from 0) of a ranking scores
/// `weight / (FUSION_K + r + 1)`.
const FUSION_K: f32 = 5.0;
/// The semantic ranking's weight against the lexical one's (1): equal, chosen on the tuning
/// half of the search evaluation once queries were expanded with synonyms.
const SEMANTIC_WEIGHT: f32 = 1.0;
/// Below this cosine a tool is not a semantic match at all (unrelated texts score about 0.1).
const MIN_SIMILARITY: f32 = 0.2;
/// How many vectors of texts a snapshot no longer lists the model keeps, beyond as many again
/// as the snapshot's: an upstream that is down for a while, or a reload that takes a server out
/// and back, costs nothing when it returns, and tools whose texts keep changing do not pile up.
const SPARE_VECTORS: usize = 1_000;
/// The most of a description a tool's vector is made from (its start says what it does).
const DESCRIPTION_CHARS: usize = 400;

/// The vectors of one catalog's tools (in its order), once made.
#[derive(Default)]
pub struct Meanings {
    vectors: OnceLock<Vec<ToolVector>>,
    /// Their making has begun (on a blocking thread).
    begun: AtomicBool,
}

impl std::fmt::Debug for Meanings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Meanings")
            .field("ready", &self.vectors.get().is_some())
            .finish()
    }
}

impl Meanings {
    /// Makes the vectors of `tools` with `model`, unless they are made. `whole`: these are a
    /// published snapshot's tools, all there are, so the model may forget other texts' vectors
    /// (when it holds more than `SPARE_VECTORS` beyond twice these).
    pub fn make(&self, model: &SearchModel, tools: &[ListedTool], whole: bool) {
        self.begun.store(true, Ordering::Relaxed);
        self.vectors.get_or_init(|| {
            let mut keys = HashSet::with_capacity(tools.len());
            let vectors = tools
                .iter()
                .map(|tool| {
                    let (key, vector) = model.tool(&text_of(tool));
                    keys.insert(key);
                    vector
                })
                .collect();
            if whole && model.known_count() > keys.len() * 2 + SPARE_VECTORS {
                model.keep_only(&keys);
            }
            vectors
        });
    }

    /// Claims the making of the vectors: true for the first caller, while none are made.
    pub fn claim(&self) -> bool {
        self.vectors.get().is_none() && !self.begun.swap(true, Ordering::Relaxed)
    }

    pub fn ready(&self) -> bool {
        self.vectors.get().is_some()
    }

    /// The positions of the tools closest in meaning to `query` (a query's vector), best
    /// first, at most `limit`; `None` while the vectors are not made.
    pub fn nearest(&self, query: &[f32], limit: usize) -> Option<Vec<(usize, f32)>> {
        Some(nearest(self.vectors.get()?, query, limit))
    }
}

/// The positions of the `vectors` closest to `query`, best first, at most `limit`, none below
/// `MIN_SIMILARITY` (public for the micro benchmark of a scan among 50,000 tools).
pub fn nearest(vectors: &[ToolVector], query: &[f32], limit: usize) -> Vec<(usize, f32)> {
    let ranked = vectors
        .iter()
        .enumerate()
        .map(|(position, vector)| (position, vector.dot(query)))
        .filter(|(_, similarity)| *similarity >= MIN_SIMILARITY)
        .collect();
    best(ranked, limit)
}

/// The `limit` best of `ranked` (positions with their scores), best first; equal scores in
/// the order of their positions.
pub(super) fn best(mut ranked: Vec<(usize, f32)>, limit: usize) -> Vec<(usize, f32)> {
    let by_score =
        |a: &(usize, f32), b: &(usize, f32)| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0));
    if ranked.len() > limit {
        ranked.select_nth_unstable_by(limit, by_score);
        ranked.truncate(limit);
    }
    ranked.sort_unstable_by(by_score);
    ranked
}

/// The text a tool's vector is made from: its name as words, its title, the start of its
/// description, and its parameters' names.
pub fn text_of(tool: &ListedTool) -> String {
    let name: String = tool
        .name
        .chars()
        .map(|c| if matches!(c, '_' | '-' | '.') { ' ' } else { c })
        .collect();
    let description = tool.description.as_deref().unwrap_or_default();
    let description = &description[..description.floor_char_boundary(DESCRIPTION_CHARS)];
    let parameters: Vec<&str> = parameters(&tool.input_schema)
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    format!(
        "{name}. {} {description} Parameters: {}",
        tool.title.as_deref().unwrap_or_default(),
        parameters.join(", ")
    )
}

/// The positions of both rankings fused by their reciprocal ranks, best first, at most
/// `limit`.
pub fn fuse(lexical: &[(usize, f32)], semantic: &[(usize, f32)], limit: usize) -> Vec<usize> {
    let mut scores: HashMap<usize, f32> = HashMap::with_capacity(lexical.len() + semantic.len());
    for (rank, (position, _)) in lexical.iter().enumerate() {
        *scores.entry(*position).or_default() += 1.0 / (FUSION_K + rank as f32 + 1.0);
    }
    for (rank, (position, _)) in semantic.iter().enumerate() {
        *scores.entry(*position).or_default() += SEMANTIC_WEIGHT / (FUSION_K + rank as f32 + 1.0);
    }
    let fused = best(scores.into_iter().collect(), limit);
    fused.into_iter().map(|(position, _)| position).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_rankings_count_and_agreement_wins() {
        let lexical = [(1, 9.0), (2, 5.0), (3, 1.0)];
        let semantic = [(4, 0.8), (2, 0.7), (5, 0.5), (1, 0.3)];
        // 2 is second in both; 1 first in one and fourth in the other; 4 first in one.
        assert_eq!(fuse(&lexical, &semantic, 3), [2, 1, 4]);
        assert_eq!(fuse(&lexical, &[], 2), [1, 2]);
        assert_eq!(fuse(&[], &semantic, 1), [4]);
    }
}
