//! Several gateway processes behind a plain round-robin balancer, sharing a real Redis: any
//! replica serves any session, a replica killed mid-run loses no session, a Redis outage is
//! reported and survived, streams follow their client (`streams`), and subscriptions outlive
//! the replica holding them (`subscriptions`); the compose file's replicas run as it runs
//! them (`compose`).

mod asks;
pub(crate) mod cluster;
mod compose;
mod quotas;
pub(crate) mod streams;
pub(crate) mod subscriptions;
mod tasks;
mod tokens;
mod upstreams;

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use base64::Engine;
use serde_json::json;

use self::cluster::{Cluster, echo, initialize, post, raw_session};
use crate::{
    fixtures::redis::RedisServer,
    harness::{call, connect_client, healthz, text},
};

/// With tool search, what a session's client found on one replica is in its tool list on
/// every other: the replicas share it through Redis.
#[tokio::test]
async fn found_tools_follow_the_session_to_every_replica() {
    let redis = RedisServer::start().await;
    let cluster =
        Cluster::start_with(&redis, 300, |_| "[catalog]\ntool_search = \"on\"\n".into()).await;
    let replica = |n: usize| format!("http://{}/mcp", cluster.replicas[n].addr);
    let session = raw_session(&replica(0)).await;
    let search = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "search_tools", "arguments": {"query": "echo a message back", "limit": 1}}});
    let (status, body) = post(&replica(0), Some(&session), search).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("demo__echo"), "{body}");
    let list = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"});
    for n in [1, 2] {
        let (status, body) = post(&replica(n), Some(&session), list.clone()).await;
        assert_eq!(status, 200, "{body}");
        assert!(body.contains("\"demo__echo\""), "replica {n}: {body}");
    }
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
        (
            &serde_json::from_value(json!({"protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "forger", "version": "1"}}))
            .unwrap(),
            Default::default(),
        ),
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

    // What Redis holds: liveness records under the prefix (the sessions', and the replicas'
    // beats), nothing of the sessions in clear.
    let stored: Vec<_> = redis
        .dump("*")
        .await
        .into_iter()
        .filter(|(key, _)| key != "switchyard:replicas")
        .collect();
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
    let after_kill = Arc::new(AtomicUsize::new(0));
    let killed = Arc::new(tokio::sync::Notify::new());
    let stop = tokio_util::sync::CancellationToken::new();
    let mut tasks = Vec::new();
    for c in 0..clients {
        let client = connect_client(&url, &format!("client-{c}")).await;
        let (after_kill, killed, stop) = (after_kill.clone(), killed.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let was_killed = killed.notified();
            tokio::pin!(was_killed);
            let mut dead = false;
            let mut failed = Vec::new();
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
                    Err(error) => failed.push(format!("call {n}: {error}")),
                }
            }
            (client, failed)
        }));
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    cluster.replicas[1].kill();
    killed.notify_waiters();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    stop.cancel();
    let mut survivors = Vec::new();
    for (c, task) in tasks.into_iter().enumerate() {
        let (client, failed) = task.await.unwrap();
        assert!(
            failed.len() <= 1,
            "client {c}: at most its one call in flight on the killed replica fails: {failed:?}"
        );
        survivors.push(client);
    }
    let after_kill = after_kill.load(Ordering::Relaxed);
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
            let health = healthz(replica.addr).await;
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
            if healthz(replica.addr).await["store"]["up"] == true {
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
