//! `[server] json_response`: a session's request whose answer comes before anything else is
//! answered with `application/json` (the seeds' `enableJsonResponse`), a request that sends
//! progress first still gets its stream, and an MCP client works through it unchanged.

use serde_json::{Value, json};

use crate::harness::{GatewayBuilder, call, text, tool_names};

const ACCEPT: &str = "application/json, text/event-stream";

async fn post(
    http: &reqwest::Client,
    url: &str,
    session: Option<&str>,
    body: Value,
) -> reqwest::Response {
    let mut request = http
        .post(url)
        .header("accept", ACCEPT)
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2025-11-25");
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    request.json(&body).send().await.unwrap()
}

fn content_type(response: &reqwest::Response) -> String {
    response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_gets_json_answers_and_a_stream_only_when_something_comes_first() {
    let gw = GatewayBuilder::new()
        .section("[server]\njson_response = true")
        .demo("demo")
        .start()
        .await;
    let url = gw.url();
    let http = reqwest::Client::new();
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "json-client", "version": "1"}}});
    let opened = post(&http, &url, None, initialize).await;
    assert_eq!(opened.status(), 200);
    assert_eq!(content_type(&opened), "application/json");
    let session = opened.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let answer: Value = opened.json().await.unwrap();
    assert_eq!(answer["result"]["protocolVersion"], "2025-11-25");
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(
        post(&http, &url, Some(&session), initialized)
            .await
            .status(),
        202
    );

    let echo = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "demo__echo", "arguments": {"text": "plain"}}});
    let answered = post(&http, &url, Some(&session), echo).await;
    assert_eq!(content_type(&answered), "application/json");
    let answer: Value = answered.json().await.unwrap();
    assert_eq!(answer["id"], 2);
    assert_eq!(answer["result"]["content"][0]["text"], "plain");

    // Progress comes before the answer: a stream, as without JSON mode.
    let slow = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "demo__slow_task", "arguments": {"seconds": 1},
                   "_meta": {"progressToken": "p"}}});
    let streamed = post(&http, &url, Some(&session), slow).await;
    assert_eq!(content_type(&streamed), "text/event-stream");
    let body = streamed.text().await.unwrap();
    assert!(body.contains("notifications/progress"), "{body}");
    assert!(body.contains("waited 1 seconds"), "{body}");

    // An MCP client of the official SDK speaks to it as to any server.
    let client = gw.client().await;
    assert!(tool_names(&client).await.contains(&"demo__echo".to_owned()));
    let result = call(&client, "demo__echo", json!({"text": "sdk"}))
        .await
        .unwrap();
    assert_eq!(text(&result), "sdk");
}
