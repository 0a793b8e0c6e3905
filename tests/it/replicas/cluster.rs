//! Three gateway processes of one configuration on a real Redis behind a round-robin balancer,
//! and the raw requests the replica tests send through it.

use std::time::Duration;

use base64::Engine;
use serde_json::{Value, json};

use crate::{
    fixtures::{notes::NotesServer, redis::RedisServer, round_robin::RoundRobin},
    harness::{GatewayProcess, SWITCHYARD, healthz},
};

/// The session key every replica shares.
pub const KEY: [u8; 32] = [42; 32];

/// Three replicas of one configuration (the demo server as upstream) on `redis`, behind a
/// round-robin balancer.
pub struct Cluster {
    pub replicas: Vec<GatewayProcess>,
    pub balancer: RoundRobin,
    config: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Cluster {
    pub async fn start(redis: &RedisServer, idle_seconds: u32) -> Self {
        Self::start_with(redis, idle_seconds, |_| String::new()).await
    }

    /// `start`, the configuration ending with what `extra` gives for the balancer's origin.
    pub async fn start_with(
        redis: &RedisServer,
        idle_seconds: u32,
        extra: impl FnOnce(&str) -> String,
    ) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("switchyard.toml");
        let key = base64::engine::general_purpose::STANDARD.encode(KEY);
        let balancer = RoundRobin::bind().await;
        std::fs::write(
            &config,
            format!(
                "[server]\nsession_idle_timeout_seconds = {idle_seconds}\nwatch_config = false\n\n\
                 [store]\nkind = \"redis\"\nurl = \"{}\"\nsession_keys = [\"{key}\"]\n\n\
                 [upstreams.demo]\ncommand = \"{SWITCHYARD}\"\nargs = [\"demo-server\"]\n\n{}",
                redis.url(),
                extra(&balancer.origin()),
            ),
        )
        .unwrap();
        let replicas: Vec<GatewayProcess> =
            (0..3).map(|_| GatewayProcess::start(&config)).collect();
        balancer.set_backends(replicas.iter().map(|r| r.addr).collect());
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

    /// Waits until every replica has upstream `name` ready.
    pub async fn wait_ready(&self, name: &str, within: Duration) {
        for replica in &self.replicas {
            let deadline = tokio::time::Instant::now() + within;
            loop {
                let health = healthz(replica.addr).await;
                let state = health["upstreams"]
                    .as_array()
                    .and_then(|all| all.iter().find(|u| u["name"] == name))
                    .map(|u| u["state"].clone());
                if state.as_ref().and_then(Value::as_str) == Some("ready") {
                    break;
                }
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "{name} never became ready on {}: {health}",
                    replica.addr
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }

    pub async fn resumed(&self) -> f64 {
        let mut sum = 0.0;
        for replica in &self.replicas {
            sum += replica.metric("switchyard_sessions_resumed_total").await;
        }
        sum
    }
}

/// Waits until `replica` lists the demo server's tools.
async fn wait_for_tools(replica: &GatewayProcess) {
    for _ in 0..200 {
        if healthz(replica.addr).await["tools"].as_u64().unwrap_or(0) > 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("replica {} never listed its tools", replica.addr);
}

/// One POST through the balancer, its status and body (an event stream's data joined).
pub async fn post(url: &str, session: Option<&str>, body: Value) -> (u16, String) {
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
pub async fn raw_session(url: &str) -> String {
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
pub async fn initialize(url: &str) -> String {
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

pub fn echo(id: u32, text: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": "demo__echo", "arguments": {"text": text}}})
}

/// Writes the cluster's configuration with `extra` upstreams and has `replica` reload it.
pub fn reload_with(cluster: &Cluster, replica: usize, extra: &str) {
    let text = std::fs::read_to_string(&cluster.config).unwrap();
    let base = text.split("# extra\n").next().unwrap().to_owned();
    std::fs::write(&cluster.config, format!("{base}# extra\n{extra}")).unwrap();
    cluster.replicas[replica].signal("HUP");
}

/// Three replicas with the notes server as `remote`, ready.
pub async fn notes_cluster() -> (RedisServer, NotesServer, Cluster) {
    let redis = RedisServer::start().await;
    let notes = NotesServer::start().await;
    let cluster = Cluster::start_with(&redis, 300, |_| {
        format!("[upstreams.remote]\nurl = {:?}\n", notes.url())
    })
    .await;
    cluster.wait_ready("remote", Duration::from_secs(20)).await;
    (redis, notes, cluster)
}
