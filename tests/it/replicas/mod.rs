//! Several gateway processes behind a plain round-robin balancer, sharing a real Redis: any
//! replica serves any session, a replica killed mid-run loses no session, a Redis outage is
//! reported and survived.

use std::{
    io::{BufRead, BufReader},
    net::SocketAddr,
    process::{Child, Command, Stdio},
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use base64::Engine;
use serde_json::{Value, json};

use crate::{
    fixtures::{redis::RedisServer, round_robin::RoundRobin},
    harness::{SWITCHYARD, call, connect_client, text},
};

const KEY: [u8; 32] = [42; 32];

/// A gateway process.
struct Replica {
    child: Child,
    addr: SocketAddr,
    admin: SocketAddr,
}

impl Replica {
    fn start(config: &std::path::Path) -> Self {
        let mut child = Command::new(SWITCHYARD)
            .args(["run", "-c"])
            .arg(config)
            .args(["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"])
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let address = |line: &str, after: &str| {
                let at = line.find(after)? + after.len();
                let rest = line[at..].trim_start_matches("http://");
                rest.split(['/', ' ']).next()?.parse::<SocketAddr>().ok()
            };
            let (mut main, mut admin) = (None, None);
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if std::env::var_os("REPLICA_LOG").is_some() {
                    eprintln!("{line}");
                }
                main = main.or_else(|| address(&line, "serving MCP on "));
                admin = admin.or_else(|| address(&line, "metrics on "));
                if let (Some(found), Some(admin)) = (main, admin) {
                    let _ = tx.send((found, admin));
                    main = None;
                }
            }
        });
        let (addr, admin) = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the replica starts");
        Self { child, addr, admin }
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// A counter or gauge of its `/metrics`.
    async fn metric(&self, name: &str) -> f64 {
        let text = reqwest::get(format!("http://{}/metrics", self.admin))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        text.lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
            .and_then(|value| value.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {name} in /metrics"))
    }

    async fn health(&self) -> Value {
        reqwest::get(format!("http://{}/healthz", self.addr))
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Three replicas of one configuration (the demo server as upstream) on `redis`, behind a
/// round-robin balancer.
struct Cluster {
    replicas: Vec<Replica>,
    balancer: RoundRobin,
    config: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Cluster {
    async fn start(redis: &RedisServer, idle_seconds: u32) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("switchyard.toml");
        let key = base64::engine::general_purpose::STANDARD.encode(KEY);
        std::fs::write(
            &config,
            format!(
                "[server]\nsession_idle_timeout_seconds = {idle_seconds}\nwatch_config = false\n\n\
                 [store]\nkind = \"redis\"\nurl = \"{}\"\nsession_keys = [\"{key}\"]\n\n\
                 [upstreams.demo]\ncommand = \"{SWITCHYARD}\"\nargs = [\"demo-server\"]\n",
                redis.url()
            ),
        )
        .unwrap();
        let replicas: Vec<Replica> = (0..3).map(|_| Replica::start(&config)).collect();
        let balancer = RoundRobin::start(replicas.iter().map(|r| r.addr).collect()).await;
        let cluster = Self {
            replicas,
            balancer,
            config,
            _dir: dir,
        };
        for replica in &cluster.replicas {
            wait_for_tools(replica).await;
        }
        cluster
    }

    async fn resumed(&self) -> f64 {
        let mut sum = 0.0;
        for replica in &self.replicas {
            sum += replica.metric("switchyard_sessions_resumed_total").await;
        }
        sum
    }
}

/// Waits until `replica` lists the demo server's tools.
async fn wait_for_tools(replica: &Replica) {
    for _ in 0..200 {
        if replica.health().await["tools"].as_u64().unwrap_or(0) > 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("replica {} never listed its tools", replica.addr);
}

/// One POST through the balancer, its status and body (an event stream's data joined).
async fn post(url: &str, session: Option<&str>, body: Value) -> (u16, String) {
    let mut request = reqwest::Client::new()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2025-11-25")
        .body(body.to_string());
    if let Some(id) = session {
        request = request.header("mcp-session-id", id);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

/// A raw session through the balancer: its id.
async fn raw_session(url: &str) -> String {
    let id = initialize(url).await;
    let (status, _) = post(
        url,
        Some(&id),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    assert_eq!(status, 202);
    id
}

/// An `initialize` through the balancer: the new session's id.
async fn initialize(url: &str) -> String {
    let response = reqwest::Client::new()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "raw", "version": "1"}}})
            .to_string(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned()
}

fn echo(id: u32, text: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": "demo__echo", "arguments": {"text": text}}})
}

/// An official SDK client whose every request lands on the next replica: its session goes
/// on; a DELETE on one replica ends the session on all; ids that are altered, made up or
/// sealed with another key name no session; Redis holds nothing readable of a session.
#[tokio::test]
async fn any_replica_serves_any_session() {
    let redis = RedisServer::start().await;
    let cluster = Cluster::start(&redis, 300).await;
    let url = cluster.balancer.url();

    let client = connect_client(&url, "replicated").await;
    for n in 0..9 {
        let result = call(&client, "demo__echo", json!({"text": format!("call {n}")}))
            .await
            .unwrap_or_else(|error| panic!("call {n}: {error}"));
        assert_eq!(text(&result), format!("call {n}"));
    }
    let tools = client.list_all_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "demo__add"));
    let served = cluster.balancer.served();
    assert!(served.iter().all(|n| *n >= 3), "spread: {served:?}");
    assert!(
        cluster.resumed().await >= 2.0,
        "the other two replicas served the session from its id"
    );

    // A raw session: its DELETE, on one replica, ends it on every one.
    let id = raw_session(&url).await;
    for n in 0..3 {
        let (status, body) = post(&url, Some(&id), echo(n, "raw")).await;
        assert_eq!(status, 200, "{body}");
        assert!(body.contains("raw"), "{body}");
    }
    let deleted = reqwest::Client::new()
        .delete(&url)
        .header("mcp-session-id", &id)
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 200);
    tokio::time::sleep(Duration::from_millis(200)).await;
    for n in 0..3 {
        let (status, body) = post(&url, Some(&id), echo(10 + n, "after")).await;
        assert_eq!(status, 404, "ended everywhere: {body}");
        assert!(body.contains("Session not found"), "{body}");
    }

    // Ids that open no session: altered, made up, sealed with a key the replicas lack.
    let live = raw_session(&url).await;
    let mut altered = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(&live)
        .unwrap();
    let last = altered.len() - 1;
    altered[last] ^= 1;
    let altered = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(altered);
    let ticket = switchyard::session::Ticket::new(
        &switchyard::principal::Principal::anonymous(),
        &switchyard::policy::EndpointName::MAIN,
        &serde_json::from_value(json!({"protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "forger", "version": "1"}}))
        .unwrap(),
    );
    let foreign = switchyard::session::SessionIds::new(std::sync::Arc::new(
        switchyard::store::Sealer::new(&[[7; 32]]),
    ))
    .mint(&ticket);
    for bad in [
        altered.as_str(),
        "0123456789abcdef0123456789abcdef",
        &foreign,
    ] {
        for n in 0..3 {
            let (status, body) = post(&url, Some(bad), echo(20 + n, "bad")).await;
            assert_eq!(status, 404, "{bad}: {body}");
        }
    }

    // What Redis holds: liveness records under the prefix, nothing of the sessions in clear.
    let stored = redis.dump("*").await;
    assert!(!stored.is_empty());
    for (key, value) in &stored {
        assert!(key.starts_with("switchyard:session:"), "{key}");
        assert_eq!(value, b"1", "{key}");
        assert!(!key.contains(&live) && !key.contains(&id));
    }
    client.cancel().await.unwrap();
}

/// Clients keep calling while one of three replicas is killed: calls fail only if they were
/// in flight on it, and every session goes on on the other two.
#[tokio::test]
async fn a_replica_killed_mid_run_loses_no_session() {
    let redis = RedisServer::start().await;
    let mut cluster = Cluster::start(&redis, 300).await;
    let url = cluster.balancer.url();
    let clients = 6;
    let failed = Arc::new(AtomicUsize::new(0));
    let after_kill = Arc::new(AtomicUsize::new(0));
    let killed = Arc::new(tokio::sync::Notify::new());
    let stop = tokio_util::sync::CancellationToken::new();
    let mut tasks = Vec::new();
    for c in 0..clients {
        let client = connect_client(&url, &format!("client-{c}")).await;
        let (failed, after_kill, killed, stop) = (
            failed.clone(),
            after_kill.clone(),
            killed.clone(),
            stop.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let was_killed = killed.notified();
            tokio::pin!(was_killed);
            let mut dead = false;
            let mut n = 0;
            while !stop.is_cancelled() {
                n += 1;
                let text_sent = format!("c{c} n{n}");
                let result = call(&client, "demo__echo", json!({"text": &text_sent})).await;
                dead = dead || futures::FutureExt::now_or_never(&mut was_killed).is_some();
                match result {
                    Ok(result) => {
                        assert_eq!(text(&result), text_sent);
                        if dead {
                            after_kill.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    Err(_) => {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            client
        }));
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    cluster.replicas[1].kill();
    killed.notify_waiters();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    stop.cancel();
    let mut survivors = Vec::new();
    for task in tasks {
        survivors.push(task.await.unwrap());
    }
    let failed = failed.load(Ordering::Relaxed);
    let after_kill = after_kill.load(Ordering::Relaxed);
    assert!(
        failed <= clients,
        "{failed} calls failed; at most one per client was in flight on the killed replica"
    );
    assert!(
        after_kill >= clients * 5,
        "sessions go on after the kill: {after_kill} calls"
    );
    // Every client's session still answers.
    for client in &survivors {
        let result = call(client, "demo__echo", json!({"text": "still here"}))
            .await
            .unwrap();
        assert_eq!(text(&result), "still here");
    }
}

/// Redis stops: the replicas say so (`/healthz`, `switchyard_store_up`), sessions they hold
/// go on, a session none of them holds is refused with 503 (not 404: it may live), stateless
/// requests are served. Redis comes back empty: the replicas write their sessions again, and
/// new sessions span replicas once more.
#[tokio::test]
async fn a_redis_outage_is_reported_and_survived() {
    let mut redis = RedisServer::start().await;
    let cluster = Cluster::start(&redis, 6).await;
    let url = cluster.balancer.url();
    let held = raw_session(&url).await;
    for n in 0..3 {
        let (status, body) = post(&url, Some(&held), echo(n, "before")).await;
        assert_eq!(status, 200, "{body}");
    }

    redis.stop();
    for replica in &cluster.replicas {
        let mut down = false;
        for _ in 0..100 {
            let health = replica.health().await;
            if health["store"]["up"] == false {
                assert_eq!(health["status"], "degraded", "{health}");
                assert_eq!(health["store"]["kind"], "redis");
                assert!(health["store"]["error"].as_str().is_some(), "{health}");
                down = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(down, "replica {} reports the outage", replica.addr);
        assert_eq!(replica.metric("switchyard_store_up").await, 0.0);
    }
    // Held by every replica: served.
    for n in 0..3 {
        let (status, body) = post(&url, Some(&held), echo(10 + n, "during")).await;
        assert_eq!(status, 200, "{body}");
        assert!(body.contains("during"), "{body}");
    }
    // Stateless (2026-07-28): nothing shared needed.
    for n in 0..3 {
        let response = reqwest::Client::new()
            .post(&url)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "tools/call")
            .header("mcp-name", "demo__echo")
            .body(
                json!({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {
                    "name": "demo__echo", "arguments": {"text": "stateless"},
                    "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                              "io.modelcontextprotocol/clientCapabilities": {},
                              "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"}}}})
                .to_string(),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        assert!(response.text().await.unwrap().contains("stateless"));
    }
    // A session opened now lives on its replica alone until Redis answers: elsewhere, 503.
    let lonely = initialize(&url).await;
    let mut unavailable = 0;
    for n in 0..3 {
        let (status, body) = post(&url, Some(&lonely), echo(20 + n, "lonely")).await;
        match status {
            200 => assert!(body.contains("lonely")),
            503 => {
                assert!(body.contains("Redis"), "{body}");
                unavailable += 1;
            }
            other => panic!("{other}: {body}"),
        }
    }
    assert!(unavailable >= 1, "other replicas cannot vouch for it");

    redis.restart().await;
    for replica in &cluster.replicas {
        let mut up = false;
        for _ in 0..200 {
            if replica.health().await["store"]["up"] == true {
                up = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(up, "replica {} sees Redis again", replica.addr);
    }
    // Within a sweep (a quarter of the idle timeout), the sessions are written again.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    for session in [&held, &lonely] {
        for n in 0..3 {
            let (status, body) = post(&url, Some(session), echo(30 + n, "after")).await;
            assert_eq!(status, 200, "{body}");
        }
    }
    let fresh = raw_session(&url).await;
    for n in 0..3 {
        let (status, body) = post(&url, Some(&fresh), echo(40 + n, "fresh")).await;
        assert_eq!(status, 200, "{body}");
    }
}

/// Reads an event stream: each event as (id, data), as they come.
struct Events {
    response: reqwest::Response,
    buffer: String,
}

impl Events {
    async fn open(addr: SocketAddr, session: &str, last_event_id: Option<&str>) -> Self {
        let mut request = reqwest::Client::new()
            .get(format!("http://{addr}/mcp"))
            .header("accept", "text/event-stream")
            .header("mcp-session-id", session)
            .header("mcp-protocol-version", "2025-11-25");
        if let Some(id) = last_event_id {
            request = request.header("last-event-id", id);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), 200);
        Self {
            response,
            buffer: String::new(),
        }
    }

    /// The events that come within `within`, then until none comes for a second.
    async fn batch(&mut self, within: Duration) -> Vec<(String, String)> {
        let mut events = Vec::new();
        let mut wait = within;
        while let Some(event) = self.next(wait).await {
            events.push(event);
            wait = Duration::from_secs(1);
        }
        events
    }

    /// The next event with data, within `within`.
    async fn next(&mut self, within: Duration) -> Option<(String, String)> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            while let Some(end) = self.buffer.find("\n\n") {
                let event: String = self.buffer.drain(..end + 2).collect();
                let field = |name: &str| {
                    event
                        .lines()
                        .find_map(|line| line.strip_prefix(name))
                        .map(|v| v.trim().to_owned())
                };
                if let Some(data) = field("data:").filter(|d| !d.is_empty()) {
                    return Some((field("id:").unwrap_or_default(), data));
                }
            }
            let chunk = tokio::time::timeout_at(deadline, self.response.chunk())
                .await
                .ok()?
                .ok()??;
            self.buffer.push_str(&String::from_utf8_lossy(&chunk));
        }
    }
}

/// Writes the cluster's configuration with `extra` upstreams and has `replica` reload it.
fn reload_with(cluster: &Cluster, replica: usize, extra: &str) {
    let text = std::fs::read_to_string(&cluster.config).unwrap();
    let base = text.split("# extra\n").next().unwrap().to_owned();
    std::fs::write(&cluster.config, format!("{base}# extra\n{extra}")).unwrap();
    let status = Command::new("kill")
        .args(["-HUP", &cluster.replicas[replica].child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// A session's standalone stream is open on one replica while another sends it something (a
/// list change after its reload): the event reaches it through Redis. The replica dies; the
/// client comes back on a third with `Last-Event-ID` and gets what was sent meanwhile, and
/// nothing twice. Redis holds the events sealed.
#[tokio::test]
async fn a_stream_resumed_on_another_replica_misses_no_event() {
    let redis = RedisServer::start().await;
    let mut cluster = Cluster::start(&redis, 300).await;
    let url = cluster.balancer.url();
    let session = raw_session(&url).await;
    let (status, _) = post(&url, Some(&session), echo(1, "hello")).await;
    assert_eq!(status, 200, "every replica has served the session once");

    let mut stream = Events::open(cluster.replicas[0].addr, &session, None).await;
    reload_with(
        &cluster,
        1,
        &format!("[upstreams.second]\ncommand = \"{SWITCHYARD}\"\nargs = [\"demo-server\"]\n"),
    );
    let first = stream.batch(Duration::from_secs(20)).await;
    assert!(
        first
            .iter()
            .any(|(_, data)| data.contains("notifications/tools/list_changed")),
        "replica 1's list change reaches the stream on replica 0: {first:?}"
    );
    assert!(first.iter().all(|(id, _)| !id.is_empty()), "ids: {first:?}");
    let last_seen = first.last().unwrap().0.clone();

    cluster.replicas[0].kill();
    reload_with(
        &cluster,
        2,
        &format!("[upstreams.third]\ncommand = \"{SWITCHYARD}\"\nargs = [\"demo-server\"]\n"),
    );
    // Sent while no stream is open anywhere: kept.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mut resumed = Events::open(cluster.replicas[1].addr, &session, Some(&last_seen)).await;
    let second = resumed.batch(Duration::from_secs(20)).await;
    assert!(
        second
            .iter()
            .any(|(_, data)| data.contains("notifications/tools/list_changed")),
        "the events sent while the client was away: {second:?}"
    );
    for (id, _) in &second {
        assert!(
            first.iter().all(|(seen, _)| seen != id),
            "{id} was sent twice: {first:?} then {second:?}"
        );
    }

    // Without Last-Event-ID, a stream starts after the last event any stream was sent.
    drop(resumed);
    let mut fresh = Events::open(cluster.replicas[2].addr, &session, None).await;
    assert!(fresh.next(Duration::from_millis(800)).await.is_none());

    // In Redis: the events, sealed.
    let stored = redis.dump("switchyard:events:*").await;
    assert!(!stored.is_empty());
    for (key, value) in &stored {
        let text = String::from_utf8_lossy(value);
        assert!(
            !text.contains("list_changed"),
            "{key} holds a message in clear"
        );
    }
}
