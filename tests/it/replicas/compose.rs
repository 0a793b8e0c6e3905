//! The replicas of `deploy/compose/compose.yaml`, run here: three gateways on the compose
//! file's own configuration and the environment it gives them, on a real Redis. Only what
//! cannot hold on this host changes: the listeners (loopback, port 0), the Redis URL (the test's
//! server) and the state directory (a temporary one); the secrets `.env` would hold are made up.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use base64::Engine;
use serde_json::{Value, json};

use super::cluster::echo;
use crate::{
    fixtures::redis::RedisServer,
    harness::{GatewayProcess, healthz},
};

/// What compose.yaml gives one gateway replica.
#[derive(Debug, PartialEq)]
struct Replica {
    /// The configuration file on this host: the source of the mount that `run -c` names.
    config: PathBuf,
    /// Its environment as written (`${…}` is filled from `.env` by compose).
    environment: BTreeMap<String, String>,
}

fn compose_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/compose")
}

/// The `gateway-*` services of compose.yaml, its `x-` anchors merged in.
fn replicas() -> Vec<Replica> {
    let path = compose_dir().join("compose.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut document: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
    document.apply_merge().unwrap();
    let services = document["services"].as_mapping().expect("services");
    services
        .iter()
        .filter(|(name, _)| name.as_str().is_some_and(|n| n.starts_with("gateway-")))
        .map(|(_, service)| replica(service))
        .collect()
}

/// The configuration file and environment of one service.
fn replica(service: &serde_yaml::Value) -> Replica {
    let command: Vec<&str> = service["command"]
        .as_sequence()
        .expect("an explicit command")
        .iter()
        .map(|part| part.as_str().unwrap())
        .collect();
    let ["run", "-c", inside] = command[..] else {
        panic!("the command is `run -c FILE`: {command:?}");
    };
    let mount = service["volumes"]
        .as_sequence()
        .unwrap()
        .iter()
        .filter_map(|volume| volume.as_str())
        .find_map(|volume| {
            let mut parts = volume.split(':');
            let (source, target) = (parts.next()?, parts.next()?);
            (target == inside).then(|| compose_dir().join(source))
        })
        .unwrap_or_else(|| panic!("no volume mounts {inside}"));
    let environment = match &service["environment"] {
        serde_yaml::Value::Mapping(map) => {
            map.iter().map(|(k, v)| (scalar(k), scalar(v))).collect()
        }
        serde_yaml::Value::Sequence(list) => list
            .iter()
            .map(|entry| {
                let (k, v) = entry.as_str().unwrap().split_once('=').unwrap();
                (k.to_owned(), v.to_owned())
            })
            .collect(),
        other => panic!("environment: {other:?}"),
    };
    Replica {
        config: mount,
        environment,
    }
}

fn scalar(value: &serde_yaml::Value) -> String {
    match value {
        serde_yaml::Value::String(text) => text.clone(),
        other => serde_yaml::to_string(other).unwrap().trim().to_owned(),
    }
}

/// The variables `.env.example` sets.
fn env_example() -> Vec<String> {
    std::fs::read_to_string(compose_dir().join(".env.example"))
        .unwrap()
        .lines()
        .filter(|line| !line.trim_start().starts_with('#'))
        .filter_map(|line| Some(line.split_once('=')?.0.trim().to_owned()))
        .collect()
}

/// Made-up secrets in place of `.env`'s, for the variables compose.yaml fills from it.
struct Secrets {
    client_key: String,
    admin_token: String,
    session_key: String,
}

impl Secrets {
    fn new() -> Self {
        let mut bytes = [0u8; 56];
        aws_lc_rs::rand::fill(&mut bytes).unwrap();
        let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
        Self {
            client_key: hex(&bytes[..12]),
            admin_token: hex(&bytes[12..24]),
            session_key: base64::engine::general_purpose::STANDARD.encode(&bytes[24..]),
        }
    }

    /// The value `.env` would give `name`.
    fn value(&self, name: &str) -> String {
        match name {
            "SWITCHYARD_SESSION_KEY" => self.session_key.clone(),
            "SWITCHYARD_ADMIN_TOKEN" => self.admin_token.clone(),
            "SWITCHYARD_API_KEY_SHA256" => switchyard::config::hash_api_key(&self.client_key),
            other => panic!("compose.yaml takes {other} from .env: this test cannot make it up"),
        }
    }
}

/// The environment a replica runs with here: `.env`'s secrets made up, the Redis URL the
/// test's server's.
fn environment_here(
    written: &BTreeMap<String, String>,
    secrets: &Secrets,
    redis: &RedisServer,
) -> Vec<(String, String)> {
    let documented = env_example();
    written
        .iter()
        .map(|(name, value)| {
            let value = if value.contains("${") {
                assert!(documented.contains(name), ".env.example sets {name}");
                secrets.value(name)
            } else if name == "SWITCHYARD_REDIS_URL" {
                assert!(
                    value.starts_with("redis://redis:"),
                    "the redis service: {value}"
                );
                redis.url()
            } else {
                value.clone()
            };
            (name.clone(), value)
        })
        .collect()
}

/// A POST of `body` to `replica`'s endpoint as the client of `key`: status and body.
async fn post(
    replica: &GatewayProcess,
    key: &str,
    session: Option<&str>,
    body: Value,
) -> (u16, String, Option<String>) {
    let mut request = reqwest::Client::new()
        .post(replica.url())
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2025-11-25")
        .bearer_auth(key)
        .body(body.to_string());
    if let Some(id) = session {
        request = request.header("mcp-session-id", id);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let id = response
        .headers()
        .get("mcp-session-id")
        .map(|v| v.to_str().unwrap().to_owned());
    (status, response.text().await.unwrap(), id)
}

/// `name` in `replica`'s /metrics, read with `token`.
async fn metric(replica: &GatewayProcess, token: &str, name: &str) -> f64 {
    let text = reqwest::Client::new()
        .get(format!("http://{}/metrics", replica.admin))
        .bearer_auth(token)
        .send()
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

/// Waits until `replica` lists the demo server's tools and sees Redis.
async fn wait_ready(replica: &GatewayProcess) {
    for _ in 0..300 {
        let health = healthz(replica.addr).await;
        if health["tools"].as_u64().unwrap_or(0) > 0 && health["store"]["up"] == true {
            assert_eq!(health["store"]["kind"], "redis", "{health}");
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("replica {} never became ready", replica.addr);
}

/// Three replicas as compose.yaml runs them: a session opened on the first is served by the
/// second and the third; clients need the API key, /metrics the admin token.
#[tokio::test]
async fn the_compose_files_replicas_share_a_session() {
    let written = replicas();
    assert_eq!(written.len(), 3, "three gateway replicas: {written:?}");
    assert!(
        written.iter().all(|r| *r == written[0]),
        "one configuration and environment for all: {written:?}"
    );
    let redis = RedisServer::start().await;
    let secrets = Secrets::new();
    let environment = environment_here(&written[0].environment, &secrets, &redis);
    let environment: Vec<(&str, &str)> = environment
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let replicas: Vec<GatewayProcess> = (0..3)
        .map(|_| GatewayProcess::start_with_env(&written[0].config, &[], &environment))
        .collect();
    for replica in &replicas {
        wait_ready(replica).await;
    }
    let key = &secrets.client_key;

    let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "compose", "version": "1"}}});
    let (status, _, _) = post(
        &replicas[0],
        "not-the-key-0123456789",
        None,
        initialize.clone(),
    )
    .await;
    assert_eq!(status, 401, "the endpoint wants the client's key");
    let (status, body, id) = post(&replicas[0], key, None, initialize).await;
    assert_eq!(status, 200, "{body}");
    let id = id.expect("a session id");
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let (status, body, _) = post(&replicas[0], key, Some(&id), initialized).await;
    assert_eq!(status, 202, "{body}");

    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    let (status, body, _) = post(&replicas[1], key, Some(&id), list).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("demo__echo"), "{body}");
    let (status, body, _) = post(&replicas[2], key, Some(&id), echo(2, "from the third")).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("from the third"), "{body}");

    let token = &secrets.admin_token;
    for replica in &replicas[1..] {
        assert!(
            metric(replica, token, "switchyard_sessions_resumed_total").await >= 1.0,
            "replica {} served the session from its id",
            replica.addr
        );
    }
    let anonymous = reqwest::get(format!("http://{}/metrics", replicas[0].admin))
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401, "/metrics wants the admin token");
}
