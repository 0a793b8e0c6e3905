//! Notifications Switchyard sends on its own: list changes when upstream lists change (one per
//! burst), resource updates to exactly the subscribed clients, and the same for 2026-07-28
//! clients through `subscriptions/listen`. Also `logging/setLevel` reaching upstreams.

#![allow(deprecated)] // resources/subscribe and logging/setLevel are legacy-only

use std::time::Duration;

use rmcp::model::{
    LoggingLevel, ServerNotification, SetLevelRequestParams, SubscribeRequestParams,
    SubscriptionFilter, UnsubscribeRequestParams,
};
use serde_json::json;

use crate::harness::{Recorder, call, eventually, remote_notes, text};

#[tokio::test]
async fn a_burst_of_upstream_list_changes_yields_one_notification() {
    let (_notes, gw) = remote_notes().await;
    let watcher = Recorder::plain("watcher");
    let client = watcher.clone().connect(&gw.url()).await;
    let result = call(&client, "remote__add_tools", json!({"steps": 5}))
        .await
        .unwrap();
    assert_eq!(text(&result), "5 dynamic tools");
    assert!(
        eventually(Duration::from_secs(5), || watcher.seen().tools_changed == 1).await,
        "one tools/list_changed"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(watcher.seen().tools_changed, 1, "and only one");
    let tools = client.list_all_tools().await.unwrap();
    for k in 1..=5 {
        assert!(
            tools.iter().any(|t| t.name == format!("remote__dyn_{k}")),
            "dyn_{k}"
        );
    }
    let dynamic = call(&client, "remote__dyn_3", json!({})).await.unwrap();
    assert_eq!(text(&dynamic), "dynamic dyn_3");
}

#[tokio::test]
async fn resource_updates_reach_exactly_the_subscribers() {
    let (notes, gw) = remote_notes().await;
    let (ada, bob) = (Recorder::plain("ada"), Recorder::plain("bob"));
    let a = ada.clone().connect(&gw.url()).await;
    let b = bob.clone().connect(&gw.url()).await;
    let uri = "remote+notes://note/7";
    a.subscribe(SubscribeRequestParams::new(uri)).await.unwrap();
    assert_eq!(
        notes.shared.subscription_count(),
        1,
        "the upstream was subscribed"
    );

    call(&b, "remote__touch", json!({"name": "7"}))
        .await
        .unwrap();
    assert!(eventually(Duration::from_secs(5), || ada.seen().updated == [uri]).await);
    call(&b, "remote__touch", json!({"name": "8"}))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(ada.seen().updated, [uri], "note 8 is not subscribed");
    assert!(bob.seen().updated.is_empty(), "bob subscribed to nothing");

    // A second subscriber shares the one upstream subscription; the last to leave ends it.
    b.subscribe(SubscribeRequestParams::new(uri)).await.unwrap();
    assert_eq!(notes.shared.subscription_count(), 1);
    a.unsubscribe(UnsubscribeRequestParams::new(uri))
        .await
        .unwrap();
    call(&a, "remote__touch", json!({"name": "7"}))
        .await
        .unwrap();
    assert!(eventually(Duration::from_secs(5), || bob.seen().updated == [uri]).await);
    assert_eq!(ada.seen().updated, [uri], "ada unsubscribed");
    b.cancel().await.unwrap();
    assert!(
        eventually(Duration::from_secs(5), || notes.shared.subscription_count()
            == 0)
        .await,
        "the upstream subscription ends with its last subscriber"
    );

    let error = a
        .subscribe(SubscribeRequestParams::new("nowhere+x://y"))
        .await
        .unwrap_err();
    assert!(error.to_string().contains("unknown resource"), "{error}");
}

#[tokio::test]
async fn set_level_reaches_the_sessions_upstream_sessions() {
    let (notes, gw) = remote_notes().await;
    let client = gw.client().await;
    client
        .set_level(SetLevelRequestParams::new(LoggingLevel::Debug))
        .await
        .unwrap();
    // The upstream session opens on first use, with the level already chosen.
    call(&client, "remote__echo", json!({"text": "x"}))
        .await
        .unwrap();
    assert_eq!(
        *notes.shared.log_level.lock().unwrap(),
        Some(LoggingLevel::Debug)
    );
    client
        .set_level(SetLevelRequestParams::new(LoggingLevel::Error))
        .await
        .unwrap();
    assert_eq!(
        *notes.shared.log_level.lock().unwrap(),
        Some(LoggingLevel::Error)
    );
}

#[tokio::test]
async fn listen_fans_in_list_changes_and_resource_updates() {
    let (_notes, gw) = remote_notes().await;
    let modern = gw.modern_client().await;
    let filter = SubscriptionFilter::builder()
        .tools_list_changed()
        .resource_subscriptions(vec!["remote+notes://note/3".to_owned()])
        .build();
    let mut subscription = modern.peer().listen(filter).await.unwrap();
    assert_eq!(
        subscription.acknowledged().resource_subscriptions,
        Some(vec!["remote+notes://note/3".into()])
    );

    let other = gw.client().await;
    call(&other, "remote__touch", json!({"name": "3"}))
        .await
        .unwrap();
    call(&other, "remote__add_tools", json!({"steps": 2}))
        .await
        .unwrap();
    let mut seen = Vec::new();
    while seen.len() < 2 {
        let next = tokio::time::timeout(Duration::from_secs(5), subscription.next())
            .await
            .expect("a notification arrives")
            .unwrap()
            .expect("the subscription is open");
        seen.push(match next {
            ServerNotification::ResourceUpdatedNotification(n) => n.params.uri,
            ServerNotification::ToolListChangedNotification(_) => "tools changed".into(),
            other => panic!("unexpected {other:?}"),
        });
    }
    seen.sort();
    assert_eq!(seen, ["remote+notes://note/3", "tools changed"]);
    subscription.cancel().await.unwrap();
}

/// A 2026-07-28 upstream announces changes only on a `subscriptions/listen` request, which
/// Switchyard keeps open: its list changes and resource updates reach clients like any other's.
#[tokio::test]
async fn an_upstream_speaking_only_2026_07_28_is_listened_to() {
    let modern = crate::fixtures::notes::NotesServer::start_modern_only().await;
    let gw = crate::harness::GatewayBuilder::new()
        .http("modern", &modern.url())
        .start()
        .await;
    let watcher = Recorder::plain("watcher");
    let client = watcher.clone().connect(&gw.url()).await;
    let uri = "modern+notes://note/4";
    client
        .subscribe(SubscribeRequestParams::new(uri))
        .await
        .unwrap();

    let result = call(&client, "modern__add_tools", json!({"steps": 1}))
        .await
        .unwrap();
    assert_eq!(text(&result), "1 dynamic tools");
    assert!(
        eventually(Duration::from_secs(5), || watcher.seen().tools_changed == 1).await,
        "tools/list_changed"
    );
    let tools = client.list_all_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "modern__dyn_1"));

    // The listen request named the subscribed resource (it is reopened when that set changes).
    let mut told = String::new();
    for _ in 0..100 {
        let touch = call(&client, "modern__touch", json!({"name": "4"})).await;
        told = text(&touch.unwrap()).to_owned();
        if told == "1 subscribers told" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(told, "1 subscribers told");
    assert!(eventually(Duration::from_secs(5), || watcher.seen().updated == [uri]).await);
}
