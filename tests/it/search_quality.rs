//! How well tool search finds the tool a person means, on real servers' recorded tool lists
//! (`fixtures/recorded` and `fixtures/recorded-more`, one file per server, recorded with
//! `fixtures/recorded/record.py`).
//!
//! - `search-eval.json`: queries written from the tasks people bring ("save this page for
//!   later"), each naming the tool that does it and any other that would do as well. Four
//!   kinds: `task` (the person's own words), `paraphrase` (no word in common with the tool's
//!   text), `vague` (an intent, under-specified) and `product` (the service named, not the
//!   action). Half of them tune the ranking; the other half (`held-out`) is only ever measured.
//!   `cargo test --test it search_quality -- --nocapture` prints recall@1, recall@5 and MRR per
//!   half, kind and word overlap, with the tuning half's misses (never the held-out half's).
//! - `search-queries.json`: 111 older queries, written from the tools' own text.
//!
//! Both are kept from dropping below what was measured.

use std::{collections::HashSet, fmt, path::Path, sync::Arc};

use serde::Deserialize;
use serde_json::Value;
use switchyard::{
    catalog::{Catalog, ListedTool, NameScheme, SearchModel, UpstreamCatalog},
    config::PrefixMode,
    names::UpstreamName,
};

/// How many results a search returns here: ranks beyond it count as not found.
const LIMIT: usize = 10;

fn fixture(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/it/fixtures")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

/// The real servers' recorded tools (`recorded`, and `recorded-more`: the servers only search
/// is measured on), as one catalog, each server's tools prefixed with its file's name.
fn recorded_catalog() -> Catalog {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/fixtures");
    let mut files: Vec<_> = ["recorded", "recorded-more"]
        .iter()
        .flat_map(|dir| std::fs::read_dir(fixtures.join(dir)).unwrap())
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    let parts: Vec<(UpstreamName, Arc<UpstreamCatalog>)> = files
        .iter()
        .map(|path| {
            let recorded: Value =
                serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
            let tools = recorded["tools"]
                .as_array()
                .unwrap()
                .iter()
                .map(|tool| ListedTool::from_value(tool.clone()).unwrap())
                .collect();
            let name = path.file_stem().unwrap().to_str().unwrap();
            let part = UpstreamCatalog {
                tools,
                ..UpstreamCatalog::default()
            };
            (UpstreamName::new(name).unwrap(), Arc::new(part))
        })
        .collect();
    Catalog::build(
        NameScheme::new(PrefixMode::Always, "__", parts.len()),
        &parts,
    )
}

/// One query of the evaluation set.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Query {
    query: String,
    /// The tool that does what the query asks.
    tool: String,
    /// Other tools that would do it as well.
    #[serde(default)]
    also: Vec<String>,
    kind: String,
    half: String,
}

/// Recall at 1 and 5 and the mean reciprocal rank of a group of queries.
#[derive(Default)]
struct Figures {
    queries: usize,
    first: usize,
    top5: usize,
    reciprocal: f64,
}

impl Figures {
    fn add(&mut self, rank: Option<usize>) {
        self.queries += 1;
        if let Some(rank) = rank {
            self.first += usize::from(rank == 0);
            self.top5 += usize::from(rank < 5);
            self.reciprocal += 1.0 / (rank + 1) as f64;
        }
    }

    fn recall_at_1(&self) -> f64 {
        self.first as f64 / self.queries.max(1) as f64
    }

    fn recall_at_5(&self) -> f64 {
        self.top5 as f64 / self.queries.max(1) as f64
    }

    fn mrr(&self) -> f64 {
        self.reciprocal / self.queries.max(1) as f64
    }
}

impl fmt::Display for Figures {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:>4} {:>6.2} {:>6.2} {:>6.2}",
            self.queries,
            self.recall_at_1(),
            self.recall_at_5(),
            self.mrr()
        )
    }
}

/// The position (from 0) of the first acceptable tool among the results for `query`.
fn rank(
    catalog: &Catalog,
    model: Option<&SearchModel>,
    query: &str,
    acceptable: &[&str],
) -> Option<usize> {
    catalog
        .search_tools(query, LIMIT, model)
        .iter()
        .position(|tool| acceptable.contains(&tool.name.as_ref()))
}

/// The words of `text` as this evaluation compares them, independently of the index: split at
/// anything but letters and digits and at camelCase humps, lowercased, a plural `s` taken off,
/// without a few function words.
fn plain_words(text: &str) -> HashSet<String> {
    const FUNCTION_WORDS: &[&str] = &[
        "a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "i", "in", "is", "it",
        "me", "my", "of", "on", "or", "the", "this", "to", "with", "what", "all", "any", "some",
    ];
    let mut spaced = String::new();
    let mut previous = ' ';
    for c in text.chars() {
        if !c.is_alphanumeric() {
            spaced.push(' ');
        } else {
            if previous.is_lowercase() && c.is_uppercase() {
                spaced.push(' ');
            }
            spaced.extend(c.to_lowercase());
        }
        previous = c;
    }
    spaced
        .split_whitespace()
        .filter(|word| !FUNCTION_WORDS.contains(word))
        .map(|word| match word.strip_suffix('s') {
            Some(stem) if stem.len() >= 3 && !stem.ends_with('s') => stem.to_owned(),
            _ => word.to_owned(),
        })
        .collect()
}

/// The words of a tool's own text: name, title, description, parameters' names and
/// descriptions (not its server's name).
fn tool_words(tool: &ListedTool, original: &str) -> HashSet<String> {
    let mut text = format!(
        "{original} {} {}",
        tool.title.as_deref().unwrap_or_default(),
        tool.description.as_deref().unwrap_or_default()
    );
    if let Some(Value::Object(properties)) = tool.input_schema.get("properties") {
        for (name, schema) in properties {
            text.push(' ');
            text.push_str(name);
            if let Some(Value::String(description)) = schema.get("description") {
                text.push(' ');
                text.push_str(description);
            }
        }
    }
    plain_words(&text)
}

/// The evaluation set measured (by words alone, or with `model` by meaning too): prints the
/// table and the tuning half's misses; gives the figures of each half and of its paraphrases.
fn evaluate(
    catalog: &Catalog,
    model: Option<&SearchModel>,
    queries: &[Query],
) -> ([Figures; 2], [Figures; 2]) {
    const HALVES: [&str; 2] = ["tuning", "held-out"];
    const KINDS: [&str; 4] = ["task", "paraphrase", "vague", "product"];
    let mut halves = [Figures::default(), Figures::default()];
    let mut kinds: [[Figures; 4]; 2] = Default::default();
    // Whether the query shares a word with its tool's own text.
    let mut overlap: [[Figures; 2]; 2] = Default::default();
    let mut misses = Vec::new();
    for query in queries {
        let half = HALVES.iter().position(|h| *h == query.half);
        let kind = KINDS.iter().position(|k| *k == query.kind);
        let (Some(half), Some(kind)) = (half, kind) else {
            panic!("`{}`: unknown half or kind", query.query);
        };
        let acceptable: Vec<&str> = std::iter::once(query.tool.as_str())
            .chain(query.also.iter().map(String::as_str))
            .collect();
        for name in &acceptable {
            assert!(
                catalog.tool(name).is_some(),
                "`{name}` is not a recorded tool"
            );
        }
        let tool = catalog.tool_definition(&query.tool).unwrap();
        let original = query.tool.split_once("__").unwrap().1;
        let shared = !plain_words(&query.query).is_disjoint(&tool_words(tool, original));
        let rank = rank(catalog, model, &query.query, &acceptable);
        halves[half].add(rank);
        kinds[half][kind].add(rank);
        overlap[half][usize::from(!shared)].add(rank);
        if half == 0 && rank.is_none_or(|rank| rank >= 5) {
            let found: Vec<String> = (catalog.search_tools(&query.query, 3, model).iter())
                .map(|tool| tool.name.to_string())
                .collect();
            misses.push(format!(
                "[{}] {} → {} at {}; first: {found:?}",
                query.kind,
                query.query,
                query.tool,
                rank.map_or("none".to_owned(), |rank| (rank + 1).to_string()),
            ));
        }
    }
    let ranking = match model {
        Some(model) => format!("words and meaning ({})", model.path().display()),
        None => "words alone".to_owned(),
    };
    println!(
        "tool search over {} tools of the recorded servers, {} queries, by {ranking}",
        catalog.tools().len(),
        queries.len()
    );
    println!(
        "{:<9} {:<20} {:>4} {:>6} {:>6} {:>6}",
        "half", "queries", "n", "R@1", "R@5", "MRR"
    );
    for (h, half) in HALVES.iter().enumerate() {
        println!("{half:<9} {:<20} {}", "all", halves[h]);
        for (k, kind) in KINDS.iter().enumerate() {
            println!("{half:<9} {:<20} {}", format!("kind {kind}"), kinds[h][k]);
        }
        println!("{half:<9} {:<20} {}", "sharing a word", overlap[h][0]);
        println!("{half:<9} {:<20} {}", "sharing no word", overlap[h][1]);
    }
    println!("tuning half, not in the top 5:");
    for miss in &misses {
        println!("  {miss}");
    }
    let [tuning, held_out] = kinds;
    let paraphrases = [tuning, held_out].map(|kinds| {
        let [_, paraphrase, _, _] = kinds;
        paraphrase
    });
    (halves, paraphrases)
}

/// Whether each half keeps its floors.
fn assert_floors(halves: [Figures; 2], floors: [[f64; 2]; 2], ranking: &str) {
    for ((half, figures), [recall, mrr]) in ["tuning", "held-out"].iter().zip(halves).zip(floors) {
        assert!(
            figures.recall_at_5() >= recall && figures.mrr() >= mrr,
            "{half}, by {ranking}: recall@5 {:.3} and MRR {:.3}, below {recall} and {mrr}",
            figures.recall_at_5(),
            figures.mrr()
        );
    }
}

#[test]
fn search_finds_the_tool_a_person_means() {
    let catalog = recorded_catalog();
    let queries: Vec<Query> = serde_json::from_str(&fixture("search-eval.json")).unwrap();
    assert!(queries.len() >= 300, "{} queries", queries.len());
    let (halves, _) = evaluate(&catalog, None, &queries);
    assert_floors(halves, [TUNING_FLOORS, HELD_OUT_FLOORS], "words alone");
}

/// Recall@5 and MRR that each half keeps (measured, less a little: 0.52 and 0.41 on the
/// tuning half, 0.50 and 0.40 held out, with BM25 and the synonym table; 0.43 and 0.35, 0.47
/// and 0.37 without the table).
const TUNING_FLOORS: [f64; 2] = [0.50, 0.39];
const HELD_OUT_FLOORS: [f64; 2] = [0.48, 0.38];

/// With a sentence encoder (`[catalog] search_model`; the one of
/// `tests/search-model/requirements.txt`), search finds by meaning what shares no word with
/// the query, and keeps finding what does.
#[test]
fn search_by_meaning_finds_what_words_miss() {
    // An instance of its own: the gateways of other tests share theirs, and forget the
    // vectors of tools they do not list.
    let model = SearchModel::load(crate::deps::search_model()).unwrap();
    let catalog = recorded_catalog();
    let queries: Vec<Query> = serde_json::from_str(&fixture("search-eval.json")).unwrap();
    let started = std::time::Instant::now();
    catalog.prepare_search(Some(&model));
    println!(
        "{} tools embedded in {:.1}s",
        catalog.tools().len(),
        started.elapsed().as_secs_f64()
    );
    assert!(catalog.meanings_ready());
    let (lexical, lexical_paraphrases) = evaluate(&catalog, None, &queries);
    let (fused, fused_paraphrases) = evaluate(&catalog, Some(&model), &queries);
    for (half, (words, both)) in lexical_paraphrases
        .iter()
        .zip(&fused_paraphrases)
        .enumerate()
    {
        assert!(
            both.recall_at_5() >= words.recall_at_5() + MEANING_FINDS_MORE_PARAPHRASES,
            "half {half}: paraphrases found at 5 by words {:.2}, with meaning {:.2}",
            words.recall_at_5(),
            both.recall_at_5()
        );
    }
    for (words, both) in lexical.iter().zip(&fused) {
        assert!(
            both.mrr() > words.mrr(),
            "{:.3} ≤ {:.3}",
            both.mrr(),
            words.mrr()
        );
    }
    assert_floors(
        fused,
        [FUSED_TUNING_FLOORS, FUSED_HELD_OUT_FLOORS],
        "meaning",
    );

    // Written out and read back by another instance (a restart), the vectors serve a new
    // snapshot without being made again, and rank as they did.
    let bytes = model.to_bytes();
    let again = SearchModel::load(crate::deps::search_model()).unwrap();
    assert_eq!(again.restore(&bytes).unwrap(), catalog.tools().len());
    let snapshot = recorded_catalog();
    snapshot.prepare_search(Some(&again));
    assert!(!again.take_unsaved(), "vectors were made again");
    for query in ["will it rain in Paris tomorrow", "keep this page for later"] {
        let names = |catalog: &Catalog, model: &SearchModel| -> Vec<String> {
            (catalog.search_tools(query, 5, Some(model)).iter())
                .map(|tool| tool.name.to_string())
                .collect()
        };
        assert_eq!(names(&catalog, &model), names(&snapshot, &again), "{query}");
    }
    // A file of the earlier version, whose numbers were f32s, is read too: the vectors rank
    // as they did.
    let dimensions = u32::from_le_bytes(bytes[28..32].try_into().unwrap()) as usize;
    let mut earlier = b"switchyard search vectors 1\n".to_vec();
    earlier.extend_from_slice(&bytes[28..32]);
    for record in bytes[32..].chunks_exact(12 + dimensions) {
        let (key, rest) = record.split_at(8);
        let (scale, numbers) = rest.split_at(4);
        let scale = f32::from_le_bytes(scale.try_into().unwrap());
        earlier.extend_from_slice(key);
        for number in numbers {
            earlier.extend_from_slice(&(f32::from(*number as i8) * scale).to_le_bytes());
        }
    }
    let upgraded = SearchModel::load(crate::deps::search_model()).unwrap();
    assert_eq!(upgraded.restore(&earlier).unwrap(), catalog.tools().len());
    assert_eq!(upgraded.to_bytes().len(), bytes.len());
    assert!(
        upgraded.take_unsaved(),
        "an earlier file is written again as bytes"
    );
    let snapshot = recorded_catalog();
    snapshot.prepare_search(Some(&upgraded));
    assert!(!upgraded.take_unsaved(), "vectors were made again");
    let names = |catalog: &Catalog, model: &SearchModel| -> Vec<String> {
        (catalog
            .search_tools("keep this page for later", 5, Some(model))
            .iter())
        .map(|tool| tool.name.to_string())
        .collect()
    };
    assert_eq!(names(&catalog, &model), names(&snapshot, &upgraded));
    // Bytes cut short, or of vectors of another length, are refused, and nothing is taken.
    let fresh = SearchModel::load(crate::deps::search_model()).unwrap();
    assert!(fresh.restore(&bytes[..bytes.len() - 3]).is_err());
    assert!(
        fresh
            .restore(b"switchyard search vectors 1\n\x10\0\0\0")
            .is_err()
    );
    assert!(
        fresh
            .restore(b"switchyard search vectors 2\n\x10\0")
            .is_err()
    );
    assert!(fresh.restore(b"something else").is_err());
    assert_eq!(fresh.known_count(), 0);
}

/// What each half keeps with the model (measured, less a little: 0.59 and 0.47 on the tuning
/// half, 0.62 and 0.49 held out, with all-MiniLM-L6-v2).
const FUSED_TUNING_FLOORS: [f64; 2] = [0.57, 0.45];
const FUSED_HELD_OUT_FLOORS: [f64; 2] = [0.60, 0.47];

/// How many more of the paraphrases (no word in common with their tool's text) the model
/// finds at 5 than words do, in each half (measured: 0.14 on the tuning half, whose misses the
/// synonym table was written from, and 0.15 held out; 0.22 and 0.18 before the table).
const MEANING_FINDS_MORE_PARAPHRASES: f64 = 0.12;

/// The older queries, each written from its tool's text and naming it alone.
#[test]
fn search_finds_tools_by_what_their_text_says() {
    let catalog = recorded_catalog();
    let queries: Vec<(String, String)> =
        serde_json::from_str(&fixture("search-queries.json")).unwrap();
    assert!(queries.len() >= 100);
    let mut figures = Figures::default();
    let mut misses = Vec::new();
    for (query, expected) in &queries {
        assert!(
            catalog.tool(expected).is_some(),
            "`{expected}` is not a recorded tool"
        );
        let rank = rank(&catalog, None, query, &[expected]);
        figures.add(rank);
        if rank.is_none_or(|rank| rank >= 5) {
            misses.push(format!("{query} → {expected} at {rank:?}"));
        }
    }
    println!(
        "queries from the tools' text over {} tools: n, R@1, R@5, MRR {figures}",
        catalog.tools().len()
    );
    assert!(
        figures.recall_at_5() >= DESCRIPTIVE_FLOORS[0] && figures.mrr() >= DESCRIPTIVE_FLOORS[1],
        "recall@5 {:.3}, MRR {:.3} dropped:\n{misses:#?}",
        figures.recall_at_5(),
        figures.mrr()
    );
}

/// What the older queries keep (measured, less a little: 0.97 and 0.85 among the 61 servers'
/// tools, 0.964 and 0.834 before the synonym table; 0.991 and 0.940 among the first 16
/// servers' alone, where fewer tools of other servers do the same).
const DESCRIPTIVE_FLOORS: [f64; 2] = [0.95, 0.83];
