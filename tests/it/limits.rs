//! Hostile and greedy clients: a user who asks too much gets 429 with `Retry-After` (or 400 for
//! a body nested too deeply), any malformed body gets a JSON-RPC error naming what was wrong
//! (never Switchyard's or rmcp's insides), and the gateway goes on serving everyone else.

use std::time::Duration;

use crate::harness::{
    GatewayBuilder, INITIALIZE, TestGateway, api_key, api_keys_section, post_mcp,
};

const SLOW: &str = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"demo__slow_task","arguments":{"seconds":2}}}"#;
const LIST: &str = r#"{"jsonrpc":"2.0","id":8,"method":"tools/list"}"#;

async fn gateway(limits: &str) -> TestGateway {
    GatewayBuilder::new()
        .section(&format!(
            "[limits]\n{limits}\n{}",
            api_keys_section(&["alice", "bob"])
        ))
        .demo("demo")
        .start()
        .await
}

/// A POST of `body` by `user` (with their API key), in `session` if given.
async fn post(
    gw: &TestGateway,
    user: &str,
    session: Option<&str>,
    body: impl Into<reqwest::Body>,
) -> reqwest::Response {
    let bearer = format!("Bearer {}", api_key(user));
    post_mcp(gw, Some(&bearer), session, body).await
}

async fn open(gw: &TestGateway, user: &str) -> String {
    let answer = post(gw, user, None, INITIALIZE).await;
    assert_eq!(answer.status(), 200);
    answer.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned()
}

/// Asserts a 429 with a `Retry-After` and a JSON-RPC error saying `what`.
async fn assert_too_many(answer: reqwest::Response, what: &str) {
    assert_eq!(answer.status(), 429);
    let retry: u64 = answer.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(retry >= 1);
    let body: serde_json::Value = answer.json().await.unwrap();
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains(what), "{message}");
}

#[tokio::test]
async fn a_burst_beyond_the_rate_gets_429_and_other_users_are_served() {
    let gw = gateway("requests_per_second_per_principal = 1\nburst_per_principal = 2").await;
    let session = open(&gw, "alice").await;
    assert_eq!(post(&gw, "alice", Some(&session), LIST).await.status(), 200);
    assert_too_many(
        post(&gw, "alice", Some(&session), LIST).await,
        "requests a second",
    )
    .await;
    assert_eq!(post(&gw, "bob", None, INITIALIZE).await.status(), 200);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(post(&gw, "alice", Some(&session), LIST).await.status(), 200);
}

#[tokio::test]
async fn sessions_and_requests_in_flight_are_capped() {
    let gw = gateway(
        "max_sessions_per_principal = 2\nmax_requests_in_flight_per_session = 1\nmax_concurrent_requests_per_principal = 2",
    )
    .await;
    let first = open(&gw, "alice").await;
    let second = open(&gw, "alice").await;
    assert_too_many(
        post(&gw, "alice", None, INITIALIZE).await,
        "2 sessions open",
    )
    .await;
    let bob = open(&gw, "bob").await;

    // One slow call in each session: each answer streams for two seconds.
    let slow_first = post(&gw, "alice", Some(&first), SLOW).await;
    assert_eq!(slow_first.status(), 200);
    assert_too_many(
        post(&gw, "alice", Some(&first), LIST).await,
        "this session has 1",
    )
    .await;
    let slow_second = post(&gw, "alice", Some(&second), SLOW).await;
    assert_eq!(slow_second.status(), 200);
    assert_too_many(
        post(&gw, "alice", Some(&second), LIST).await,
        "this user has 2 requests",
    )
    .await;
    assert_eq!(post(&gw, "bob", Some(&bob), LIST).await.status(), 200);

    // Once the answers are read, alice is within her limits again.
    for slow in [slow_first, slow_second] {
        assert!(slow.text().await.unwrap().contains("\"result\""));
    }
    assert_eq!(post(&gw, "alice", Some(&first), LIST).await.status(), 200);
    let ended = reqwest::Client::new()
        .delete(gw.url())
        .bearer_auth(api_key("alice"))
        .header("mcp-session-id", &second)
        .send()
        .await
        .unwrap();
    assert_eq!(ended.status(), 200);
    open(&gw, "alice").await;
}

#[tokio::test]
async fn a_body_nested_too_deeply_is_refused_before_parsing() {
    let gw = gateway("max_json_depth = 16").await;
    let deep = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"demo__echo","arguments":{{"text":{}1{}}}}}}}"#,
        "[".repeat(40),
        "]".repeat(40)
    );
    let answer = post(&gw, "alice", None, deep).await;
    assert_eq!(answer.status(), 400);
    let body: serde_json::Value = answer.json().await.unwrap();
    assert_eq!(body["error"]["code"], -32600);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("deeper than 16")
    );
    assert_eq!(post(&gw, "alice", None, INITIALIZE).await.status(), 200);
}

#[tokio::test]
async fn hostile_bodies_get_clear_errors_and_the_gateway_keeps_serving() {
    use proptest::{prelude::*, strategy::ValueTree, test_runner::TestRunner};
    let gw = gateway("max_json_depth = 32").await;
    let session = open(&gw, "alice").await;
    let valid = br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"demo__echo","arguments":{"text":"hi"}}}"#.to_vec();
    let mutated = proptest::collection::vec((0..valid.len(), any::<u8>(), any::<bool>()), 1..6)
        .prop_map(move |edits| {
            let mut body = valid.clone();
            for (at, byte, insert) in edits {
                let at = at.min(body.len() - 1);
                if insert {
                    body.insert(at, byte)
                } else {
                    body[at] = byte
                }
            }
            body
        });
    let strategy = prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..300),
        mutated,
        (1usize..200).prop_map(|n| format!("{}{}", "[".repeat(n), "]".repeat(n)).into_bytes()),
    ];
    let mut runner = TestRunner::deterministic();
    for case in 0..300 {
        let body = strategy.new_tree(&mut runner).unwrap().current();
        let answer = post(&gw, "alice", Some(&session), body.clone()).await;
        let status = answer.status().as_u16();
        let text = answer.text().await.unwrap();
        let shown = String::from_utf8_lossy(&body);
        assert!(
            matches!(status, 200 | 202 | 400 | 404),
            "case {case}: {status} for {shown:?}"
        );
        if status >= 400 {
            let error: serde_json::Value =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("case {case}: {e}: {text}"));
            assert!(error["error"]["code"].is_i64(), "case {case}: {text}");
        }
        for inside in ["switchyard::", "rmcp::", "src/", "panicked"] {
            assert!(!text.contains(inside), "case {case}: {inside} in {text}");
        }
    }
    assert_eq!(post(&gw, "alice", Some(&session), LIST).await.status(), 200);
    assert_eq!(post(&gw, "bob", None, INITIALIZE).await.status(), 200);
}
