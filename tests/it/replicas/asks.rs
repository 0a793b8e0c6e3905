//! Requests an upstream sends a client during a call (elicitation, sampling, roots) when the
//! client's answer, a POST of its own, lands on another replica than the one that asked.

use std::time::Duration;

use serde_json::json;

use super::cluster::Cluster;
use crate::{
    fixtures::{notes::NotesServer, redis::RedisServer},
    harness::{Recorder, call, text},
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_answer_landing_on_another_replica_reaches_the_one_that_asked() {
    let redis = RedisServer::start().await;
    let notes = NotesServer::start().await;
    let cluster = Cluster::start_with(&redis, 300, |_| {
        format!("[upstreams.remote]\nurl = {:?}\n", notes.url())
    })
    .await;
    cluster.wait_ready("remote", Duration::from_secs(20)).await;

    // Every request of the client lands on the next replica: the answer to what the upstream
    // asks never reaches the replica that asked it directly.
    let ada = Recorder::capable("ada")
        .connect(&cluster.balancer.url())
        .await;
    for round in 0..3 {
        let asked = call(&ada, "remote__ask_name", json!({})).await;
        assert_eq!(text(&asked.unwrap()), "hello \"ada\"", "round {round}");
        let sampled = call(&ada, "remote__sample", json!({})).await;
        assert_eq!(
            text(&sampled.unwrap()),
            "test-model: sampled for ada",
            "round {round}"
        );
        let roots = call(&ada, "remote__roots", json!({})).await;
        assert_eq!(text(&roots.unwrap()), "file:///home/ada", "round {round}");
    }
    let served = cluster.balancer.served();
    assert!(served.iter().all(|n| *n >= 6), "spread: {served:?}");
}
