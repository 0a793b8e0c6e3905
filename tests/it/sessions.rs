//! Per-session routing: each client session gets its own upstream sessions (or shares one when
//! configured), DELETE closes them, and an upstream that is down does not stop the others.

use std::time::Duration;

use serde_json::json;

use crate::{
    fixtures::notes::NotesServer,
    harness::{
        GatewayBuilder, INITIALIZE, api_key, api_keys_section, call, closed_port, eventually,
        remote_notes, text,
    },
};

#[tokio::test]
async fn concurrent_sessions_keep_separate_upstream_state() {
    let (notes, gw) = remote_notes().await;
    let (a, b) = (gw.client().await, gw.client().await);

    let count = |client| async move {
        let mut seen = Vec::new();
        for _ in 0..5 {
            let result = call(client, "remote__increment", json!({})).await.unwrap();
            seen.push(text(&result).to_owned());
        }
        seen
    };
    let (seen_a, seen_b) = tokio::join!(count(&a), count(&b));
    assert_eq!(seen_a, ["1", "2", "3", "4", "5"]);
    assert_eq!(seen_b, ["1", "2", "3", "4", "5"]);
    assert_eq!(
        notes.open_sessions(),
        3,
        "one shared (discovery) session and one per client"
    );
}

#[tokio::test]
async fn shared_mode_uses_one_upstream_session_for_everyone() {
    let notes = NotesServer::start().await;
    let gw = GatewayBuilder::new()
        .upstream(
            "remote",
            &format!("url = {:?}\nsession = \"shared\"", notes.url()),
        )
        .start()
        .await;
    let (a, b) = (gw.client().await, gw.client().await);
    let first = call(&a, "remote__increment", json!({})).await.unwrap();
    let second = call(&b, "remote__increment", json!({})).await.unwrap();
    assert_eq!((text(&first), text(&second)), ("1", "2"));
    assert_eq!(notes.open_sessions(), 1);
}

#[tokio::test]
async fn ending_a_session_closes_its_upstream_sessions() {
    let (notes, gw) = remote_notes().await;
    assert_eq!(notes.open_sessions(), 1, "the shared session");

    let client = gw.client().await;
    let other = gw.client().await;
    call(&client, "remote__increment", json!({})).await.unwrap();
    call(&other, "remote__increment", json!({})).await.unwrap();
    assert_eq!(notes.open_sessions(), 3);

    // Closing the client sends DELETE for its gateway session.
    client.cancel().await.unwrap();
    assert!(
        eventually(Duration::from_secs(5), || notes.open_sessions() == 2).await,
        "the upstream session of the deleted client closes; open: {}",
        notes.open_sessions()
    );
    let still = call(&other, "remote__increment", json!({})).await.unwrap();
    assert_eq!(text(&still), "2", "the other session is untouched");
}

#[tokio::test]
async fn idle_sessions_expire_and_close_their_upstream_sessions() {
    let notes = NotesServer::start().await;
    let gw = GatewayBuilder::new()
        .section("[server]\nsession_idle_timeout_seconds = 0.5")
        .http("remote", &notes.url())
        .start()
        .await;
    let client = gw.client().await;
    call(&client, "remote__increment", json!({})).await.unwrap();
    assert_eq!(notes.open_sessions(), 2);
    assert!(
        eventually(Duration::from_secs(5), || notes.open_sessions() == 1).await,
        "the idle session's upstream session closes"
    );
}

#[tokio::test]
async fn an_upstream_down_at_start_does_not_stop_the_others() {
    let port = closed_port().await;
    let gw = GatewayBuilder::new()
        .http("down", &format!("http://127.0.0.1:{port}/mcp"))
        .demo("local")
        .upstream("missing", "command = \"switchyard-test-no-such-program\"")
        .start()
        .await;

    let health = gw.health().await;
    assert_eq!(health["status"], "degraded");
    let down = &health["upstreams"][0];
    assert_eq!(
        (down["name"].as_str(), down["state"].as_str()),
        (Some("down"), Some("failed"))
    );
    assert!(
        down["last_error"]
            .as_str()
            .unwrap()
            .contains("initialize failed"),
        "{down}"
    );
    assert_eq!(health["upstreams"][1]["state"], "ready");
    let missing = &health["upstreams"][2];
    assert_eq!(missing["state"], "failed");
    assert!(
        missing["last_error"]
            .as_str()
            .unwrap()
            .contains("cannot start `switchyard-test-no-such-program`"),
        "{missing}"
    );

    let client = gw.client().await;
    let tools = client.list_all_tools().await.unwrap();
    assert!(!tools.is_empty() && tools.iter().all(|t| t.name.starts_with("local__")));
    let echoed = call(&client, "local__echo", json!({"text": "up"}))
        .await
        .unwrap();
    assert_eq!(text(&echoed), "up");

    let Err(rmcp::ServiceError::McpError(error)) = call(&client, "down__anything", json!({})).await
    else {
        panic!("a call to the down upstream must fail");
    };
    assert!(
        error.message.contains("upstream `down` is unavailable"),
        "{}",
        error.message
    );
    assert_eq!(error.data, Some(json!({"upstream": "down"})));
}

#[tokio::test]
async fn per_client_stdio_gets_a_process_per_session_within_its_cap() {
    let gw = GatewayBuilder::new()
        .upstream(
            "local",
            &format!(
                "command = {:?}\nargs = [\"demo-server\"]\nsession = \"per_client\"\nmax_processes = 2",
                crate::harness::SWITCHYARD
            ),
        )
        .start()
        .await;
    let (a, b, c) = (gw.client().await, gw.client().await, gw.client().await);
    for client in [&a, &a, &b] {
        call(client, "local__increment", json!({})).await.unwrap();
    }
    let a_count = call(&a, "local__increment", json!({})).await.unwrap();
    let b_count = call(&b, "local__increment", json!({})).await.unwrap();
    assert_eq!(
        (text(&a_count), text(&b_count)),
        ("3", "2"),
        "one process per session"
    );

    let Err(rmcp::ServiceError::McpError(error)) = call(&c, "local__increment", json!({})).await
    else {
        panic!("a third process exceeds max_processes = 2");
    };
    assert!(
        error
            .message
            .contains("all 2 per-client processes are in use"),
        "{}",
        error.message
    );
    // Ending a session frees its process for the next one.
    a.cancel().await.unwrap();
    let mut freed = false;
    for _ in 0..100 {
        if let Ok(result) = call(&c, "local__increment", json!({})).await {
            assert_eq!(text(&result), "1");
            freed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(freed, "the closed session's process slot is reused");
}

#[tokio::test]
async fn stdio_env_and_cwd_reach_the_process() {
    let dir = tempfile::tempdir().unwrap();
    // The server starts only if it sees the expanded variable and runs in the configured cwd.
    let script = format!(
        "test \"$GREETING\" = hello-switchyard && test \"$(pwd)\" = {:?} && exec {:?} demo-server",
        dir.path().canonicalize().unwrap(),
        crate::harness::SWITCHYARD
    );
    let gw = GatewayBuilder::new()
        .upstream(
            "local",
            &format!(
                "command = \"sh\"\nargs = [\"-c\", {script:?}]\n\
                 env = {{ GREETING = \"hello-${{env:CARGO_PKG_NAME}}\" }}\ncwd = {:?}",
                dir.path()
            ),
        )
        .start()
        .await;
    let health = gw.health().await;
    assert_eq!(health["upstreams"][0]["state"], "ready", "{health}");
}

/// The session protocol on the wire: a session's standalone GET stream, 404 for a session that
/// does not exist (or no longer does, after DELETE), and 400 for an unsupported protocol
/// version.
#[tokio::test]
async fn sessions_on_the_wire_get_delete_and_unknown_ids() {
    let (_notes, gw) = remote_notes().await;
    let http = reqwest::Client::new();
    let post = |session: Option<&str>, version: &str, body: serde_json::Value| {
        let mut request = http
            .post(gw.url())
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", version)
            .json(&body);
        if let Some(session) = session {
            request = request.header("mcp-session-id", session);
        }
        request.send()
    };
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "wire", "version": "1"}}});
    let opened = post(None, "2025-11-25", initialize).await.unwrap();
    assert_eq!(opened.status(), 200);
    let session = opened.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let accepted = post(Some(&session), "2025-11-25", initialized)
        .await
        .unwrap();
    assert_eq!(accepted.status(), 202);

    // The standalone stream, for what the server sends outside any request.
    let stream = http
        .get(gw.url())
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    assert!(
        stream.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    drop(stream);

    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let wrong_version = post(Some(&session), "1999-01-01", list.clone())
        .await
        .unwrap();
    assert_eq!(wrong_version.status(), 400);
    let unknown = post(Some("no-such-session"), "2025-11-25", list.clone())
        .await
        .unwrap();
    assert_eq!(unknown.status(), 404);

    let deleted = http
        .delete(gw.url())
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .unwrap();
    assert!(deleted.status().is_success(), "{}", deleted.status());
    let after = post(Some(&session), "2025-11-25", list).await.unwrap();
    assert_eq!(after.status(), 404, "a deleted session is gone");
}

/// Hundreds of sessions of three users at once, all over the one shared upstream session of a
/// stdio server: every answer carries the marker its own caller sent, under its own request
/// id: no answer reaches another session.
#[tokio::test]
async fn hundreds_of_sessions_over_one_shared_upstream_never_cross() {
    const SESSIONS: usize = 300;
    const CALLS: usize = 5;
    let users = ["alice", "bob", "carol"];
    // A hundred sessions each, at full speed: beyond the default limits of a user.
    let unlimited =
        "[limits]\nmax_sessions_per_principal = 0\nrequests_per_second_per_principal = 0\n";
    let gw = GatewayBuilder::new()
        .section(&format!("{unlimited}{}", api_keys_section(&users)))
        .demo("demo")
        .start()
        .await;
    let http = reqwest::Client::new();
    let post = |user: &str, session: Option<&str>, body: String| {
        let mut request = http
            .post(gw.url())
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .header("authorization", format!("Bearer {}", api_key(user)))
            .body(body);
        if let Some(id) = session {
            request = request.header("mcp-session-id", id);
        }
        request.send()
    };
    let one_session = |s: usize| {
        let post = &post;
        async move {
            let user = users[s % users.len()];
            let opened = post(user, None, INITIALIZE.to_owned()).await.unwrap();
            let session = opened.headers()["mcp-session-id"]
                .to_str()
                .unwrap()
                .to_owned();
            let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
            post(user, Some(&session), initialized.to_owned())
                .await
                .unwrap();
            let mut crossed = Vec::new();
            for c in 0..CALLS {
                let marker = format!("{user}-session-{s}-call-{c}");
                let id = 100 + c;
                let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                    "params": {"name": "demo__echo", "arguments": {"text": marker}}});
                let answer = post(user, Some(&session), call.to_string()).await.unwrap();
                let body = answer.text().await.unwrap();
                let reply = body
                    .lines()
                    .filter_map(|line| line.strip_prefix("data:"))
                    .filter_map(|data| serde_json::from_str::<serde_json::Value>(data).ok())
                    .find(|message| {
                        message.get("result").is_some() || message.get("error").is_some()
                    });
                let seen = reply
                    .as_ref()
                    .map(|r| (r["id"].clone(), r["result"]["content"][0]["text"].clone()));
                if seen != Some((json!(id), json!(marker))) {
                    crossed.push(format!("{marker}: {body}"));
                }
            }
            crossed
        }
    };
    let crossed: Vec<String> = futures::future::join_all((0..SESSIONS).map(one_session))
        .await
        .into_iter()
        .flatten()
        .collect();
    assert!(
        crossed.is_empty(),
        "{} of {} answers went astray, e.g. {:?}",
        crossed.len(),
        SESSIONS * CALLS,
        crossed.first()
    );
    assert_eq!(gw.state("demo"), "ready");
}
