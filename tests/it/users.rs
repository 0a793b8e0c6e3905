//! A team behind one gateway: users authenticate to Switchyard, and each reaches an OAuth
//! upstream with their own token, whether the upstream is shared or per client. Real parts
//! throughout: the certified `oidc-provider`, an MCP server on the official TypeScript SDK that
//! answers `whoami` from the token it was sent, and the gateway's own callback.

use std::time::Duration;

use serde_json::{Value, json};

use crate::{
    auth::authorized_client,
    fixtures::oauth_upstream::{Browser, OAuthUpstream},
    harness::{GatewayBuilder, TestGateway, api_key, api_keys_section, call, text},
};

const SOON: Duration = Duration::from_secs(20);
const KEY: &str = "c3dpdGNoeWFyZC10ZXN0cy1zdG9yZS1rZXktMzJieXQ=";
const TOOLS: [&str; 2] = ["shared__whoami", "own__whoami"];

/// Logs in at the provider as `user` (its auto mode) and follows each link of `user`'s
/// pending list to the gateway's callback; how many there were.
async fn authorize_everything(gw: &TestGateway, upstream: &OAuthUpstream, user: &str) -> usize {
    upstream.configure(json!({"account": user})).await;
    let pending = pending_of(gw, user).await;
    assert_eq!(
        pending["principal"],
        format!("user:key:{user}"),
        "{pending}"
    );
    let links = pending["pending"].as_array().unwrap();
    for entry in links {
        let link = entry["authorization_url"].as_str().unwrap();
        let (status, page) = follow_as(link, user).await;
        assert_eq!(status, 200, "{page}");
        assert!(page.contains("now authorized"), "{page}");
    }
    links.len()
}

/// API-key user `user`'s own pending list (their key as credential).
pub async fn pending_of(gw: &TestGateway, user: &str) -> Value {
    pending_with(gw, &api_key(user)).await
}

/// The pending list of the user `credential` (an API key or a JWT) stands for.
pub async fn pending_with(gw: &TestGateway, credential: &str) -> Value {
    reqwest::Client::new()
        .get(format!("http://{}/oauth/pending", gw.addr))
        .bearer_auth(credential)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// `user`'s first link on their pending list.
pub async fn link_of(gw: &TestGateway, user: &str) -> String {
    let pending = pending_of(gw, user).await;
    pending["pending"][0]["authorization_url"]
        .as_str()
        .unwrap_or_else(|| panic!("no link for {user}: {pending}"))
        .to_owned()
}

/// Follows authorization link `link` in a new browser as API-key user `user`: the gateway
/// asks who they are (its form), they give their key, and the browser goes on through the
/// provider and back; the last page.
pub async fn follow_as(link: &str, user: &str) -> (reqwest::StatusCode, String) {
    follow_with(link, &api_key(user)).await
}

/// `follow_as`, for the user `credential` (an API key or a JWT) stands for.
pub async fn follow_with(link: &str, credential: &str) -> (reqwest::StatusCode, String) {
    let browser = Browser::new();
    let form = browser.client().get(link).send().await.unwrap();
    assert_eq!(form.status(), 200);
    assert!(form.text().await.unwrap().contains("name=\"credential\""));
    let done = browser
        .client()
        .post(link)
        .form(&[("credential", credential)])
        .send()
        .await
        .unwrap();
    (done.status(), done.text().await.unwrap())
}

/// What `whoami` of `tool` says: the subject of the token the upstream got, and more.
pub async fn whoami<S: rmcp::Service<rmcp::RoleClient>>(
    client: &rmcp::service::RunningService<rmcp::RoleClient, S>,
    tool: &str,
) -> Value {
    let result = call(client, tool, json!({})).await.unwrap();
    serde_json::from_str(text(&result)).unwrap()
}

#[tokio::test]
async fn each_user_reaches_an_oauth_upstream_with_their_own_token() {
    let upstream = OAuthUpstream::start(&["--interactions=auto"]).await;
    let state = tempfile::tempdir().unwrap();
    let oauth = upstream.upstream_keys();
    let gw = GatewayBuilder::new()
        .section(&format!(
            "[oauth]\nstate_dir = {:?}\nkey = {KEY:?}\n{}",
            state.path().display().to_string(),
            api_keys_section(&["alice", "bob"]),
        ))
        .http_with(
            "shared",
            upstream.mcp_url(),
            &format!("session = \"shared\"\n{oauth}"),
        )
        .http_with(
            "own",
            upstream.mcp_url(),
            &format!("session = \"per_client\"\n{oauth}"),
        )
        .start_unsettled()
        .await;
    gw.wait_state("shared", "authenticating", SOON).await;
    // Nobody's link is on the status for clients: each user asks for their own.
    let anonymous = reqwest::get(format!("http://{}/oauth/pending", gw.addr))
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);

    // The first user to authorize makes the upstream ready for everyone's lists.
    assert_eq!(authorize_everything(&gw, &upstream, "alice").await, 2);
    gw.wait_state("shared", "ready", SOON).await;
    gw.wait_state("own", "ready", SOON).await;
    let alice = authorized_client(&gw, &api_key("alice")).await;
    for tool in TOOLS {
        assert_eq!(whoami(&alice, tool).await["sub"], "alice", "{tool}");
    }

    // Bob sees the tools, but his calls need his own authorization, with his own link.
    let bob = authorized_client(&gw, &api_key("bob")).await;
    for tool in TOOLS {
        let error = call(&bob, tool, json!({})).await.unwrap_err();
        let rmcp::ServiceError::McpError(error) = error else {
            panic!("{error}")
        };
        assert!(
            error.message.contains("needs authorization"),
            "{tool}: {error:?}"
        );
        assert!(error.data.as_ref().unwrap()["authorizationUrl"].is_string());
    }
    assert_eq!(authorize_everything(&gw, &upstream, "bob").await, 2);
    for tool in TOOLS {
        assert_eq!(whoami(&bob, tool).await["sub"], "bob", "{tool}");
        assert_eq!(whoami(&alice, tool).await["sub"], "alice", "{tool}");
    }
    // A new session of each finds their own tokens again.
    let bob_again = authorized_client(&gw, &api_key("bob")).await;
    for tool in TOOLS {
        assert_eq!(whoami(&bob_again, tool).await["sub"], "bob", "{tool}");
    }
    let stats = upstream.stats().await;
    assert_eq!(stats["mcp"]["subject_mismatch"], 0, "{stats}");
    for client in [alice, bob, bob_again] {
        client.cancel().await.unwrap();
    }
}
