//! What a client sends that only one replica can act on: the answer to a request an upstream
//! sent it during a call (elicitation, sampling, roots), when the POST lands on another
//! replica than the one that asked.

use serde_json::json;

use super::cluster::notes_cluster;
use crate::harness::{Recorder, call, text};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_answer_landing_on_another_replica_reaches_the_one_that_asked() {
    let (_redis, _notes, cluster) = notes_cluster().await;

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
