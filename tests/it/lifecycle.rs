//! An operator's hold on one upstream through the admin API: an upstream that gave up after
//! `max_attempts` comes back through `reconnect`, and one that changed its lists without
//! saying so is listed again through `rediscover`; both want the admin token, and an unknown
//! name is a 404. One switched off stays off across a restart; one added that needs
//! authorization is answered with its link.

use std::time::Duration;

use serde_json::{Value, json};

use crate::{
    fixtures::{
        oauth_upstream::{Browser, OAuthUpstream},
        scripted::Scripted,
    },
    harness::{GatewayBuilder, SWITCHYARD, TestGateway, tool_names},
};

async fn admin_post(gw: &TestGateway, path: &str) -> (u16, Value) {
    gw.admin_answer(reqwest::Method::POST, path).await
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disabled_upstream_is_off_across_a_restart_until_enabled() {
    let dir = tempfile::tempdir().unwrap();
    let gw = GatewayBuilder::two_demos_on_file(dir.path()).await;
    let (status, body) = admin_post(&gw, "/api/upstreams/demo/disable").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["enabled"], false, "{body}");
    let client = gw.client().await;
    let names = tool_names(&client).await;
    assert!(!names.iter().any(|n| n.starts_with("demo__")), "{names:?}");
    assert!(names.iter().any(|n| n.starts_with("other__")), "{names:?}");
    let status = gw.admin_json("/api/status").await;
    assert_eq!(
        status["disabled"],
        json!(["demo"]),
        "listed as switched off"
    );
    assert!(
        !status["servers"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["name"] == "demo"),
        "{status}"
    );
    drop(client);
    drop(gw);

    // A restart reads the overlay: still off.
    let path = dir.path().join("switchyard.toml");
    let config = switchyard::config::load(&path).unwrap();
    assert_eq!(config.disabled, ["demo"]);
    let gw = TestGateway::start(config).await;
    let client = gw.client().await;
    assert!(
        !tool_names(&client)
            .await
            .iter()
            .any(|n| n.starts_with("demo__"))
    );

    let (status, body) = admin_post(&gw, "/api/upstreams/demo/enable").await;
    assert_eq!(status, 200, "{body}");
    gw.wait_state("demo", "ready", Duration::from_secs(15))
        .await;
    let mut names = Vec::new();
    for _ in 0..100 {
        names = tool_names(&client).await;
        if names.iter().any(|n| n.starts_with("demo__")) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(names.iter().any(|n| n.starts_with("demo__")), "{names:?}");
    assert_eq!(
        admin_post(&gw, "/api/upstreams/nothing/disable").await.0,
        404
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_switched_off_in_the_file_is_switched_on_there() {
    let dir = tempfile::tempdir().unwrap();
    let gw = GatewayBuilder::new()
        .section("[store]\nkind = \"memory\"")
        .demo("demo")
        .upstream(
            "off",
            &format!("command = {SWITCHYARD:?}\nargs = [\"demo-server\"]\nenabled = false"),
        )
        .start_on_file(dir.path())
        .await;
    assert_eq!(
        gw.admin_json("/api/status").await["disabled"],
        json!(["off"])
    );
    let (status, body) = admin_post(&gw, "/api/upstreams/off/enable").await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["error"]
            .as_str()
            .is_some_and(|e| e.contains("enabled = false")),
        "{body}"
    );
    assert!(
        !dir.path().join("switchyard.overlay.toml").exists(),
        "nothing written"
    );
}

/// Added through the admin API, an upstream that needs authorization is answered with its
/// state and the link to authorize it (as `addMcpServer` does), and that link works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_added_upstream_that_needs_authorization_is_answered_with_its_link() {
    let upstream = OAuthUpstream::start(&["--interactions=auto"]).await;
    let dir = tempfile::tempdir().unwrap();
    let gw = GatewayBuilder::new()
        .section(&format!(
            "[oauth]\nstate_dir = {:?}\nkey = \"c3dpdGNoeWFyZC10ZXN0cy1zdG9yZS1rZXktMzJieXQ=\"",
            dir.path().join("state").display().to_string()
        ))
        .demo("local")
        .start_on_file(dir.path())
        .await;
    let body = json!({
        "name": "secure",
        "url": upstream.mcp_url(),
        "oauth": {
            "client_id": upstream.client("client_id"),
            "client_secret": upstream.client("client_secret"),
        },
    });
    let answer = gw
        .admin_request(reqwest::Method::POST, "/api/upstreams?wait_seconds=20")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 201);
    let answer: Value = answer.json().await.unwrap();
    let server = &answer["server"];
    assert_eq!(server["state"], "authenticating", "{answer}");
    let link = server["auth_url"].as_str().expect("its authorization link");
    assert!(
        link.starts_with(&gw.url_at("/oauth/connect/")),
        "the gateway's own link, which binds the browser that follows it: {link}"
    );

    Browser::new().follow_link(link).await;
    gw.wait_state("secure", "ready", Duration::from_secs(20))
        .await;
}

/// An upstream whose lists take longer than `discovery_timeout_seconds` fails, saying which
/// list took too long, while the others serve; it is served once it lists in time again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_that_lists_too_slowly_fails_its_discovery_and_comes_back() {
    let tool = json!({"name": "first", "inputSchema": {"type": "object"}});
    let server = Scripted::start(json!({"tools": [tool]})).await;
    server.delay_lists(Duration::from_secs(5));
    let gw = GatewayBuilder::new()
        .upstream(
            "slow",
            &format!(
                "transport = \"streamable_http\"\nurl = {:?}\ndiscovery_timeout_seconds = 0.3\n\
                 restart = {{ delay_ms = 100, max_delay_ms = 200 }}",
                server.url()
            ),
        )
        .demo("demo")
        .start_unsettled()
        .await;
    gw.wait_state("slow", "failed", Duration::from_secs(10))
        .await;
    let status = gw.admin_json("/api/status").await;
    let slow = (status["servers"].as_array().unwrap().iter())
        .find(|server| server["name"] == "slow")
        .unwrap();
    let error = slow["last_error"].as_str().unwrap_or_default();
    assert!(
        error.contains("listing its tools") && error.contains("took longer than 0.3s"),
        "{error}"
    );
    gw.wait_state("demo", "ready", Duration::from_secs(15))
        .await;
    let client = gw.client().await;
    let names = tool_names(&client).await;
    assert!(names.iter().any(|n| n.starts_with("demo__")), "{names:?}");
    assert!(!names.iter().any(|n| n.starts_with("slow__")), "{names:?}");

    server.delay_lists(Duration::ZERO);
    gw.wait_state("slow", "ready", Duration::from_secs(15))
        .await;
    let mut names = Vec::new();
    for _ in 0..100 {
        names = tool_names(&client).await;
        if names.contains(&"slow__first".to_owned()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(names.contains(&"slow__first".to_owned()), "{names:?}");
}
