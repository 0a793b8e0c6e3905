//! Tasks of an upstream without sessions across replicas: which user created a task is kept in
//! Redis, so a handle opens on every replica for its owner, and once the upstream restarts and
//! gives a task id again, an old handle of it opens on no replica (the replica that answers
//! may never have seen either task).

use super::cluster::Cluster;
use crate::{
    fixtures::{numbered::Numbered, redis::RedisServer},
    harness::api_keys_section,
    tasks::{job, on_task},
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_old_handle_opens_on_no_replica_once_its_id_is_another_users() {
    let redis = RedisServer::start().await;
    let numbered = Numbered::start().await;
    let cluster = Cluster::start_with(&redis, 300, |_| {
        format!(
            "{}\n[upstreams.jobs]\n{}\n",
            api_keys_section(&["alice", "bob"]),
            numbered.upstream()
        )
    })
    .await;
    cluster
        .wait_ready("jobs", std::time::Duration::from_secs(30))
        .await;
    let url = cluster.balancer.url();
    let alices = job(&url, "alice", 30).await;
    // Her handle opens on every replica (each request lands on the next one).
    for _ in 0..3 {
        let got = on_task(&url, "alice", "tasks/get", &alices).await;
        assert_eq!(got["result"]["status"], "working", "{got}");
    }

    numbered.restart();
    let bobs = job(&url, "bob", 30).await;
    for _ in 0..3 {
        let seen = on_task(&url, "alice", "tasks/get", &alices).await;
        assert_eq!(
            seen["error"]["code"], -32602,
            "Alice reads Bob's task: {seen}"
        );
        let cancel = on_task(&url, "alice", "tasks/cancel", &alices).await;
        assert_eq!(
            cancel["error"]["code"], -32602,
            "Alice cancels Bob's task: {cancel}"
        );
        let his = on_task(&url, "bob", "tasks/get", &bobs).await;
        assert_eq!(his["result"]["status"], "working", "{his}");
    }
}
