//! Arguments and schemas built to make checking them expensive: a deeply nested argument to a
//! tool with an ordinary recursive filter schema, and upstreams listing schemas whose checks
//! multiply at every level or fan out through references. The gateway answers at once with a
//! clear refusal, leaves the unaffordable definitions out (named and counted) while the rest of
//! the upstream is served, and the upstream never sees a refused call. (What one check costs
//! in memory and CPU is measured in `catalog::arguments::tests`, on the checking thread.)

use serde_json::{Map, Value, json};

use crate::{
    definitions::{call, served_and_rejected},
    fixtures::scripted::Scripted,
    harness::GatewayBuilder,
    replicas::cluster::raw_session,
};

fn filter_tool() -> Value {
    json!({
        "name": "search",
        "inputSchema": {
            "type": "object",
            "properties": {"filter": {"$ref": "#/$defs/filter"}},
            "$defs": {"filter": {"anyOf": [
                {"type": "object", "required": ["field"], "properties": {
                    "field": {"type": "string"},
                    "equals": {"type": "string"},
                    "not": {"$ref": "#/$defs/filter"}
                }},
                {"type": "object", "required": ["all"], "properties": {
                    "all": {"type": "array", "items": {"$ref": "#/$defs/filter"}},
                    "not": {"$ref": "#/$defs/filter"}
                }}
            ]}}
        }
    })
}

/// 4 × 4 × 4 nested `anyOf`, each leaf going round again through `next`.
fn multiplying_tool() -> Value {
    fn level(levels: usize) -> Value {
        if levels == 0 {
            return json!({"type": "object", "properties": {"next": {"$ref": "#"}}});
        }
        json!({"anyOf": (0..4).map(|n| {
            let mut branch = level(levels - 1);
            branch["minProperties"] = json!(n);
            branch
        }).collect::<Vec<_>>()})
    }
    json!({"name": "multiply", "inputSchema": level(3)})
}

/// Forty references, each to the one before twice: 2^40 ways to one subschema.
fn fanning_tool() -> Value {
    let mut defs = Map::new();
    defs.insert("d0".into(), json!({"type": "integer"}));
    for k in 1..=40 {
        let previous = format!("#/$defs/d{}", k - 1);
        defs.insert(
            format!("d{k}"),
            json!({"anyOf": [{"$ref": previous}, {"$ref": previous}]}),
        );
    }
    json!({"name": "fan", "inputSchema": {
        "type": "object", "properties": {"x": {"$ref": "#/$defs/d40"}}, "$defs": defs
    }})
}

fn negations(levels: usize, bottom: Value) -> Value {
    let mut filter = bottom;
    for _ in 0..levels {
        filter = json!({"not": filter});
    }
    json!({"filter": filter})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemas_and_arguments_built_to_exhaust_the_check_are_answered_at_once() {
    let server =
        Scripted::start(json!({"tools": [filter_tool(), multiplying_tool(), fanning_tool()]}))
            .await;
    let gw = GatewayBuilder::new()
        .http("up", &server.url())
        .start()
        .await;
    let (names, rejected) = served_and_rejected(&gw).await;
    assert_eq!(names, ["up__search"]);
    for name in ["multiply", "fan"] {
        let (_, why) = rejected
            .iter()
            .find(|(rejected, _)| rejected == name)
            .unwrap_or_else(|| panic!("{name} not named among {rejected:?}"));
        assert!(why.contains("cannot be checked"), "{why}");
    }
    let metrics = gw.metrics_text().await;
    assert!(
        metrics.contains("switchyard_catalog_rejected{upstream=\"up\"} 2"),
        "{metrics}"
    );

    let (url, session) = (gw.url(), raw_session(&gw.url()).await);
    // 184 bytes, 18 levels deep: refused before any of it is checked.
    let deep = negations(18, json!({"field": 1}));
    assert!(deep.to_string().len() < 200);
    let refused = call(&url, &session, "up__search", deep).await.unwrap_err();
    assert!(refused.starts_with("isError"), "{refused}");
    assert!(refused.contains("cannot be checked"), "{refused}");
    assert!(refused.contains("less deeply"), "{refused}");
    // Filters of the depth people write are checked, and a broken one is named.
    let broken = call(
        &url,
        &session,
        "up__search",
        negations(3, json!({"field": 1})),
    )
    .await
    .unwrap_err();
    assert!(
        broken.starts_with("isError") && broken.contains("/filter"),
        "{broken}"
    );
    assert!(server.calls("search").is_empty());
    let fine = json!({"filter": {"field": "state", "not": {"all": [
        {"field": "label", "equals": "wontfix"},
        {"field": "author", "not": {"field": "author", "equals": "bot"}}
    ]}}});
    call(&url, &session, "up__search", fine.clone())
        .await
        .unwrap();
    assert_eq!(server.calls("search"), [fine]);
}
