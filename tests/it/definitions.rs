//! Definitions as upstreams send them, and what the gateway does with them on the way: real
//! servers' recorded lists reach a client field for field, but for the prefix, over streamable
//! HTTP, legacy SSE and stdio (fields no SDK models included); a broken definition is left out and
//! reported while the rest of its upstream is served; a call whose arguments break the tool's
//! schema never reaches the upstream; cacheable calls reach it once, identical ones in flight
//! included.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::{
    deps,
    fixtures::scripted::{SLOW, Scripted},
    harness::{GatewayBuilder, Recorder, TestGateway, api_key, api_keys_section},
    replicas::cluster::{post, raw_session},
};

fn recorded_files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/fixtures/recorded");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| {
            path.extension()
                .is_some_and(|extension| extension == "json")
        })
        .collect();
    files.sort();
    files
}

fn recorded(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// A server whose definitions carry what no SDK models yet: vendor fields, nested ones, and
/// fields of a protocol newer than the SDK's.
fn future_lists() -> Value {
    json!({
        "tools": [{
            "name": "forecast",
            "description": "Tomorrow's weather",
            "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}},
                            "x-ui-order": ["city"]},
            "annotations": {"readOnlyHint": true, "x-cost-hint": "cheap"},
            "icons": [{"src": "https://example.com/sun.png", "x-scale": 2}],
            "execution": {"taskSupport": "optional"},
            "x-vendor": {"team": "weather", "tags": ["a", "b"]},
            "_meta": {"com.example/owner": "weather-team"}
        }],
        "prompts": [{"name": "brief", "arguments": [], "x-vendor": 1}],
        "resources": [{"uri": "weather://today", "name": "today", "x-etag": "w/1", "size": 10}],
        "resourceTemplates": [{"uriTemplate": "weather://{city}", "name": "city", "x-kind": "geo"}]
    })
}

/// Every page of `method`'s list through the gateway, for `session`.
async fn listed(url: &str, session: &str, method: &str, field: &str) -> Vec<Value> {
    let (status, body) = post(
        url,
        Some(session),
        json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": {}}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let message = body
        .lines()
        .filter_map(|line| line.strip_prefix("data: ").or(Some(line)))
        .find_map(|line| serde_json::from_str::<Value>(line).ok())
        .unwrap_or_else(|| panic!("no answer in {body}"));
    assert!(
        message["result"]["nextCursor"].is_null(),
        "one page expected"
    );
    message["result"][field]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// What `upstream` listed, as the client got it, with the prefix taken off again.
fn unprefixed(entries: &[Value], upstream: &str, key: &str) -> Vec<Value> {
    entries
        .iter()
        .filter_map(|entry| {
            let shown = entry[key].as_str()?;
            let original = match key {
                "name" => shown.strip_prefix(&format!("{upstream}__"))?.to_owned(),
                _ => shown.strip_prefix(&format!("{upstream}+"))?.to_owned(),
            };
            let mut entry = entry.clone();
            entry[key] = Value::String(original);
            Some(entry)
        })
        .collect()
}

/// Checks that every list of every `(upstream, recorded)` came through unchanged.
async fn compare(gw: &TestGateway, servers: &[(String, Value)]) {
    let session = raw_session(&gw.url()).await;
    let lists = [
        ("tools/list", "tools", "name"),
        ("prompts/list", "prompts", "name"),
        ("resources/list", "resources", "uri"),
        (
            "resources/templates/list",
            "resourceTemplates",
            "uriTemplate",
        ),
    ];
    let mut compared = 0;
    for (method, field, key) in lists {
        let got = listed(&gw.url(), &session, method, field).await;
        for (upstream, recorded) in servers {
            let sent = recorded[field].as_array().cloned().unwrap_or_default();
            let received = unprefixed(&got, upstream, key);
            assert_eq!(received, sent, "{upstream}'s {field} changed on the way");
            compared += sent.len();
        }
    }
    assert!(compared > 100, "only {compared} definitions compared");
}

/// The recorded lists of real servers, and one with fields from the future, served by a
/// server that sends JSON as it is over `transport`.
async fn served_over(transport: &str) {
    let mut servers = Vec::new();
    let mut builder = GatewayBuilder::new();
    let mut lists: Vec<(String, Value)> = recorded_files()
        .iter()
        .map(|path| {
            let name = path.file_stem().unwrap().to_str().unwrap().to_owned();
            (name, recorded(path))
        })
        .collect();
    lists.push(("future".into(), future_lists()));
    for (name, recorded) in &lists {
        let server = Scripted::start(recorded.clone()).await;
        let url = match transport {
            "sse" => server.sse_url(),
            _ => server.url(),
        };
        let body = format!(
            "transport = {transport:?}\nurl = {url:?}\nsession = \"shared\"\nconnect_timeout_seconds = 5"
        );
        builder = builder.upstream(name, &body);
        servers.push(server);
    }
    let gw = builder.start().await;
    compare(&gw, &lists).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_servers_definitions_reach_the_client_unchanged_over_http() {
    served_over("streamable_http").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_servers_definitions_reach_the_client_unchanged_over_legacy_sse() {
    served_over("sse").await;
}

/// The same over stdio, from a server that writes the recorded JSON lines itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_servers_definitions_reach_the_client_unchanged_over_stdio() {
    let script = deps::node_packages().join("replay-server.mjs");
    let dir = tempfile::tempdir().unwrap();
    let future = dir.path().join("future.json");
    std::fs::write(&future, future_lists().to_string()).unwrap();
    let mut files = recorded_files();
    files.push(future);
    let mut builder = GatewayBuilder::new();
    let mut lists = Vec::new();
    for path in &files {
        let name = path.file_stem().unwrap().to_str().unwrap().to_owned();
        let body = format!(
            "command = {:?}\nargs = [{:?}, {:?}]\nconnect_timeout_seconds = 30",
            deps::node22().display().to_string(),
            script.display().to_string(),
            path.display().to_string(),
        );
        builder = builder.upstream(&name, &body);
        lists.push((name, recorded(path)));
    }
    let gw = builder.start().await;
    compare(&gw, &lists).await;
}

/// A call's answer text, or its error message.
pub async fn call(
    url: &str,
    session: &str,
    tool: &str,
    arguments: Value,
) -> Result<String, String> {
    let (_, body) = post(
        url,
        Some(session),
        json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
               "params": {"name": tool, "arguments": arguments}}),
    )
    .await;
    let message = body
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .chain(std::iter::once(body.as_str()))
        .find_map(|line| serde_json::from_str::<Value>(line).ok())
        .unwrap_or_else(|| panic!("no answer in {body}"));
    let text = message["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    match message.get("error") {
        Some(error) => Err(format!("{} {}", error["code"], error["message"])),
        None if message["result"]["isError"] == true => Err(format!("isError {text}")),
        None => Ok(text),
    }
}

fn checked_tool() -> Value {
    json!({
        "name": "walk",
        "description": "Walks a directory",
        "inputSchema": {"type": "object", "required": ["path"], "properties": {
            "path": {"type": "string"},
            "depth": {"type": "integer", "minimum": 0}
        }}
    })
}

/// The tools `gw` serves, and the definitions of its first upstream left out (name, why), as
/// the admin API reports them.
pub async fn served_and_rejected(gw: &TestGateway) -> (Vec<String>, Vec<(String, String)>) {
    let names = (gw.gateway.live().catalog.tools().iter())
        .map(|tool| tool.name.to_string())
        .collect();
    let status = gw.admin_json("/api/status").await;
    let rejected = (status["servers"][0]["rejected"].as_array().unwrap().iter())
        .map(|r| {
            let text = |key: &str| r[key].as_str().unwrap().to_owned();
            (text("name"), text("reason"))
        })
        .collect();
    (names, rejected)
}

/// Broken definitions are left out, and reported; the rest of the upstream is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_definition_leaves_the_rest_of_its_upstream_served() {
    let server = Scripted::start(json!({"tools": [
        checked_tool(),
        {"name": "bad_schema", "inputSchema": {"type": "object", "properties": {"n": {"type": 12}}}},
        {"description": "no name", "inputSchema": {"type": "object"}},
        {"name": "not_an_object_schema", "inputSchema": "anything"},
        {"name": "walk", "description": "a second walk", "inputSchema": {"type": "object"}},
        {"name": "fine", "inputSchema": {"type": "object"}}
    ]}))
    .await;
    let gw = GatewayBuilder::new()
        .http("up", &server.url())
        .start()
        .await;
    let (names, rejected) = served_and_rejected(&gw).await;
    assert_eq!(names, ["up__walk", "up__fine"]);
    let rejected: Vec<(&str, &str)> = rejected
        .iter()
        .map(|(name, why)| (name.as_str(), why.as_str()))
        .collect();
    assert_eq!(rejected.len(), 4, "{rejected:?}");
    assert!(
        rejected
            .iter()
            .any(|(name, why)| *name == "bad_schema" && why.contains("JSON Schema"))
    );
    assert!(
        rejected
            .iter()
            .any(|(name, why)| name.is_empty() && why.contains("name"))
    );
    assert!(
        rejected
            .iter()
            .any(|(name, _)| *name == "not_an_object_schema")
    );
    assert!(
        rejected
            .iter()
            .any(|(name, why)| *name == "walk" && why.contains("before"))
    );
    let metrics = gw.metrics_text().await;
    assert!(
        metrics.contains("switchyard_catalog_rejected{upstream=\"up\"} 4"),
        "{metrics}"
    );
}

/// A call whose arguments break the tool's schema is refused, as the tool's failed result (a
/// model reads it and corrects the call) naming every problem, and the upstream never sees it;
/// with `validate_arguments = false` it goes on as it is. An unknown tool stays an error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arguments_that_break_the_schema_never_reach_the_upstream() {
    let checked = Scripted::start(json!({"tools": [checked_tool()]})).await;
    let unchecked = Scripted::start(json!({"tools": [checked_tool()]})).await;
    let gw = GatewayBuilder::new()
        .http("checked", &checked.url())
        .http_with("unchecked", &unchecked.url(), "validate_arguments = false")
        .start()
        .await;
    let session = raw_session(&gw.url()).await;
    let url = gw.url();
    let refused = call(
        &url,
        &session,
        "checked__walk",
        json!({"path": "/", "depth": "deep"}),
    )
    .await
    .unwrap_err();
    assert!(refused.starts_with("isError"), "{refused}");
    assert!(
        refused.contains("/depth") && refused.contains("type"),
        "{refused}"
    );
    // Every problem, each on a line of its own.
    let both = call(&url, &session, "checked__walk", json!({"depth": -1}))
        .await
        .unwrap_err();
    assert!(
        both.contains("\n- ") && both.contains("required") && both.contains("/depth"),
        "{both}"
    );
    let unknown = call(&url, &session, "checked__nothing", json!({}))
        .await
        .unwrap_err();
    assert!(unknown.starts_with("-32602"), "{unknown}");
    assert!(
        !refused.contains("deep"),
        "the value sent is not repeated: {refused}"
    );
    let missing = call(&url, &session, "checked__walk", json!({}))
        .await
        .unwrap_err();
    assert!(missing.contains("required"), "{missing}");
    assert!(checked.calls("walk").is_empty());

    call(
        &url,
        &session,
        "checked__walk",
        json!({"path": "/", "depth": 2}),
    )
    .await
    .unwrap();
    assert_eq!(checked.calls("walk").len(), 1);
    call(&url, &session, "unchecked__walk", json!({"depth": "deep"}))
        .await
        .unwrap();
    assert_eq!(unchecked.calls("walk"), [json!({"depth": "deep"})]);

    // A stateless 2026-07-28 client is checked the same way.
    let modern = gw.modern_client().await;
    let result = modern
        .call_tool(
            rmcp::model::CallToolRequestParams::new("checked__walk")
                .with_arguments(json!({"path": 3}).as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    assert_eq!(result.is_error, Some(true));
    let text = crate::harness::text(&result);
    assert!(text.contains("/path"), "{text}");
    assert_eq!(checked.calls("walk").len(), 1);
}

/// Identical calls of a cacheable tool reach the upstream once, within the rule's time, per
/// user unless the rule shares results; identical calls in flight wait for one answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cached_calls_reach_the_upstream_once() {
    let tools = json!({"tools": [
        {"name": "lookup", "inputSchema": {"type": "object"}},
        {"name": "rates", "inputSchema": {"type": "object"}},
        {"name": format!("{SLOW}report"), "inputSchema": {"type": "object"}},
        {"name": "plain", "inputSchema": {"type": "object"}}
    ]});
    let server = Scripted::start(tools).await;
    let docs = Scripted::start(json!({"resources": [{"uri": "doc://a", "name": "a"}]})).await;
    let gw = GatewayBuilder::new()
        .section(&api_keys_section(&["alice", "bob"]))
        .http_with("docs", &docs.url(), "cache = { seconds = 30 }")
        .http_with(
            "up",
            &server.url(),
            &format!(
                "session = \"shared\"\n[upstreams.up.tool_cache]\nlookup = {{ seconds = 30 }}\n\
                 rates = {{ seconds = 30, shared = true }}\n{SLOW}report = {{ seconds = 30 }}"
            ),
        )
        .start()
        .await;
    let alice = Recorder::plain("alice")
        .connect_as(&gw.url(), &api_key("alice"))
        .await;
    let bob = Recorder::plain("bob")
        .connect_as(&gw.url(), &api_key("bob"))
        .await;
    let call = |name: &str, arguments: Value| {
        rmcp::model::CallToolRequestParams::new(name.to_owned())
            .with_arguments(arguments.as_object().unwrap().clone())
    };
    for _ in 0..3 {
        alice
            .call_tool(call("up__lookup", json!({"q": 1, "r": [1, 2]})))
            .await
            .unwrap();
    }
    // The same arguments in another order are the same call.
    alice
        .call_tool(call("up__lookup", json!({"r": [1, 2], "q": 1})))
        .await
        .unwrap();
    assert_eq!(server.calls("lookup").len(), 1);
    alice
        .call_tool(call("up__lookup", json!({"q": 2})))
        .await
        .unwrap();
    bob.call_tool(call("up__lookup", json!({"q": 1, "r": [1, 2]})))
        .await
        .unwrap();
    assert_eq!(server.calls("lookup").len(), 3, "per user, per arguments");

    alice.call_tool(call("up__rates", json!({}))).await.unwrap();
    bob.call_tool(call("up__rates", json!({}))).await.unwrap();
    assert_eq!(server.calls("rates").len(), 1, "shared between users");

    for _ in 0..2 {
        alice.call_tool(call("up__plain", json!({}))).await.unwrap();
    }
    assert_eq!(
        server.calls("plain").len(),
        2,
        "not cacheable: every call goes"
    );

    for _ in 0..2 {
        let read = alice
            .read_resource(rmcp::model::ReadResourceRequestParams::new("docs+doc://a"))
            .await
            .unwrap();
        assert_eq!(read.contents.len(), 1);
    }
    assert_eq!(docs.reads(), 1, "a cached upstream's reads are cached too");

    let slow = format!("up__{SLOW}report");
    let (a, b) = tokio::join!(
        alice.call_tool(call(&slow, json!({"day": 1}))),
        alice.call_tool(call(&slow, json!({"day": 1}))),
    );
    assert_eq!(a.unwrap().content, b.unwrap().content);
    assert_eq!(server.calls(&format!("{SLOW}report")).len(), 1, "coalesced");

    let metrics = gw.metrics_text().await;
    let count = |outcome: &str| {
        metrics
            .lines()
            .find(|line| {
                line.starts_with(&format!(
                    "switchyard_cache_total{{outcome=\"{outcome}\",upstream=\"up\"}}"
                ))
            })
            .and_then(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
            .unwrap_or_default()
    };
    crate::operate::assert_dashboard_series(&metrics, "switchyard_cache_");
    assert!(count("hit") >= 4.0, "{metrics}");
    assert!(count("miss") >= 5.0, "{metrics}");
    assert!(count("coalesced") + count("hit") >= 5.0, "{metrics}");
}
