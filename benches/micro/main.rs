//! Micro-benchmarks of the hot path's parts, each in its own file with the question it
//! answers: reading a request and writing the upstream's (`envelope`), finding a tool's route
//! (`catalog`), serving a merged list (`lists`), finding a session (`sessions`), searching
//! tools and checking a call's arguments (`search`), screening a result (`guardrail`).
//!
//! Run with `cargo bench --bench micro` (or `-- envelope` for one group).

mod catalog;
mod envelope;
mod guardrail;
mod lists;
mod search;
mod sessions;

use criterion::{criterion_group, criterion_main};

criterion_group!(
    benches,
    envelope::request_and_answer,
    catalog::route_lookup,
    lists::merged_tools_list,
    sessions::session_lookup,
    search::tool_search,
    guardrail::screening
);
criterion_main!(benches);

/// A catalog of `upstreams` × `per_upstream` tools (`upstream-{u}__tool_{i}`).
pub fn catalog(upstreams: usize, per_upstream: usize) -> switchyard::catalog::Catalog {
    use std::sync::Arc;

    use serde_json::json;
    use switchyard::{
        catalog::{Catalog, NameScheme, UpstreamCatalog},
        names::UpstreamName,
    };

    let tools: Vec<_> = (0..per_upstream)
        .map(|i| {
            let serde_json::Value::Object(schema) = json!({
                "type": "object",
                "properties": {"text": {"type": "string", "description": "What to work on."}},
                "required": ["text"]
            }) else {
                unreachable!()
            };
            rmcp::model::Tool::new(
                format!("tool_{i}"),
                "A tool that does one thing well.",
                schema,
            )
        })
        .collect();
    let parts: Vec<_> = (0..upstreams)
        .map(|u| {
            let part = UpstreamCatalog {
                tools: tools.iter().cloned().map(Into::into).collect(),
                ..UpstreamCatalog::default()
            };
            (
                UpstreamName::new(&format!("upstream-{u}")).unwrap(),
                Arc::new(part),
            )
        })
        .collect();
    Catalog::build(NameScheme::prefixed("__"), &parts)
}
