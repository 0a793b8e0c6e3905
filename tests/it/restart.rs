//! The default (embedded) store across restarts: a client session opened before a restart, an
//! `--upgrade` or a crash goes on with the same id, its own upstream session, and a stream
//! resumed with `Last-Event-ID` that misses nothing sent while it was away.

use std::{path::Path, time::Duration};

use serde_json::json;

use crate::{
    bench::spawn_server,
    harness::{GatewayProcess, SWITCHYARD, healthz},
    replicas::{
        cluster::{post, raw_session},
        streams::Events,
    },
};

/// A gateway configuration in `dir`: the stdio demo as `demo`, the HTTP demo at `counter`
/// (each client session its own upstream session, counting its calls), state in `dir/state`.
fn write_config(dir: &Path, counter: &str, extra: &str) -> std::path::PathBuf {
    let path = dir.join("switchyard.toml");
    let text = format!(
        "[server]\nwatch_config = false\nshutdown_grace_seconds = 2\nupgrade_socket = {socket:?}\n\n\
         [oauth]\nstate_dir = {state:?}\n\n\
         [upstreams.demo]\ncommand = {SWITCHYARD:?}\nargs = [\"demo-server\"]\n\n\
         [upstreams.counter]\nurl = {counter:?}\nsession = \"per_client\"\n\n{extra}",
        socket = dir.join("upgrade.sock").display().to_string(),
        state = dir.join("state").display().to_string(),
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// A gateway configuration in `dir` with state in `dir/state`, a short shutdown grace, and
/// `rest` (its upstreams and anything else).
fn write_short(dir: &Path, rest: &str) -> std::path::PathBuf {
    let path = dir.join("switchyard.toml");
    let text = format!(
        "[server]\nwatch_config = false\nshutdown_grace_seconds = 1\n\n\
         [oauth]\nstate_dir = {:?}\n\n{rest}",
        dir.join("state").display().to_string(),
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// Stops `gw` with SIGTERM, as a service manager would, and checks it exited cleanly.
async fn stop(gw: GatewayProcess) {
    gw.signal("TERM");
    let exit = tokio::task::spawn_blocking(move || gw.wait())
        .await
        .unwrap();
    assert!(exit.success(), "{exit:?}");
}

/// Waits until `gw` lists both upstreams as ready.
async fn ready(gw: &GatewayProcess) {
    ready_all(gw, 2).await;
}

/// Waits until `gw` lists `count` upstreams as ready.
async fn ready_all(gw: &GatewayProcess, count: usize) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let health = healthz(gw.addr).await;
        let upstreams = health["upstreams"].as_array().cloned().unwrap_or_default();
        let ready = upstreams.iter().filter(|u| u["state"] == "ready").count();
        if ready >= count {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not ready: {health}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The counter's next value for `session`: 200 and a number, or the status and body.
async fn increment(url: &str, session: &str, id: u32) -> Result<u32, String> {
    let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                      "params": {"name": "counter__increment", "arguments": {}}});
    let (status, body) = post(url, Some(session), call).await;
    let count = body
        .split("\"text\":\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .and_then(|n| n.parse().ok());
    match (status, count) {
        (200, Some(count)) => Ok(count),
        _ => Err(format!("{status}: {body}")),
    }
}

/// Restarted (SIGTERM, then started again on the same state), a gateway serves the sessions
/// the last one opened: the same id works, the upstream session that counts the client's
/// calls goes on, and a stream resumed with `Last-Event-ID` gets the event sent while it was
/// closed, once. Killed with SIGKILL, its store file opens cleanly and keeps the sessions.
#[tokio::test]
async fn sessions_outlive_a_restart_and_a_crash() {
    let (_demo, counter) = spawn_server(&["demo-server", "--http", "127.0.0.1:0"]).await;
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &counter, "");
    let first = GatewayProcess::start(&config);
    ready(&first).await;
    let session = raw_session(&first.url()).await;
    for expected in 1..=3 {
        assert_eq!(
            increment(&first.url(), &session, expected).await,
            Ok(expected)
        );
    }

    // A list change reaches the open stream; a second one is sent while it is closed.
    let mut stream = Events::open(first.addr, &session, None).await;
    let second =
        format!("[upstreams.second]\ncommand = {SWITCHYARD:?}\nargs = [\"demo-server\"]\n");
    write_config(dir.path(), &counter, &second);
    first.signal("HUP");
    let seen = stream.batch(Duration::from_secs(20)).await;
    assert!(
        seen.iter()
            .any(|(_, data)| data.contains("notifications/tools/list_changed")),
        "{seen:?}"
    );
    let last_seen = seen.last().unwrap().0.clone();
    drop(stream);
    write_config(dir.path(), &counter, "");
    first.signal("HUP");
    tokio::time::sleep(Duration::from_secs(2)).await;

    stop(first).await;

    let mut second = GatewayProcess::start(&config);
    ready(&second).await;
    assert_eq!(
        increment(&second.url(), &session, 4).await,
        Ok(4),
        "the same session, and the same upstream session"
    );
    let mut resumed = Events::open(second.addr, &session, Some(&last_seen)).await;
    let missed = resumed.batch(Duration::from_secs(10)).await;
    assert!(
        missed
            .iter()
            .any(|(_, data)| data.contains("notifications/tools/list_changed")),
        "the event sent while the stream was closed: {missed:?}"
    );
    for (id, _) in &missed {
        assert!(seen.iter().all(|(before, _)| before != id), "{id} twice");
    }
    drop(resumed);

    // A crash: SIGKILL, once what was written has been flushed.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    second.kill();
    let third = GatewayProcess::start(&config);
    ready(&third).await;
    assert_eq!(healthz(third.addr).await["store"]["up"], true);
    assert_eq!(increment(&third.url(), &session, 5).await, Ok(5));
    let (status, body) = post(
        &third.url(),
        Some("not-a-session"),
        json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list"}),
    )
    .await;
    assert_eq!(status, 404, "{body}");
}

/// An `--upgrade` (the new binary takes the sockets over at SIGQUIT) keeps the sessions: the
/// running one lets go of the store file as it hands over, and the new one opens it.
#[tokio::test]
async fn sessions_outlive_an_upgrade() {
    let (_demo, counter) = spawn_server(&["demo-server", "--http", "127.0.0.1:0"]).await;
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &counter, "");
    let old = GatewayProcess::start(&config);
    ready(&old).await;
    let url = old.url();
    let session = raw_session(&url).await;
    for expected in 1..=2 {
        assert_eq!(increment(&url, &session, expected).await, Ok(expected));
    }

    let socket = dir.path().join("upgrade.sock");
    let upgrading = GatewayProcess::upgrading(&config, &[], &socket).await;
    let new = upgrading.take_over(&old).await;
    assert_eq!(new.addr, old.addr, "the same socket, taken over");
    let status = tokio::task::spawn_blocking(move || old.exit_within(Duration::from_secs(30)))
        .await
        .unwrap();
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
    ready(&new).await;
    assert_eq!(increment(&url, &session, 3).await, Ok(3));
    assert_eq!(healthz(new.addr).await["store"]["up"], true);
}

/// A resource subscription goes on after a restart: the client's stream comes back (to the
/// new process, behind the same address) and the session's subscription is made again
/// upstream, so updates reach the client again, once each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(deprecated)] // resources/subscribe is legacy-only
async fn subscriptions_outlive_a_restart() {
    use rmcp::model::SubscribeRequestParams;

    use crate::{
        fixtures::{notes::NotesServer, round_robin::RoundRobin},
        harness::{Recorder, call, connect_client, eventually},
        replicas::subscriptions::resumes_once_each,
    };

    let notes = NotesServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let path = write_short(
        dir.path(),
        &format!("[upstreams.remote]\nurl = {:?}\n", notes.url()),
    );
    let first = GatewayProcess::start(&path);
    ready_all(&first, 1).await;
    let front = RoundRobin::bind().await;
    front.set_backends(vec![first.addr]);
    let url = front.url();
    let ada = Recorder::plain("ada");
    let a = ada.clone().connect(&url).await;
    let uri = "remote+notes://note/7";
    a.subscribe(SubscribeRequestParams::new(uri)).await.unwrap();
    let touch = || async {
        let b = connect_client(&url, "bob").await;
        call(&b, "remote__touch", json!({"name": "7"}))
            .await
            .unwrap();
        let _ = b.cancel().await;
    };
    touch().await;
    let updated = eventually(Duration::from_secs(5), || ada.seen().updated.len() == 1).await;
    assert!(updated, "{:?}", ada.seen().updated);

    stop(first).await;
    let second = GatewayProcess::start(&path);
    ready_all(&second, 1).await;
    front.set_backends(vec![second.addr]);
    resumes_once_each(
        &ada,
        &touch,
        Duration::from_secs(20),
        "updates reach the client again",
    )
    .await;
    a.cancel().await.unwrap();
}

/// With tool search, what a session's client found stays in its own tool list after a
/// restart: the embedded store keeps it with the session.
#[tokio::test]
async fn found_tools_outlive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_short(
        dir.path(),
        &format!(
            "[catalog]\ntool_search = \"on\"\n\n\
             [upstreams.demo]\ncommand = {SWITCHYARD:?}\nargs = [\"demo-server\"]\n"
        ),
    );
    let listed = |body: String| {
        let data = body
            .lines()
            .filter_map(|line| line.strip_prefix("data: "))
            .find(|data| !data.trim().is_empty())
            .map_or(body.clone(), str::to_owned);
        let answer: serde_json::Value = serde_json::from_str(&data).unwrap();
        (answer["result"]["tools"].as_array().unwrap().iter())
            .map(|tool| tool["name"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    let list = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"});

    let first = GatewayProcess::start(&path);
    ready_all(&first, 1).await;
    let url = first.url();
    let session = raw_session(&url).await;
    let search = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "search_tools", "arguments": {"query": "echo a message back", "limit": 1}}});
    let (status, body) = post(&url, Some(&session), search).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("demo__echo"), "{body}");
    let (_, body) = post(&url, Some(&session), list.clone()).await;
    assert_eq!(listed(body), ["search_tools", "call_tool", "demo__echo"]);

    stop(first).await;
    let second = GatewayProcess::start(&path);
    ready_all(&second, 1).await;
    let (status, body) = post(&second.url(), Some(&session), list).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(listed(body), ["search_tools", "call_tool", "demo__echo"]);
}

/// One process at a time uses a store file: a second gateway on the same state directory
/// refuses to start, saying why, and the first goes on serving.
#[tokio::test]
async fn a_second_gateway_on_the_same_store_refuses_to_start() {
    let (_demo, counter) = spawn_server(&["demo-server", "--http", "127.0.0.1:0"]).await;
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &counter, "");
    let first = GatewayProcess::start(&config);
    ready(&first).await;
    let second = tokio::process::Command::new(SWITCHYARD)
        .args(["run", "-c"])
        .arg(&config)
        .args(["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"])
        .output();
    let second = tokio::time::timeout(Duration::from_secs(30), second)
        .await
        .expect("the second gateway stops at once")
        .unwrap();
    let said = String::from_utf8_lossy(&second.stderr);
    assert!(!second.status.success(), "{said}");
    assert!(
        said.contains("in use by another Switchyard process"),
        "{said}"
    );
    assert_eq!(healthz(first.addr).await["store"]["up"], true);
}
