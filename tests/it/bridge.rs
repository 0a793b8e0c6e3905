//! The multi-round-trip bridge: an upstream of an earlier era (the official server-everything,
//! over stdio) asks something during a 2026-07-28 client's call. The client gets
//! `input_required`, answers by retrying, and the upstream gets the answer. A state serves one
//! retry, of its own request, by its own user; a client that never retries ends the upstream's
//! wait with an error.

use std::time::Duration;

use serde_json::{Value, json};

use crate::{
    fixtures::everything,
    harness::{GatewayBuilder, Recorder, TestGateway, api_key, api_keys_section, call, text},
};

const ELICIT: &str = "everything__trigger-elicitation-request";
const SAMPLE: &str = "everything__trigger-sampling-request";

fn behind(extra: &str) -> GatewayBuilder {
    GatewayBuilder::new()
        .section(extra)
        .upstream("everything", &everything::stdio_upstream())
}

/// The gateway of `behind(extra)`, once it lists `ELICIT` to a client that can be asked (as
/// `user`, if given): the server registers it just after the handshake, and a first listing
/// can come before (the gateway then finds it on the server's list change).
async fn started(extra: &str, user: Option<&str>) -> TestGateway {
    let gw = behind(extra).start().await;
    let mut list = modern_call("", json!({}), json!({}));
    list["method"] = "tools/list".into();
    if let Some(params) = list["params"].as_object_mut() {
        params.remove("name");
        params.remove("arguments");
    }
    for _ in 0..100 {
        let mut request = reqwest::Client::new()
            .post(gw.url())
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "tools/list")
            .json(&list);
        if let Some(user) = user {
            request = request.bearer_auth(api_key(user));
        }
        let listed = request.send().await.unwrap().text().await.unwrap();
        if listed.contains(ELICIT) {
            return gw;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{ELICIT} is never listed");
}

/// A 2026-07-28 `tools/call` of `tool`, with `more` params, from a client that can be asked
/// for elicitation and sampling.
fn modern_call(tool: &str, arguments: Value, more: Value) -> Value {
    let mut params = json!({
        "name": tool,
        "arguments": arguments,
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}, "sampling": {}},
            "io.modelcontextprotocol/clientInfo": {"name": "raw-modern", "version": "1"}
        }
    });
    if let (Some(params), Some(more)) = (params.as_object_mut(), more.as_object()) {
        params.extend(more.clone());
    }
    json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
}

/// Posts `body` (a 2026-07-28 request) as `user`, if given; the JSON-RPC answer, whether it
/// came as JSON or as the last message of a stream.
async fn post(gw: &TestGateway, user: Option<&str>, body: &Value) -> Value {
    let name = body["params"]["name"].as_str().unwrap_or_default();
    let mut request = reqwest::Client::new()
        .post(gw.url())
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", name)
        .json(body);
    if let Some(user) = user {
        request = request.bearer_auth(api_key(user));
    }
    let response = request.send().await.unwrap();
    let text = response.text().await.unwrap();
    text.lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .chain(std::iter::once(text.as_str()))
        .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
        .rfind(|message| message.get("id").is_some())
        .unwrap_or_else(|| panic!("no answer in {text}"))
}

/// The answer to the question of `required` (an `input_required` result) the client gives.
fn answers(required: &Value, answer: Value) -> Value {
    let questions = required["inputRequests"].as_object().expect("questions");
    assert_eq!(questions.len(), 1, "{required}");
    let (key, _) = questions.iter().next().unwrap();
    json!({"inputResponses": {key: answer}, "requestState": required["requestState"]})
}

fn accepted() -> Value {
    json!({"action": "accept", "content": {"name": "Bridge Tester", "check": true, "email": "b@example.com", "integer": 7}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2026_client_answers_an_older_upstreams_question_by_retrying() {
    let gw = started("", None).await;
    let first = post(&gw, None, &modern_call(ELICIT, json!({}), json!({}))).await;
    let required = &first["result"];
    assert_eq!(required["resultType"], "input_required", "{first}");
    let question = required["inputRequests"]
        .as_object()
        .unwrap()
        .values()
        .next();
    let question = question.expect("one question");
    assert_eq!(question["method"], "elicitation/create", "{question}");
    assert!(
        question["params"]["requestedSchema"].is_object(),
        "{question}"
    );
    let state = required["requestState"].as_str().expect("a state");

    let retry = modern_call(ELICIT, json!({}), answers(required, accepted()));
    let done = post(&gw, None, &retry).await;
    assert_eq!(done["id"], 1, "the retry's own id: {done}");
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    assert!(
        done["result"]["content"]
            .to_string()
            .contains("Bridge Tester"),
        "{done}"
    );

    // A state serves one retry.
    let again = post(&gw, None, &retry).await;
    assert_eq!(again["error"]["code"], -32602, "{again}");
    assert!(!again.to_string().contains(state), "{again}");

    // rmcp's 2026-07-28 client answers the rounds itself, with sampling as with elicitation;
    // the sampling request reaches it as the upstream wrote it.
    let recorder = Recorder::capable("ada");
    let modern = recorder.clone().connect_modern(&gw.url()).await;
    let sampled = call(&modern, SAMPLE, json!({"prompt": "bridged"}))
        .await
        .unwrap();
    assert!(text(&sampled).contains("sampled for ada"), "{sampled:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_state_serves_only_its_own_users_retry_of_its_own_request() {
    let auth = format!("[auth]\n{}", api_keys_section(&["alice", "bob"]));
    let gw = started(&auth, Some("alice")).await;
    let first = post(
        &gw,
        Some("alice"),
        &modern_call(ELICIT, json!({}), json!({})),
    )
    .await;
    let required = &first["result"];
    assert_eq!(required["resultType"], "input_required", "{first}");
    let answered = answers(required, accepted());

    let bobs = post(
        &gw,
        Some("bob"),
        &modern_call(ELICIT, json!({}), answered.clone()),
    )
    .await;
    assert_eq!(
        bobs["error"]["code"], -32602,
        "bob used alice's state: {bobs}"
    );
    let other_tool = modern_call(
        "everything__echo",
        json!({"message": "x"}),
        answered.clone(),
    );
    let other = post(&gw, Some("alice"), &other_tool).await;
    assert_eq!(other["error"]["code"], -32602, "{other}");

    // Neither used it up.
    let done = post(
        &gw,
        Some("alice"),
        &modern_call(ELICIT, json!({}), answered),
    )
    .await;
    assert!(
        done["result"]["content"]
            .to_string()
            .contains("Bridge Tester"),
        "{done}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_retries_ends_the_upstreams_wait() {
    let gw = started("[limits]\ninput_wait_seconds = 1\n", None).await;
    let first = post(&gw, None, &modern_call(ELICIT, json!({}), json!({}))).await;
    assert_eq!(first["result"]["resultType"], "input_required", "{first}");
    // The upstream hears that no answer comes, and its call ends.
    let mut ended = false;
    for _ in 0..60 {
        let metrics = gw.metrics_text().await;
        ended = metrics.lines().any(|line| {
            line.starts_with("switchyard_tool_calls_total")
                && line.contains("trigger-elicitation-request")
                && !line.ends_with(" 0")
        });
        if ended {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(ended, "{}", gw.metrics_text().await);
    let late = modern_call(ELICIT, json!({}), answers(&first["result"], accepted()));
    let late = post(&gw, None, &late).await;
    assert_eq!(late["error"]["code"], -32602, "{late}");
    assert!(
        late["error"]["message"]
            .as_str()
            .unwrap()
            .contains("expired"),
        "{late}"
    );
}
