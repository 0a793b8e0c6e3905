//! The pass-through routes (`/servers/{name}/mcp`) as users meet them: one
//! upstream as it is, under the gateway's authentication, policy, header rules and metrics;
//! and a new binary taking the listening sockets over from the running one under load
//! without a failed request.

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use rmcp::model::CallToolRequestParams;
use serde_json::json;

use crate::{
    bench::demo_http,
    fixtures::notes::NotesServer,
    harness::{
        GatewayProcess, Recorder, SWITCHYARD, api_keys_section, call, connect_client, eventually,
        healthz, text,
    },
    headers::{SENT, client_sending, seen_by_upstream},
};

fn write_config(dir: &tempfile::TempDir, text: &str) -> std::path::PathBuf {
    let path = dir.path().join("switchyard.toml");
    std::fs::write(&path, text).unwrap();
    path
}

#[tokio::test]
async fn a_passthrough_route_serves_one_upstream_under_the_gateways_rules() {
    let notes = NotesServer::start().await;
    // A port nothing listens on any more.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        &dir,
        &format!(
            "[server]\nwatch_config = false\nmax_request_body_bytes = 65536\n\n{}\n\
             [[policy]]\nwho.principals = [\"user:key:bob\"]\ndeny.upstreams = [\"notes\"]\n\n\
             [upstreams.notes]\nurl = \"{}\"\nsession = \"shared\"\n\
             headers = {{ X-Upstream-Key = \"fixed\", X-User = \"user:${{claim:sub}}\" }}\n\
             forward_headers = [\"X-Tenant\"]\n\
             rename_headers = {{ X-Client-Trace = \"X-Trace\" }}\n\n\
             [upstreams.local]\ncommand = \"{SWITCHYARD}\"\nargs = [\"demo-server\"]\n\n\
             [upstreams.named]\nurl = \"{}\"\nsession = \"shared\"\n\n\
             [upstreams.gone]\nurl = \"http://{closed}/mcp\"\ntransport = \"streamable_http\"\n",
            api_keys_section(&["alice", "bob"]),
            notes.url(),
            notes.url().replace("127.0.0.1", "localhost"),
        ),
    );
    let gw = GatewayProcess::start_with(&config, &["--passthrough-listen", "127.0.0.1:0"]);
    ready(&gw, &["gone"]).await;
    let base = format!(
        "http://{}",
        gw.passthrough.expect("a pass-through listener")
    );
    let url = format!("{base}/servers/notes/mcp");

    // The upstream's own names, and the header rules of the MCP endpoint.
    let alice = client_sending(&url, "alice", &SENT).await;
    let tools = alice.list_all_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "header"), "{tools:?}");
    for (header, expected) in seen_by_upstream("fixed") {
        let result = alice
            .call_tool(
                CallToolRequestParams::new("header")
                    .with_arguments(json!({"name": header}).as_object().unwrap().clone()),
            )
            .await
            .unwrap();
        assert_eq!(text(&result), expected, "{header}");
    }

    // Refusals: no credential, a policy that hides the upstream, a stdio upstream, no route.
    let http = reqwest::Client::new();
    let post = |url: String, key: Option<&str>| {
        let mut request = http
            .post(url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
        if let Some(key) = key {
            request = request.bearer_auth(key);
        }
        async move {
            let response = request.send().await.unwrap();
            let status = response.status().as_u16();
            let challenge = response.headers().contains_key("www-authenticate");
            (status, challenge, response.text().await.unwrap())
        }
    };
    let (status, challenge, body) = post(url.clone(), None).await;
    assert_eq!((status, challenge), (401, true), "{body}");
    let bob = crate::harness::api_key("bob");
    let (status, _, body) = post(url.clone(), Some(&bob)).await;
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("no upstream is named `notes`"), "{body}");
    let (status, _, body) = post(format!("{base}/servers/local/mcp"), Some(&bob)).await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("not a streamable-HTTP upstream"), "{body}");
    let (status, _, body) = post(format!("{base}/mcp"), Some(&bob)).await;
    assert_eq!(status, 404, "{body}");
    let (status, _, body) = post(format!("{base}/servers/gone/mcp"), Some(&bob)).await;
    assert_eq!(status, 502, "{body}");
    assert!(
        body.contains("`gone` cannot be reached: Connection refused"),
        "{body}"
    );
    assert!(!body.contains(&closed.to_string()), "no address: {body}");
    let alice_key = crate::harness::api_key("alice");
    // A foreign Host (DNS rebinding) is refused before anything, a valid key or not.
    let rebound = http
        .post(url.clone())
        .header("host", "evil.example")
        .bearer_auth(&alice_key)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(rebound.status(), 403);
    // A body over `max_request_body_bytes` is refused before it goes up.
    let padding = "x".repeat(70_000);
    let oversized = http
        .post(url.clone())
        .bearer_auth(&alice_key)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(format!(
            r#"{{"jsonrpc":"2.0","id":2,"method":"ping","params":{{"p":"{padding}"}}}}"#
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(oversized.status(), 413);
    let body = oversized.text().await.unwrap();
    assert!(body.contains("exceeds 65536 bytes"), "{body}");

    // An upstream named by its host name: looked up once, and served like the others.
    let named = client_sending(&format!("{base}/servers/named/mcp"), "bob", &SENT).await;
    for _ in 0..3 {
        let tools = named.list_all_tools().await.unwrap();
        assert!(tools.iter().any(|t| t.name == "header"), "{tools:?}");
    }
    named.cancel().await.unwrap();

    // Metrics: what went through, by upstream (and method), and all the dashboard shows.
    let metrics = gw.metrics_text().await;
    for series in [
        r#"switchyard_passthrough_requests_total{status="2xx",upstream="notes"}"#,
        r#"switchyard_passthrough_requests_total{status="5xx",upstream="gone"}"#,
        r#"switchyard_passthrough_request_duration_seconds_count{method="POST",upstream="notes"}"#,
    ] {
        assert!(metrics.contains(series), "{series} in {metrics}");
    }
    for name in crate::operate::dashboard_metrics() {
        if name.starts_with("switchyard_passthrough_") {
            assert!(metrics.contains(&format!("# TYPE {name} ")), "{name}");
        }
    }
    alice.cancel().await.unwrap();
}

/// Clients call through the pass-through route while a new binary takes the listening
/// sockets over (`--upgrade`, then SIGQUIT to the running one): no call fails, the old
/// process exits once it has finished, and the new one serves from then on.
#[tokio::test]
async fn an_upgrade_takes_the_sockets_over_without_a_failed_call() {
    let demo = demo_http().await;
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("upgrade.sock");
    let config = write_config(
        &dir,
        &format!(
            "[server]\nwatch_config = false\nshutdown_grace_seconds = 2\nupgrade_socket = {:?}\n\n\
             [upstreams.demo]\nurl = \"{demo}\"\n",
            socket.display().to_string()
        ),
    );
    let args = ["--passthrough-listen", "127.0.0.1:0"];
    let old = GatewayProcess::start_with(&config, &args);
    ready(&old, &[]).await;
    let url = format!("http://{}/servers/demo/mcp", old.passthrough.unwrap());

    let (ok, failed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let stop = tokio_util::sync::CancellationToken::new();
    let mut clients = Vec::new();
    for c in 0..4 {
        let client = connect_client(&url, &format!("client-{c}")).await;
        let (ok, failed, stop) = (ok.clone(), failed.clone(), stop.clone());
        clients.push(tokio::spawn(async move {
            let mut n = 0;
            while !stop.is_cancelled() {
                match call(&client, "echo", json!({"text": format!("{c}-{n}")})).await {
                    Ok(result) if text(&result) == format!("{c}-{n}") => {
                        ok.fetch_add(1, Ordering::Relaxed)
                    }
                    other => {
                        eprintln!("call {c}-{n}: {other:?}");
                        failed.fetch_add(1, Ordering::Relaxed)
                    }
                };
                n += 1;
            }
            let _ = client.cancel().await;
        }));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;

    // The new binary waits at the upgrade socket; the old one, sent SIGQUIT, hands over.
    let upgrading = GatewayProcess::upgrading(&config, &args, &socket).await;
    let before = ok.load(Ordering::Relaxed);
    let new = upgrading.take_over(&old).await;
    assert_eq!(
        new.passthrough, old.passthrough,
        "the same socket, taken over"
    );
    let exited = tokio::task::spawn_blocking(move || old.exit_within(Duration::from_secs(30)))
        .await
        .unwrap();
    assert!(
        exited.is_some_and(|s| s.success()),
        "the old binary finished: {exited:?}"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.cancel();
    for client in clients {
        client.await.unwrap();
    }
    assert_eq!(failed.load(Ordering::Relaxed), 0, "no call failed");
    assert!(
        ok.load(Ordering::Relaxed) > before,
        "calls went on after the hand-over"
    );
    let metrics = new.metrics_text().await;
    assert!(
        metrics.contains(r#"switchyard_passthrough_requests_total{status="2xx",upstream="demo"}"#),
        "the new binary served calls: {metrics}"
    );
}

/// The pass-through sends a response on as the upstream sends it: a call's progress reaches
/// the client while the call still runs, and a GET stream's header before any event.
#[tokio::test]
async fn a_passthrough_answer_streams_as_the_upstream_sends_it() {
    let demo = demo_http().await;
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        &dir,
        &format!("[server]\nwatch_config = false\n\n[upstreams.demo]\nurl = \"{demo}\"\n"),
    );
    let gw = GatewayProcess::start_with(&config, &["--passthrough-listen", "127.0.0.1:0"]);
    ready(&gw, &[]).await;
    let url = format!("http://{}/servers/demo/mcp", gw.passthrough.unwrap());

    let recorder = Recorder::plain("streaming");
    let client = Arc::new(recorder.clone().connect(&url).await);
    let calling = {
        let client = client.clone();
        tokio::spawn(async move { call(&client, "slow_task", json!({"seconds": 3})).await })
    };
    assert!(
        eventually(Duration::from_secs(10), || !recorder
            .seen()
            .progress
            .is_empty())
        .await,
        "no progress came through"
    );
    assert!(!calling.is_finished(), "progress came only with the answer");
    // One second apart at the upstream: each comes on its own, none waits for the next.
    assert_eq!(recorder.seen().progress.len(), 1, "progress came late");
    let result = calling.await.unwrap().unwrap();
    assert_eq!(text(&result), "waited 3 seconds");
    assert!(recorder.progress_reaches(3).await);
    assert_eq!(recorder.seen().progress.len(), 3);

    // A GET stream on a session of its own: its header comes before any event does.
    let http = reqwest::Client::new();
    let initialize = http
        .post(&url)
        .header("accept", "application/json, text/event-stream")
        .json(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}}),
        )
        .send()
        .await
        .unwrap();
    let session = initialize.headers()["mcp-session-id"].clone();
    initialize.text().await.unwrap();
    http.post(&url)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", &session)
        .json(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .send()
        .await
        .unwrap();
    let stream = tokio::time::timeout(
        Duration::from_secs(10),
        http.get(&url)
            .header("accept", "text/event-stream")
            .header("mcp-session-id", &session)
            .send(),
    )
    .await
    .expect("the GET stream's header came")
    .unwrap();
    assert_eq!(stream.status(), 200);
    assert!(
        stream.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
}

/// Waits until every upstream of `gw` but those named in `down` is ready (their transports
/// found out).
async fn ready(gw: &GatewayProcess, down: &[&str]) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let health = healthz(gw.addr).await;
        let upstreams = health["upstreams"].as_array().cloned().unwrap_or_default();
        let up = |u: &serde_json::Value| {
            u["state"] == "ready" || down.iter().any(|name| u["name"] == *name)
        };
        if !upstreams.is_empty() && upstreams.iter().all(up) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never ready: {health}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// What a client spends of a `[[quota]]` through the pass-through route counts as through the
/// MCP endpoint, and a call beyond the quota is refused there too (before, the same key went
/// on through `/servers/NAME/mcp` once `/mcp` answered 429); every call through it is in the
/// audit log, with how it ended.
#[tokio::test]
async fn passthrough_calls_spend_quotas_and_are_audited_as_the_endpoints_are() {
    let notes = NotesServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.log");
    let config = write_config(
        &dir,
        &format!(
            "[server]\nwatch_config = false\n\n{}\n\
             [[quota]]\nname = \"notes-daily\"\nupstreams = [\"notes\"]\ndaily = 3\n\n\
             [audit]\nfile = {:?}\n\n\
             [upstreams.notes]\nurl = \"{}\"\n",
            api_keys_section(&["alice"]),
            log.display().to_string(),
            notes.url(),
        ),
    );
    let gw = GatewayProcess::start_with(&config, &["--passthrough-listen", "127.0.0.1:0"]);
    ready(&gw, &[]).await;
    let through = format!(
        "http://{}/servers/notes/mcp",
        gw.passthrough.expect("a pass-through listener")
    );
    let endpoint = client_sending(&gw.url(), "alice", &[]).await;
    let passthrough = client_sending(&through, "alice", &[]).await;
    let echo = |text: &str| {
        CallToolRequestParams::new("echo")
            .with_arguments(json!({"text": text}).as_object().unwrap().clone())
    };
    let prefixed = |text: &str| {
        CallToolRequestParams::new("notes__echo")
            .with_arguments(json!({"text": text}).as_object().unwrap().clone())
    };
    // Three calls in all, two of them through the pass-through route, spend the day's count.
    let one = endpoint.call_tool(prefixed("one")).await.unwrap();
    assert_eq!(text(&one), "notes: one");
    for n in ["two", "three"] {
        let result = passthrough.call_tool(echo(n)).await.unwrap();
        assert_eq!(text(&result), format!("notes: {n}"));
    }
    let refused = endpoint.call_tool(prefixed("four")).await.unwrap_err();
    assert!(refused.to_string().contains("429"), "{refused}");
    let refused = passthrough.call_tool(echo("five")).await.unwrap_err();
    assert!(refused.to_string().contains("429"), "{refused}");
    // As the endpoint answers it: 429, when to try again, the quota and its limit.
    let answer = reqwest::Client::new()
        .post(&through)
        .bearer_auth(crate::harness::api_key("alice"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","arguments":{"text":"six"}}}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 429);
    assert!(answer.headers().contains_key("retry-after"));
    let body: serde_json::Value = answer.json().await.unwrap();
    assert_eq!(body["id"], 9, "{body}");
    assert_eq!(body["error"]["data"]["quota"], "notes-daily", "{body}");

    // Each call is recorded, those through the pass-through route as such.
    let records = || -> Vec<serde_json::Value> {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .filter(|record: &serde_json::Value| record["kind"] == "tools/call")
            .collect()
    };
    assert!(
        eventually(Duration::from_secs(10), || records().len() == 6).await,
        "{:?}",
        records()
    );
    let through: Vec<(String, String)> = records()
        .iter()
        .filter(|record| {
            record["detail"]
                .as_str()
                .is_some_and(|detail| detail.starts_with("pass-through"))
        })
        .map(|record| {
            assert_eq!(record["principal"], "user:key:alice", "{record}");
            assert_eq!(record["upstream"], "notes", "{record}");
            (
                record["item"].as_str().unwrap().to_owned(),
                record["outcome"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        through,
        [
            ("echo".to_owned(), "ok".to_owned()),
            ("echo".to_owned(), "ok".to_owned()),
            ("echo".to_owned(), "refused".to_owned()),
            ("echo".to_owned(), "refused".to_owned())
        ]
    );
    endpoint.cancel().await.unwrap();
    passthrough.cancel().await.unwrap();
}
