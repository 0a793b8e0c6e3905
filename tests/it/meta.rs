//! A client's `params._meta` reaches the upstream as the client sent it, over streamable HTTP,
//! legacy SSE and stdio, on the raw path and the typed one, from a session client and a
//! stateless 2026-07-28 one: trace context and any vendor key, nested values included. Only
//! what the gateway must map is rewritten: the progress token (the upstream reports progress
//! under the gateway's own) and, towards an upstream of an older protocol, the 2026-07-28
//! lifecycle keys, which belong to the client's hop.

use serde_json::{Map, Value, json};

use crate::{
    deps,
    fixtures::scripted::Scripted,
    harness::GatewayBuilder,
    replicas::cluster::{post, raw_session},
};

fn sent() -> Value {
    json!({
        "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "tracestate": "vendor=opaque",
        "com.example/tenant": {"id": "t1", "tags": ["a", "b"]},
        "progressToken": "client-token-1"
    })
}

/// `got` is `sent` but for the progress token, which the gateway gives its own value.
fn assert_passed(got: &Value, sent: &Value, how: &str) {
    let mut got: Map<String, Value> = got.as_object().cloned().unwrap_or_default();
    let mut sent = sent.as_object().cloned().unwrap();
    assert!(
        got.remove("progressToken").is_some(),
        "{how}: the progress token is the gateway's: {got:?}"
    );
    sent.remove("progressToken");
    assert_eq!(Value::Object(got), Value::Object(sent), "{how}");
}

/// A plain tool, and one whose schema asks for an `Mcp-Param-*` header. Over streamable HTTP
/// both take the raw path; over legacy SSE and stdio, the typed one.
fn tools() -> Value {
    json!({"tools": [
        {"name": "plain", "inputSchema": {"type": "object"}},
        {"name": "headed", "inputSchema": {"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"}
        }}}
    ]})
}

async fn call_with_meta(url: &str, session: &str, tool: &str) -> String {
    let (status, body) = post(
        url,
        Some(session),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": tool, "arguments": {"region": "eu"}, "_meta": sent()
        }}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_clients_meta_reaches_http_and_sse_upstreams_on_both_paths() {
    let http = Scripted::start(tools()).await;
    let sse = Scripted::start(tools()).await;
    let gw = GatewayBuilder::new()
        .http("web", &http.url())
        .upstream(
            "old",
            &format!(
                "transport = \"sse\"\nurl = {:?}\nsession = \"shared\"",
                sse.sse_url()
            ),
        )
        .start()
        .await;
    let session = raw_session(&gw.url()).await;
    for (server, upstream) in [(&http, "web"), (&sse, "old")] {
        for tool in ["plain", "headed"] {
            call_with_meta(&gw.url(), &session, &format!("{upstream}__{tool}")).await;
            let metas = server.metas(tool);
            assert_eq!(metas.len(), 1, "{upstream}__{tool}");
            assert_passed(&metas[0], &sent(), &format!("{upstream}__{tool}"));
        }
    }

    // A stateless 2026-07-28 client: its lifecycle keys stay on its hop; the rest go on.
    let modern = gw.modern_client().await;
    let Value::Object(meta) = sent() else {
        unreachable!()
    };
    let mut params = rmcp::model::CallToolRequestParams::new("web__plain");
    params.meta = Some(rmcp::model::RequestMetaObject(rmcp::model::MetaObject(
        meta,
    )));
    modern.call_tool(params).await.unwrap();
    let metas = http.metas("plain");
    assert_eq!(metas.len(), 2);
    let got = metas[1].as_object().unwrap();
    assert!(
        !got.keys()
            .any(|key| key.starts_with("io.modelcontextprotocol/")),
        "{got:?}"
    );
    assert_passed(&metas[1], &sent(), "a 2026-07-28 client's call");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_clients_meta_reaches_a_stdio_upstream() {
    let dir = tempfile::tempdir().unwrap();
    let lists = dir.path().join("tools.json");
    std::fs::write(&lists, tools().to_string()).unwrap();
    let gw = GatewayBuilder::new()
        .upstream("local", &deps::replay_server(&lists))
        .start()
        .await;
    let session = raw_session(&gw.url()).await;
    for tool in ["plain", "headed"] {
        let body = call_with_meta(&gw.url(), &session, &format!("local__{tool}")).await;
        let answer: Value = body
            .lines()
            .filter_map(|line| line.strip_prefix("data: "))
            .find_map(|line| serde_json::from_str(line).ok())
            .unwrap_or_else(|| panic!("no answer in {body}"));
        let text = answer["result"]["content"][0]["text"].as_str().unwrap();
        let got: Value = serde_json::from_str(text).unwrap();
        assert_passed(&got, &sent(), &format!("local__{tool}"));
    }
}
