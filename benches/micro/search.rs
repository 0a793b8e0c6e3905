//! How long does a tool search take among 50,000 tools (the real servers' recorded tools,
//! copied under as many upstream names as it takes), once the snapshot's index is built? And how long does checking
//! one call's arguments against its tool's schema take (reading them, then validating), and
//! compiling a schema at discovery (with the bound on what checking against it can cost,
//! beside the validator's compilation alone)?

use std::{hint::black_box, path::Path, sync::Arc};

use criterion::Criterion;
use serde_json::Value;
use switchyard::{
    catalog::{ArgumentCheck, Catalog, ListedTool, NameScheme, UpstreamCatalog},
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
    catalog.prepare_search();
    println!(
        "search index of {} tools built in {:?}",
        catalog.tools().len(),
        started.elapsed()
    );
    let mut group = c.benchmark_group("search");
    for query in [
        "open a new issue on GitHub",
        "read the contents of a text file",
        "what time is it now in Tokyo",
    ] {
        group.bench_function(
            format!("among_{}_tools/{query}", catalog.tools().len()),
            |b| b.iter(|| black_box(catalog.search_tools(black_box(query), 5))),
        );
    }
    group.finish();

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
