//! Resource subscriptions across replicas: one replica holds each (a subscribe landing on
//! another does not subscribe again), an unsubscribe landing on another replica ends it, and
//! when the holder dies a replica serving the session takes it over.

#![allow(deprecated)] // resources/subscribe is legacy-only

use std::time::Duration;

use rmcp::model::{SubscribeRequestParams, UnsubscribeRequestParams};
use serde_json::json;

use super::cluster::{Cluster, notes_cluster};
use crate::{
    fixtures::redis::RedisServer,
    harness::{Recorder, call, eventually, healthz},
};

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

/// The replica holding a subscription is killed: another replica serving the session takes
/// the subscription over, and the client's updates go on, once each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_outlives_the_replica_holding_it() {
    let (redis, notes, mut cluster) = notes_cluster().await;
    let url = cluster.balancer.url();
    let ada = Recorder::plain("ada");
    let a = ada.clone().connect(&url).await;
    let b = Recorder::plain("bob").connect(&url).await;
    let uri = "remote+notes://note/7";

    a.subscribe(SubscribeRequestParams::new(uri)).await.unwrap();
    assert_eq!(notes.shared.subscription_count(), 1);
    let first = holder(&redis, &cluster, &[0, 1, 2]).await;
    // Subscribing again through other replicas finds it held: no second subscription.
    for _ in 0..2 {
        a.subscribe(SubscribeRequestParams::new(uri)).await.unwrap();
    }
    assert_eq!(notes.shared.subscription_count(), 1, "held once");

    let touch = || async {
        call(&b, "remote__touch", json!({"name": "7"}))
            .await
            .unwrap();
    };
    touch().await;
    let updated = eventually(Duration::from_secs(5), || ada.seen().updated.len() == 1).await;
    assert!(updated, "the first update: {:?}", ada.seen().updated);

    // The holder dies; the balancer sends nothing more its way.
    let killed = first;
    cluster.replicas[killed].kill();
    let survivors: Vec<_> = (0..cluster.replicas.len())
        .filter(|n| *n != killed)
        .map(|n| cluster.replicas[n].addr)
        .collect();
    cluster.balancer.set_backends(survivors);
    // A living replica takes the subscription over: on the client's own upstream session,
    // which that replica goes on with (the upstream keeps one subscription per session).
    let living: Vec<usize> = (0..cluster.replicas.len())
        .filter(|n| *n != killed)
        .collect();
    let started = std::time::Instant::now();
    loop {
        let mut held = false;
        for n in &living {
            held |= holds(&redis, &cluster, *n).await;
        }
        if held {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "a living replica subscribed again"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    resumes_once_each(
        &ada,
        &touch,
        Duration::from_secs(20),
        "updates reach the client again",
    )
    .await;

    // The new holder shuts down as a service manager stops it: it says so, and the last
    // replica takes over within a few beats rather than after its silence.
    let second = holder(&redis, &cluster, &living).await;
    let last = *living.iter().find(|n| **n != second).unwrap();
    cluster
        .balancer
        .set_backends(vec![cluster.replicas[last].addr]);
    cluster.replicas[second].signal("TERM");
    // Updates may reach the client from the leaving replica until it hands over; the property
    // is checked once the last one holds the subscription.
    let started = std::time::Instant::now();
    while !holds(&redis, &cluster, last).await {
        assert!(
            started.elapsed() < Duration::from_secs(8),
            "the last replica takes the subscription over"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    resumes_once_each(
        &ada,
        &touch,
        Duration::from_secs(8),
        "taken over after a graceful stop",
    )
    .await;
}

/// Changes of the resource reach the client again `within` (else fails saying `what`), then
/// one more change gives exactly one more update.
pub(crate) async fn resumes_once_each<F: std::future::Future<Output = ()>>(
    ada: &Recorder,
    touch: &impl Fn() -> F,
    within: Duration,
    what: &str,
) {
    let reached = updated_again(ada, touch, within).await;
    assert!(reached, "{what}: {:?}", ada.seen().updated);
    once_each(ada, touch).await;
}

/// Whether changes of the resource, made until one reaches the client, do so `within`.
async fn updated_again<F: std::future::Future<Output = ()>>(
    ada: &Recorder,
    touch: &impl Fn() -> F,
    within: Duration,
) -> bool {
    let before = ada.seen().updated.len();
    let started = std::time::Instant::now();
    while started.elapsed() < within {
        touch().await;
        if eventually(Duration::from_millis(300), || {
            ada.seen().updated.len() > before
        })
        .await
        {
            return true;
        }
    }
    false
}

/// One more change of the resource gives the client exactly one more update.
async fn once_each<F: std::future::Future<Output = ()>>(ada: &Recorder, touch: &impl Fn() -> F) {
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = ada.seen().updated.len();
    touch().await;
    let one_more = eventually(Duration::from_secs(5), || {
        ada.seen().updated.len() == before + 1
    })
    .await;
    assert!(one_more, "{:?}", ada.seen().updated);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(ada.seen().updated.len(), before + 1, "no update twice");
}

/// Of the replicas `among`, the one holding the cluster's subscription: the one whose id
/// names a `held` set in the store.
async fn holder(redis: &RedisServer, cluster: &Cluster, among: &[usize]) -> usize {
    let mut holders = Vec::new();
    for n in among {
        if holds(redis, cluster, *n).await {
            holders.push(*n);
        }
    }
    assert_eq!(
        holders.len(),
        1,
        "one replica holds the subscription: {:?}",
        redis.dump("switchyard:held:*").await
    );
    holders[0]
}

/// Whether replica `n` holds the cluster's subscription: its id names a `held` set.
async fn holds(redis: &RedisServer, cluster: &Cluster, n: usize) -> bool {
    let id = healthz(cluster.replicas[n].addr).await["store"]["replica"].clone();
    redis
        .dump("switchyard:held:*")
        .await
        .into_iter()
        .any(|(key, _)| id == key.trim_start_matches("switchyard:held:"))
}
