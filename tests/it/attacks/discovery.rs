//! An upstream whose lists depend on the user, behind one gateway: with `discovery =
//! "per_user"` each user sees only what the upstream lists for them, and a resource
//! subscription goes upstream on the subscriber's own connection (their token), its updates
//! to them alone.

// resources/subscribe is legacy-only (2026-07-28 uses subscriptions/listen), but relayed.
#![allow(deprecated)]

use std::time::Duration;

use rmcp::model::{ReadResourceRequestParams, SubscribeRequestParams};
use serde_json::{Value, json};

use crate::{
    fixtures::{notes::NotesServer, oauth_upstream::OAuthUpstream},
    harness::{GatewayBuilder, Recorder, TestGateway, api_key, api_keys_section, call, eventually},
    users::{follow_as, link_of},
};

const SOON: Duration = Duration::from_secs(20);
const KEY: &str = "c3dpdGNoeWFyZC10ZXN0cy1zdG9yZS1rZXktMzJieXQ=";

/// `user`'s link for `notes`, followed and completed by them.
async fn authorize(gw: &TestGateway, upstream: &OAuthUpstream, user: &str) {
    upstream.configure(json!({"account": user})).await;
    let link = link_of(gw, user).await;
    let (status, page) = follow_as(&link, user).await;
    assert_eq!(status, 200, "{page}");
}

#[tokio::test]
async fn each_user_sees_and_subscribes_only_their_own() {
    let upstream = OAuthUpstream::start(&["--interactions=auto"]).await;
    let state = tempfile::tempdir().unwrap();
    let gw = GatewayBuilder::new()
        .section(&format!(
            "[oauth]\nstate_dir = {:?}\nkey = {KEY:?}\n{}",
            state.path().display().to_string(),
            api_keys_section(&["alice", "bob"]),
        ))
        .http_with(
            "notes",
            upstream.mcp_url(),
            &format!(
                "session = \"shared\"\ndiscovery = \"per_user\"\n{}",
                upstream.upstream_keys()
            ),
        )
        .start_unsettled()
        .await;
    gw.wait_state("notes", "authenticating", SOON).await;
    authorize(&gw, &upstream, "alice").await;
    gw.wait_state("notes", "ready", SOON).await;
    authorize(&gw, &upstream, "bob").await;

    let alice = Recorder::plain("alice")
        .connect_as(&gw.url(), &api_key("alice"))
        .await;
    let bob = Recorder::plain("bob")
        .connect_as(&gw.url(), &api_key("bob"))
        .await;
    let uris = |resources: Vec<rmcp::model::Resource>| -> Vec<String> {
        resources.into_iter().map(|r| r.uri.clone()).collect()
    };
    assert_eq!(
        uris(alice.list_all_resources().await.unwrap()),
        ["notes+notes://alice/private"]
    );
    assert_eq!(
        uris(bob.list_all_resources().await.unwrap()),
        ["notes+notes://bob/private"]
    );
    // What another user's lists hold is unknown to one's own.
    let read = bob
        .read_resource(ReadResourceRequestParams::new(
            "notes+notes://alice/private",
        ))
        .await;
    assert!(read.is_err(), "{read:?}");

    // Bob's subscription is made with Bob's token, not with the token of the upstream's
    // shared connection (Alice's: she authorized first).
    bob.subscribe(SubscribeRequestParams::new("notes+notes://bob/private"))
        .await
        .unwrap();
    let stats = upstream.stats().await;
    assert_eq!(
        stats["mcp"]["subscriptions"],
        json!([{"uri": "notes://bob/private", "sub": "bob"}]),
        "{stats}"
    );
    let control = upstream.info["control"].as_str().unwrap();
    let touched: Value = reqwest::Client::new()
        .post(format!("{control}/touch?uri=notes://bob/private"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(touched["told"], 1);
    let heard = eventually(SOON, || !bob.service().seen().updated.is_empty()).await;
    assert!(heard, "bob hears of his resource's update");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(bob.service().seen().updated, ["notes+notes://bob/private"]);
    assert!(alice.service().seen().updated.is_empty());
    alice.cancel().await.unwrap();
    bob.cancel().await.unwrap();
}

/// A user's own lists follow the upstream: when it announces a change on that user's
/// connection, their lists are found again and their client is told.
#[tokio::test]
async fn a_users_own_lists_follow_the_upstreams_changes() {
    let notes = NotesServer::start().await;
    let gw = GatewayBuilder::new()
        .section(&api_keys_section(&["alice"]))
        .http_with(
            "notes",
            &notes.url(),
            "session = \"shared\"\ndiscovery = \"per_user\"\n\
             headers = { X-User = \"${claim:sub}\" }",
        )
        .start()
        .await;
    let alice = Recorder::plain("alice")
        .connect_as(&gw.url(), &api_key("alice"))
        .await;
    let names = |tools: Vec<rmcp::model::Tool>| -> Vec<String> {
        tools.into_iter().map(|t| t.name.into_owned()).collect()
    };
    let before = names(alice.list_all_tools().await.unwrap());
    assert!(
        before.contains(&"notes__add_tools".to_owned()),
        "{before:?}"
    );
    assert!(!before.contains(&"notes__dyn_1".to_owned()));

    call(&alice, "notes__add_tools", json!({"steps": 1}))
        .await
        .unwrap();
    let told = eventually(SOON, || alice.service().seen().tools_changed > 0).await;
    assert!(told, "alice is told her lists changed");
    let deadline = tokio::time::Instant::now() + SOON;
    loop {
        let now = names(alice.list_all_tools().await.unwrap());
        if now.contains(&"notes__dyn_1".to_owned()) {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{now:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    alice.cancel().await.unwrap();
}
