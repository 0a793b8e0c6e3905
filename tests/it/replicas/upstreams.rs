//! A client's own upstream sessions (`per_client` upstreams over streamable HTTP) follow it
//! across replicas: every replica goes on with the upstream session the first one opened, so
//! the upstream's per-client state is one; one the upstream lost is replaced once, for all.

use std::time::Duration;

use serde_json::json;

use super::cluster::Cluster;
use crate::{
    bench::spawn_server,
    fixtures::redis::RedisServer,
    harness::{call, connect_client, text},
};

/// The demo server over HTTP gives each session its own counter: a client whose calls land on
/// three replicas in turn counts 1, 2, 3… only if the three share one upstream session.
#[tokio::test]
async fn a_client_keeps_one_upstream_session_across_replicas() {
    let redis = RedisServer::start().await;
    let (mut demo, demo_url) = spawn_server(&["demo-server", "--http", "127.0.0.1:0"]).await;
    let cluster = Cluster::start_with(&redis, 300, |_| {
        format!("[upstreams.counter]\nurl = \"{demo_url}\"\nsession = \"per_client\"\n")
    })
    .await;
    cluster.wait_ready("counter", Duration::from_secs(30)).await;
    let url = cluster.balancer.url();

    let first = connect_client(&url, "first").await;
    let second = connect_client(&url, "second").await;
    let counts = |client| async move {
        let mut seen = Vec::new();
        for _ in 0..6 {
            let result = call(client, "counter__increment", json!({})).await.unwrap();
            seen.push(text(&result).parse::<u32>().unwrap());
        }
        seen
    };
    assert_eq!(
        counts(&first).await,
        [1, 2, 3, 4, 5, 6],
        "one upstream session"
    );
    assert_eq!(counts(&second).await, [1, 2, 3, 4, 5, 6], "its own session");
    assert_eq!(counts(&first).await, [7, 8, 9, 10, 11, 12]);

    // Redis holds the session records sealed: nothing of what the upstream said.
    let stored = redis.dump("switchyard:upstreams:*").await;
    assert_eq!(stored.len(), 2, "one record set per client session");
    for (key, value) in &stored {
        let value = String::from_utf8_lossy(value);
        assert!(
            !value.contains("switchyard-demo") && !value.contains("protocolVersion"),
            "{key}: {value}"
        );
    }

    // The upstream restarts and loses every session: the replica that meets that first opens
    // a new one, and the others go on with it.
    demo.kill().await.unwrap();
    let port = url::Url::parse(&demo_url).unwrap().port().unwrap();
    let _demo = spawn_server(&["demo-server", "--http", &format!("127.0.0.1:{port}")]).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let restarted = loop {
        match call(&first, "counter__increment", json!({})).await {
            Ok(result) => break text(&result).parse::<u32>().unwrap(),
            Err(error) => {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "never served again: {error}"
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    };
    assert_eq!(restarted, 1, "a new upstream session");
    assert_eq!(
        counts(&first).await,
        [2, 3, 4, 5, 6, 7],
        "shared by all three"
    );
    first.cancel().await.unwrap();
    second.cancel().await.unwrap();
}
