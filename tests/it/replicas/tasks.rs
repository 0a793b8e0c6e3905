//! Tasks of an upstream without sessions across replicas: which user created a task is kept in
//! Redis, so a handle opens on every replica for its owner, and once the upstream restarts and
//! gives a task id again, an old handle of it opens on no replica (the replica that answers
//! may never have seen either task).

use serde_json::json;

use super::cluster::Cluster;
use crate::{
    fixtures::{redis::RedisServer, served::serve_until},
    harness::api_keys_section,
    tasks::modern_as,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_old_handle_opens_on_no_replica_once_its_id_is_another_users() {
    let redis = RedisServer::start().await;
    let numbered = switchyard_conformance::numbered::NumberedTasks::new();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let upstream = format!("http://{}/mcp", listener.local_addr().unwrap());
    let stop = tokio_util::sync::CancellationToken::new();
    serve_until(listener, numbered.app(), stop.clone());
    let _stop = stop.drop_guard();
    let cluster = Cluster::start_with(&redis, 300, |_| {
        format!(
            "{}\n[upstreams.jobs]\nurl = {upstream:?}\noauth = {{ enabled = false }}\n",
            api_keys_section(&["alice", "bob"])
        )
    })
    .await;
    cluster
        .wait_ready("jobs", std::time::Duration::from_secs(30))
        .await;
    let url = cluster.balancer.url();
    let call =
        |label: &str| json!({"name": "jobs__job", "arguments": {"label": label, "seconds": 30}});
    let created = modern_as(
        &url,
        Some("alice"),
        "tools/call",
        "jobs__job",
        call("alice"),
        true,
    )
    .await;
    let alices = created["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("{created}"))
        .to_owned();
    // Her handle opens on every replica (each request lands on the next one).
    for _ in 0..3 {
        let got = modern_as(
            &url,
            Some("alice"),
            "tasks/get",
            &alices,
            json!({"taskId": alices}),
            true,
        )
        .await;
        assert_eq!(got["result"]["status"], "working", "{got}");
    }

    numbered.restart();
    let created = modern_as(
        &url,
        Some("bob"),
        "tools/call",
        "jobs__job",
        call("bob"),
        true,
    )
    .await;
    let bobs = created["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("{created}"))
        .to_owned();
    for _ in 0..3 {
        let seen = modern_as(
            &url,
            Some("alice"),
            "tasks/get",
            &alices,
            json!({"taskId": alices}),
            true,
        )
        .await;
        assert_eq!(
            seen["error"]["code"], -32602,
            "Alice reads Bob's task: {seen}"
        );
        let cancel = modern_as(
            &url,
            Some("alice"),
            "tasks/cancel",
            &alices,
            json!({"taskId": alices}),
            true,
        )
        .await;
        assert_eq!(
            cancel["error"]["code"], -32602,
            "Alice cancels Bob's task: {cancel}"
        );
        let his = modern_as(
            &url,
            Some("bob"),
            "tasks/get",
            &bobs,
            json!({"taskId": bobs}),
            true,
        )
        .await;
        assert_eq!(his["result"]["status"], "working", "{his}");
    }
}
