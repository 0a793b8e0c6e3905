//! What a client sends that only one replica can act on: the answer to a request an upstream
//! sent it during a call (elicitation, sampling, roots), and the end of a resource
//! subscription, when the POST lands on another replica than the one that asked or
//! subscribed.

#![allow(deprecated)] // resources/subscribe is legacy-only

use std::time::Duration;

use rmcp::model::{SubscribeRequestParams, UnsubscribeRequestParams};
use serde_json::json;

use super::cluster::Cluster;
use crate::{
    fixtures::{notes::NotesServer, redis::RedisServer},
    harness::{Recorder, call, eventually, text},
};

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

/// A resource subscription is held by the replica the client subscribed through: its updates
/// reach the client's stream wherever that is open, and an unsubscribe landing on another
/// replica ends it there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsubscribe_landing_on_another_replica_ends_the_subscription() {
    let (_redis, notes, cluster) = notes_cluster().await;
    let url = cluster.balancer.url();
    let ada = Recorder::plain("ada");
    let a = ada.clone().connect(&url).await;
    let b = Recorder::plain("bob").connect(&url).await;
    let uri = "remote+notes://note/7";

    let subscriber = cluster.balancer.next_backend();
    a.subscribe(SubscribeRequestParams::new(uri)).await.unwrap();
    assert_eq!(notes.shared.subscription_count(), 1);
    call(&b, "remote__touch", json!({"name": "7"}))
        .await
        .unwrap();
    let updated = eventually(Duration::from_secs(5), || ada.seen().updated == [uri]).await;
    assert!(
        updated,
        "the update reached the client: {:?}",
        ada.seen().updated
    );

    // The unsubscribe lands on another replica than the one that subscribed.
    if cluster.balancer.next_backend() == subscriber {
        reqwest::get(format!("{}/healthz", cluster.balancer.origin()))
            .await
            .unwrap();
    }
    a.unsubscribe(UnsubscribeRequestParams::new(uri))
        .await
        .unwrap();
    let ended = eventually(Duration::from_secs(5), || {
        notes.shared.subscription_count() == 0
    })
    .await;
    assert!(ended, "the upstream subscription ended");
    call(&b, "remote__touch", json!({"name": "7"}))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(ada.seen().updated, [uri], "no update after the unsubscribe");
}

/// Three replicas with the notes server as `remote`, ready.
async fn notes_cluster() -> (RedisServer, NotesServer, Cluster) {
    let redis = RedisServer::start().await;
    let notes = NotesServer::start().await;
    let cluster = Cluster::start_with(&redis, 300, |_| {
        format!("[upstreams.remote]\nurl = {:?}\n", notes.url())
    })
    .await;
    cluster.wait_ready("remote", Duration::from_secs(20)).await;
    (redis, notes, cluster)
}
