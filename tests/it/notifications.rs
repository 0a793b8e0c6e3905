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

use crate::{
    fixtures::notes::NotesServer,
    harness::{GatewayBuilder, Recorder, TestGateway, call, eventually, remote_notes, text},
};

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

/// In either session mode: on a `shared` upstream the subscribers of a resource share one
/// upstream subscription; on a `per_client` one each subscribes on its own session.
#[tokio::test]
async fn resource_updates_reach_exactly_the_subscribers() {
    for session in ["shared", "per_client"] {
        let notes = NotesServer::start().await;
        let gw = GatewayBuilder::new()
            .http_with("remote", &notes.url(), &format!("session = {session:?}"))
            .start()
            .await;
        updates_reach_exactly_the_subscribers(&notes, &gw, session).await;
    }
}

async fn updates_reach_exactly_the_subscribers(
    notes: &NotesServer,
    gw: &TestGateway,
    session: &str,
) {
    let (ada, bob) = (Recorder::plain("ada"), Recorder::plain("bob"));
    let a = ada.clone().connect(&gw.url()).await;
    let b = bob.clone().connect(&gw.url()).await;
    let uri = "remote+notes://note/7";
    a.subscribe(SubscribeRequestParams::new(uri)).await.unwrap();
    assert_eq!(
        notes.shared.subscription_count(),
        1,
        "{session}: the upstream was subscribed"
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

    b.subscribe(SubscribeRequestParams::new(uri)).await.unwrap();
    let upstream_subscriptions = if session == "shared" { 1 } else { 2 };
    assert_eq!(
        notes.shared.subscription_count(),
        upstream_subscriptions,
        "{session}"
    );
    a.unsubscribe(UnsubscribeRequestParams::new(uri))
        .await
        .unwrap();
    call(&a, "remote__touch", json!({"name": "7"}))
        .await
        .unwrap();
    assert!(eventually(Duration::from_secs(5), || bob.seen().updated == [uri]).await);
    assert_eq!(ada.seen().updated, [uri], "{session}: ada unsubscribed");
    b.cancel().await.unwrap();
    assert!(
        eventually(Duration::from_secs(5), || notes.shared.subscription_count()
            == 0)
        .await,
        "{session}: the upstream subscription ends with its last subscriber"
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

/// An upstream that keeps subscriptions per session (the official server-everything, which
/// sends updates of what a session subscribed to when that session turns its updates on) in
/// `per_client` mode, over each transport: the client's subscription goes on the session its
/// calls go on, so the updates its calls cause reach it (before, the subscription went on the
/// gateway's shared session, and none came).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_per_client_upstream_keeps_the_subscription_on_the_clients_own_session() {
    use crate::fixtures::everything::{self, Everything, Mode};
    let http = Everything::start(Mode::StreamableHttp).await;
    let sse = Everything::start(Mode::Sse).await;
    let per_client = "session = \"per_client\"";
    let gw = GatewayBuilder::new()
        .upstream(
            "stdio",
            &format!("{}\n{per_client}", everything::stdio_upstream()),
        )
        .upstream("http", &format!("url = {:?}\n{per_client}", http.url()))
        .upstream(
            "sse",
            &format!("transport = \"sse\"\nurl = {:?}\n{per_client}", sse.url()),
        )
        .start()
        .await;
    for upstream in ["stdio", "http", "sse"] {
        let recorder = Recorder::plain(upstream);
        let client = recorder.clone().connect(&gw.url()).await;
        let resources = client.list_all_resources().await.unwrap();
        let uri = resources
            .iter()
            .map(|resource| resource.uri.clone())
            .find(|uri| uri.starts_with(&format!("{upstream}+")))
            .unwrap_or_else(|| panic!("{upstream} lists resources"));
        client
            .subscribe(SubscribeRequestParams::new(uri.clone()))
            .await
            .unwrap();
        let toggled = call(
            &client,
            &format!("{upstream}__toggle-subscriber-updates"),
            json!({}),
        )
        .await
        .unwrap();
        assert!(text(&toggled).starts_with("Started"), "{toggled:?}");
        assert!(
            eventually(Duration::from_secs(10), || recorder
                .seen()
                .updated
                .contains(&uri))
            .await,
            "{upstream}: no update of {uri} reached the subscribed client"
        );
        call(
            &client,
            &format!("{upstream}__toggle-subscriber-updates"),
            json!({}),
        )
        .await
        .unwrap();
        client.cancel().await.unwrap();
    }
}
