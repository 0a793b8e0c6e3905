//! An operator's hold on one upstream through the admin API: an upstream that gave up after
//! `max_attempts` comes back through `reconnect`, and one that changed its lists without
//! saying so is listed again through `rediscover`; both want the admin token, and an unknown
//! name is a 404.

use std::time::Duration;

use serde_json::{Value, json};

use crate::{
    fixtures::scripted::Scripted,
    harness::{GatewayBuilder, SWITCHYARD, TEST_ADMIN_TOKEN, TestGateway, tool_names},
};

async fn admin_post(gw: &TestGateway, path: &str) -> (u16, Value) {
    let answer = reqwest::Client::new()
        .post(gw.admin_url(path))
        .bearer_auth(TEST_ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    let status = answer.status().as_u16();
    (status, answer.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_that_gave_up_comes_back_through_reconnect() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("may-start");
    // It starts only once the marker exists; it gives up after its first failure.
    let script = format!(
        "test -f '{}' && exec '{SWITCHYARD}' demo-server",
        marker.display()
    );
    let gw = GatewayBuilder::new()
        .upstream(
            "flaky",
            &format!(
                "transport = \"stdio\"\ncommand = \"sh\"\nargs = [\"-c\", {script:?}]\n\
                 restart = {{ max_attempts = 1, delay_ms = 50 }}"
            ),
        )
        .start()
        .await;
    gw.wait_state("flaky", "failed", Duration::from_secs(10))
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(gw.state("flaky"), "failed", "given up, not retried");

    std::fs::write(&marker, "").unwrap();
    let (status, body) = admin_post(&gw, "/api/upstreams/flaky/reconnect").await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(body["reconnecting"], true, "{body}");
    gw.wait_state("flaky", "ready", Duration::from_secs(15))
        .await;
    let client = gw.client().await;
    assert!(
        tool_names(&client)
            .await
            .contains(&"flaky__echo".to_owned()),
        "its tools are served again"
    );

    let (status, body) = admin_post(&gw, "/api/upstreams/nothing/reconnect").await;
    assert_eq!(status, 404, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rediscover_lists_an_upstream_again_now() {
    let tool = |name: &str| json!({"name": name, "inputSchema": {"type": "object"}});
    let server = Scripted::start(json!({"tools": [tool("first")]})).await;
    let gw = GatewayBuilder::new()
        .http("web", &server.url())
        .start()
        .await;
    let client = gw.client().await;
    assert_eq!(tool_names(&client).await, ["web__first"]);

    // Changed without a word: the gateway still lists what it saw.
    server.set_tools_quietly(vec![tool("first"), tool("second")]);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(tool_names(&client).await, ["web__first"]);

    let (status, body) = admin_post(&gw, "/api/upstreams/web/rediscover").await;
    assert_eq!(status, 202, "{body}");
    let mut listed = Vec::new();
    for _ in 0..100 {
        listed = tool_names(&client).await;
        if listed.len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(listed, ["web__first", "web__second"]);
    assert_eq!(
        admin_post(&gw, "/api/upstreams/nothing/rediscover").await.0,
        404
    );
}
