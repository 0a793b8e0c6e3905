//! Authorization links against phishing and theft: a link works only in the browser of the
//! user it was made for, a `state` learned elsewhere finishes nothing, neither shows in the
//! logs or on `/healthz`, and links and forgetting go only to their own user.

use std::time::Duration;

use serde_json::{Value, json};

use crate::{
    fixtures::oauth_upstream::{Browser, OAuthUpstream},
    harness::{
        GatewayBuilder, GatewayProcess, TestGateway, api_key, api_keys_section, call, text,
        wait_for_link,
    },
    users::{follow_as, link_of, pending_of},
};

const SOON: Duration = Duration::from_secs(20);
const KEY: &str = "c3dpdGNoeWFyZC10ZXN0cy1zdG9yZS1rZXktMzJieXQ=";

/// A gateway for API-key users alice, bob and mallory, with the OAuth upstream as `secure`
/// (each user authorizes it for themselves), once it wants authorization.
async fn team(upstream: &OAuthUpstream, state: &std::path::Path) -> TestGateway {
    let gw = GatewayBuilder::new()
        .section(&format!(
            "[oauth]\nstate_dir = {:?}\nkey = {KEY:?}\n{}",
            state.display().to_string(),
            api_keys_section(&["alice", "bob", "mallory"]),
        ))
        .http_with("secure", upstream.mcp_url(), &upstream.upstream_keys())
        .start_unsettled()
        .await;
    gw.wait_state("secure", "authenticating", SOON).await;
    gw
}

async fn whoami(gw: &TestGateway, user: &str) -> Result<Value, String> {
    let client = crate::auth::authorized_client(gw, &api_key(user)).await;
    let answer = call(&client, "secure__whoami", json!({})).await;
    client.cancel().await.unwrap();
    answer
        .map(|result| serde_json::from_str(text(&result)).unwrap())
        .map_err(|error| error.to_string())
}

/// Bob sends Alice his link; she follows it and proves to be Alice: refused, and nothing of
/// hers reaches Bob's calls. Bob's own browser then completes it.
#[tokio::test]
async fn bobs_link_followed_by_alice_is_refused() {
    let upstream = OAuthUpstream::start(&["--interactions=auto", "--account=alice"]).await;
    let state = tempfile::tempdir().unwrap();
    let gw = team(&upstream, state.path()).await;
    let bobs = link_of(&gw, "bob").await;

    let (status, page) = follow_as(&bobs, "alice").await;
    assert_eq!(status, 403, "{page}");
    assert!(page.contains("made for another user"), "{page}");
    assert_eq!(upstream.stats().await["as"]["authorizations"], 0);
    assert!(
        whoami(&gw, "bob").await.is_err(),
        "bob has no token (least of all alice's)"
    );

    // A wrong key is no better than another user's.
    let browser = Browser::new();
    let wrong = browser
        .client()
        .post(&bobs)
        .form(&[("credential", "not-a-key-of-anyone-here")])
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);

    upstream.configure(json!({"account": "bob"})).await;
    let (status, page) = follow_as(&bobs, "bob").await;
    assert_eq!(status, 200, "{page}");
    gw.wait_state("secure", "ready", SOON).await;
    assert_eq!(whoami(&gw, "bob").await.unwrap()["sub"], "bob");
    assert!(
        whoami(&gw, "alice").await.is_err(),
        "alice authorized nothing"
    );
}

/// Whoever learns the `state` of Bob's authorization (the authorization server's URL that
/// Bob's browser was sent to) and completes it with their own account gets a refusal: the
/// callback completes it only in Bob's browser, and Bob can still complete it.
#[tokio::test]
async fn a_stolen_state_finishes_nothing() {
    let upstream = OAuthUpstream::start(&["--interactions=auto", "--account=mallory"]).await;
    let state = tempfile::tempdir().unwrap();
    let gw = team(&upstream, state.path()).await;
    let bobs = link_of(&gw, "bob").await;

    // Bob's browser proves to be his and is sent to the authorization server.
    let proved = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .post(&bobs)
        .form(&[("credential", api_key("bob"))])
        .send()
        .await
        .unwrap();
    assert_eq!(proved.status(), 303);
    let server_url = proved.headers()["location"].to_str().unwrap().to_owned();
    assert!(server_url.contains("state="), "{server_url}");

    // Mallory has that URL: the server approves her, and her browser lands on the callback.
    let mallory = Browser::new();
    let callback = mallory.callback_url(&server_url).await;
    let (status, page) = mallory.open(&callback).await;
    assert_eq!(status, 403, "{page}");
    assert!(page.contains("not started in this browser"), "{page}");
    assert!(
        whoami(&gw, "bob").await.is_err(),
        "bob has no token (least of all mallory's)"
    );
    assert!(whoami(&gw, "mallory").await.is_err());
    assert_eq!(upstream.stats().await["as"]["access_tokens_issued"], 0);

    // Bob completes it in his own browser.
    upstream.configure(json!({"account": "bob"})).await;
    let (status, page) = follow_as(&bobs, "bob").await;
    assert_eq!(status, 200, "{page}");
    gw.wait_state("secure", "ready", SOON).await;
    assert_eq!(whoami(&gw, "bob").await.unwrap()["sub"], "bob");
}

/// Links go only to their own user; forgetting acts for the caller only.
#[tokio::test]
async fn links_and_forgetting_are_each_users_own() {
    let upstream = OAuthUpstream::start(&["--interactions=auto", "--account=alice"]).await;
    let state = tempfile::tempdir().unwrap();
    let gw = team(&upstream, state.path()).await;

    // A foreign Host (DNS rebinding) is refused before anything; no credentials, 401.
    let http = reqwest::Client::new();
    let rebound = http
        .get(format!("http://{}/oauth/pending", gw.addr))
        .header("host", "evil.example")
        .bearer_auth(api_key("alice"))
        .send()
        .await
        .unwrap();
    assert_eq!(rebound.status(), 403);
    let anonymous = http
        .get(format!("http://{}/oauth/pending", gw.addr))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);
    let alices = link_of(&gw, "alice").await;
    let bobs = link_of(&gw, "bob").await;
    assert_ne!(alices, bobs);
    assert_eq!(
        pending_of(&gw, "bob").await["pending"]
            .as_array()
            .unwrap()
            .len(),
        1
    );

    let (status, _) = follow_as(&alices, "alice").await;
    assert_eq!(status, 200);
    upstream.configure(json!({"account": "bob"})).await;
    let (status, _) = follow_as(&bobs, "bob").await;
    assert_eq!(status, 200);
    gw.wait_state("secure", "ready", SOON).await;
    assert_eq!(whoami(&gw, "alice").await.unwrap()["sub"], "alice");

    let forget = |user: &str| {
        http.post(format!("http://{}/oauth/forget/secure", gw.addr))
            .bearer_auth(api_key(user))
            .send()
    };
    let bob_forgets = forget("bob").await.unwrap();
    assert_eq!(bob_forgets.status(), 200);
    let answer: Value = bob_forgets.json().await.unwrap();
    assert_eq!(answer["principal"], "user:key:bob");
    assert_eq!(answer["forgotten"], true);
    assert_eq!(
        whoami(&gw, "alice").await.unwrap()["sub"],
        "alice",
        "alice's tokens stay"
    );
    assert!(whoami(&gw, "bob").await.is_err());
    let unauthenticated = http
        .post(format!("http://{}/oauth/forget/secure", gw.addr))
        .send()
        .await
        .unwrap();
    assert_eq!(unauthenticated.status(), 401);
}

/// The `state` of an authorization appears in no log line, on no `/healthz`, and no
/// authorization link is on `/healthz` at all.
#[tokio::test]
async fn the_state_is_in_no_log_and_no_link_is_on_healthz() {
    let upstream = OAuthUpstream::start(&["--interactions=auto"]).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("switchyard.toml");
    std::fs::write(
        &path,
        format!(
            "[oauth]\nstate_dir = {:?}\nkey = {KEY:?}\n[upstreams.secure]\nurl = {:?}\n\
             oauth = {{ client_id = {:?}, client_secret = {:?} }}\n",
            dir.path().join("state").display().to_string(),
            upstream.mcp_url(),
            upstream.client("client_id"),
            upstream.client("client_secret"),
        ),
    )
    .unwrap();
    let gw = GatewayProcess::start(&path);
    let token = std::fs::read_to_string(dir.path().join("state/admin.token")).unwrap();
    let link = wait_for_link(gw.addr, token.trim()).await;
    let sent = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .get(&link)
        .send()
        .await
        .unwrap();
    let server_url = reqwest::Url::parse(sent.headers()["location"].to_str().unwrap()).unwrap();
    let state = server_url
        .query_pairs()
        .find(|(k, _)| k == "state")
        .map(|(_, v)| v.into_owned())
        .unwrap();
    assert!(!link.contains(&state));
    let health = reqwest::get(format!("http://{}/healthz", gw.addr))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        !health.contains(&state) && !health.contains("/oauth/connect/"),
        "{health}"
    );
    assert!(health.contains("authenticating"), "{health}");
    let logs = gw.logs();
    assert!(
        logs.iter().any(|line| line.contains("authorization")),
        "{logs:?}"
    );
    for line in &logs {
        assert!(!line.contains(&state), "the state is logged: {line}");
    }
}

/// With JWT users, the connect link signs the browser in at the gateway's own authorization
/// server (here the same real provider) and compares who signed in with the link's user:
/// Alice signed in on Bob's link is refused; Bob signed in goes on and authorizes.
#[tokio::test]
async fn a_jwt_users_link_signs_the_browser_in_first() {
    let provider = OAuthUpstream::start(&["--interactions=auto", "--account=alice"]).await;
    let issuer = provider.info["issuer"]
        .as_str()
        .unwrap()
        .trim_end_matches('/')
        .to_owned();
    let state = tempfile::tempdir().unwrap();
    let gw = GatewayBuilder::new()
        .section(&format!(
            "[oauth]\nstate_dir = {:?}\nkey = {KEY:?}\n\
             [auth]\nscopes = [\"mcp:tools\"]\n[auth.jwt]\nissuer = {issuer:?}\njwks_url = \"{issuer}/jwks\"\n",
            state.path().display().to_string(),
        ))
        .http_with("secure", provider.mcp_url(), &provider.upstream_keys())
        .start_unsettled()
        .await;
    provider
        .configure(json!({"extra_resource": gw.url()}))
        .await;
    gw.wait_state("secure", "authenticating", SOON).await;
    let bob = provider.token_for("bob", &gw.url(), "mcp:tools").await;
    let pending: Value = reqwest::Client::new()
        .get(format!("http://{}/oauth/pending", gw.addr))
        .bearer_auth(&bob)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(pending["principal"], "user:jwt:bob", "{pending}");
    let link = pending["pending"][0]["authorization_url"]
        .as_str()
        .unwrap()
        .to_owned();

    // Alice's browser: signed in as alice, refused; nothing authorized.
    let alice = Browser::new();
    let answer = alice.client().get(&link).send().await.unwrap();
    assert_eq!(answer.status(), 403);
    assert!(
        answer
            .text()
            .await
            .unwrap()
            .contains("made for another user")
    );
    assert_eq!(
        provider.stats().await["as"]["tokens"]["authorization_code"],
        2,
        "bob's token and alice's sign-in only"
    );

    // Bob's browser: signed in as bob, sent on, authorized.
    provider.configure(json!({"account": "bob"})).await;
    let bobs = Browser::new();
    let answer = bobs.client().get(&link).send().await.unwrap();
    assert_eq!(answer.status(), 200);
    assert!(answer.text().await.unwrap().contains("now authorized"));
    gw.wait_state("secure", "ready", SOON).await;
    let client = crate::auth::authorized_client(&gw, &bob).await;
    let result = call(&client, "secure__whoami", json!({})).await.unwrap();
    let whoami: Value = serde_json::from_str(text(&result)).unwrap();
    assert_eq!(whoami["sub"], "bob");
    client.cancel().await.unwrap();
}
