//! Token exchange (RFC 8693): each user's own JWT, the one they authenticate to the gateway
//! with, exchanged at the organisation's authorization server for a token of the upstream's
//! audience, with no browser involved. Real parts: the certified `oidc-provider` with the
//! token exchange grant, an MCP server on the official TypeScript SDK that accepts only
//! exchanged tokens and answers `whoami` from the token it was sent, and the rmcp client.

use std::time::Duration;

use serde_json::{Value, json};

use crate::{
    auth::authorized_client,
    fixtures::{
        issuer::{ISSUER, Issuer, claims, sign},
        oauth_upstream::OAuthUpstream,
    },
    harness::{GatewayBuilder, TestGateway, api_key, api_keys_section, call},
    users::{follow_with, pending_with, whoami},
};

const SOON: Duration = Duration::from_secs(20);
const KEY: &str = "c3dpdGNoeWFyZC10ZXN0cy1zdG9yZS1rZXktMzJieXQ=";
const EXCHANGER: &str = "switchyard-exchange";
const EXCHANGER_SECRET: &str = "switchyard-exchange-secret";

/// The provider and MCP server exchanging tokens of the test issuer, where no browser flow
/// could succeed (every interaction refused) and only exchanged tokens are accepted.
async fn exchanging_only(issuer: &Issuer) -> OAuthUpstream {
    exchanging_upstream(
        issuer,
        &["--interactions=deny", "--accept-only-exchanged=on"],
    )
    .await
}

/// The provider and MCP server, exchanging tokens of the test issuer, with `args`.
async fn exchanging_upstream(issuer: &Issuer, args: &[&str]) -> OAuthUpstream {
    let subject_jwks = format!("--subject-jwks={}", issuer.jwks_url);
    let subject_issuer = format!("--subject-issuer={ISSUER}");
    let mut all = vec![subject_jwks.as_str(), subject_issuer.as_str()];
    all.extend_from_slice(args);
    OAuthUpstream::start(&all).await
}

/// A gateway whose users authenticate with the test issuer's JWTs (and `keys`' API keys),
/// with the upstream as `shared` (one connection) and `own` (one per client session), both
/// reached with `grant`; its audit log goes to `audit`.
async fn gateway(
    issuer: &Issuer,
    upstream: &OAuthUpstream,
    grant: &str,
    keys: &[&str],
    state: &std::path::Path,
) -> TestGateway {
    let exchange = format!(
        "grant = {grant}\n\
         [upstreams.NAME.oauth.token_exchange]\n\
         issuer = {:?}\nclient_id = {EXCHANGER:?}\nclient_secret = {EXCHANGER_SECRET:?}\n",
        upstream.info["issuer"].as_str().unwrap(),
    );
    let upstream_table = |name: &str, session: &str| {
        format!(
            "session = {session:?}\nrestart = {{ delay_ms = 100, max_delay_ms = 400 }}\n\
             [upstreams.{name}.oauth]\nclient_id = {:?}\nclient_secret = {:?}\n{}",
            upstream.client("client_id"),
            upstream.client("client_secret"),
            exchange.replace("NAME", name),
        )
    };
    GatewayBuilder::new()
        .section(&format!(
            "[oauth]\nstate_dir = {:?}\nkey = {KEY:?}\n\
             [audit]\nfile = {:?}\n\
             [auth]\nscopes = []\n{}\
             [auth.jwt]\nissuer = {ISSUER:?}\njwks_url = {:?}\n",
            state.display().to_string(),
            state.join("audit.log").display().to_string(),
            api_keys_section(keys),
            issuer.jwks_url,
        ))
        .http_with(
            "shared",
            upstream.mcp_url(),
            &upstream_table("shared", "shared"),
        )
        .http_with(
            "own",
            upstream.mcp_url(),
            &upstream_table("own", "per_client"),
        )
        .start_unsettled()
        .await
}

/// `user`'s JWT for the gateway, from the test issuer.
fn jwt_of(gw: &TestGateway, user: &str) -> String {
    sign(&claims(user, &gw.url()), "issuer.key", "k1")
}

fn audit_records(state: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(state.join("audit.log"))
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_users_own_token_is_exchanged_for_theirs_at_the_upstream() {
    let issuer = Issuer::start().await;
    let upstream = exchanging_only(&issuer).await;
    let state = tempfile::tempdir().unwrap();
    let gw = gateway(
        &issuer,
        &upstream,
        "\"token_exchange\"",
        &["carol"],
        state.path(),
    )
    .await;
    // Before any user came, there is no token to exchange, and no link to follow either.
    gw.wait_state("shared", "failed", SOON).await;
    let health = gw.upstream_health("shared").await;
    assert!(
        health.to_string().contains("no user has presented a token"),
        "{health}"
    );
    assert_eq!(gw.pending().await["pending"], json!([]), "no browser flow");

    // Alice's first request brings her token: it is exchanged, and the upstream is served.
    let alice_jwt = jwt_of(&gw, "alice");
    let alice = authorized_client(&gw, &alice_jwt).await;
    gw.wait_state("shared", "ready", SOON).await;
    gw.wait_state("own", "ready", SOON).await;
    for tool in ["shared__whoami", "own__whoami"] {
        let me = whoami(&alice, tool).await;
        assert_eq!(me["sub"], "alice", "{tool}: {me}");
        assert_eq!(
            me["act"]["sub"], EXCHANGER,
            "{tool}: an exchanged token: {me}"
        );
    }

    // Bob's token is exchanged for his own: neither ever gets the other's.
    let bob_jwt = jwt_of(&gw, "bob");
    let bob = authorized_client(&gw, &bob_jwt).await;
    for tool in ["shared__whoami", "own__whoami"] {
        assert_eq!(whoami(&bob, tool).await["sub"], "bob", "{tool}");
        assert_eq!(whoami(&alice, tool).await["sub"], "alice", "{tool}");
    }

    // An API key is never handed on: Carol is told how to get through, and is served as
    // nobody else.
    let carol = authorized_client(&gw, &api_key("carol")).await;
    let error = call(&carol, "own__whoami", json!({})).await.unwrap_err();
    let rmcp::ServiceError::McpError(error) = error else {
        panic!("{error}")
    };
    assert!(
        error
            .message
            .contains("authenticate to the gateway with a JWT"),
        "{error:?}"
    );

    let stats = upstream.stats().await;
    let exchanged: Vec<&str> = (stats["as"]["exchanges"].as_array().unwrap())
        .iter()
        .map(|e| e["sub"].as_str().unwrap())
        .collect();
    assert!(
        exchanged.contains(&"alice") && exchanged.contains(&"bob"),
        "{stats}"
    );
    assert!(!exchanged.contains(&"carol"), "{stats}");
    assert!(
        (stats["as"]["exchanges"].as_array().unwrap())
            .iter()
            .all(|e| e["resource"] == upstream.mcp_url()),
        "each exchange names the upstream as resource: {stats}"
    );
    assert_eq!(stats["as"]["authorizations"], 0, "no browser: {stats}");
    assert_eq!(stats["mcp"]["subject_mismatch"], 0, "{stats}");

    // The audit log names the grant of each exchange, and holds no token.
    let records = audit_records(state.path());
    let grants: Vec<&Value> = records
        .iter()
        .filter(|r| r["kind"] == "oauth_grant")
        .collect();
    assert!(
        grants.iter().any(|r| r["principal"] == "user:jwt:alice"
            && r["grant"] == "token_exchange"
            && r["outcome"] == "ok"),
        "{grants:?}"
    );
    let log = std::fs::read_to_string(state.path().join("audit.log")).unwrap();
    for secret in [&alice_jwt, &bob_jwt, &api_key("carol")] {
        assert!(!log.contains(secret.as_str()), "a token in the audit log");
    }
    for client in [alice, bob, carol] {
        client.cancel().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_exchange_falls_back_to_the_users_browser() {
    let issuer = Issuer::start().await;
    let upstream = exchanging_upstream(&issuer, &["--interactions=auto", "--account=dave"]).await;
    // The organisation's server refuses every user's token.
    upstream.configure(json!({"exchange": "off"})).await;
    let state = tempfile::tempdir().unwrap();
    let gw = gateway(
        &issuer,
        &upstream,
        "[\"token_exchange\", \"authorization_code\"]",
        &[],
        state.path(),
    )
    .await;
    let dave_jwt = jwt_of(&gw, "dave");
    let dave = authorized_client(&gw, &dave_jwt).await;
    // His token was refused: his own links are on his pending list, as if nothing could be
    // exchanged at all.
    let pending = pending_with(&gw, &dave_jwt).await;
    assert_eq!(pending["principal"], "user:jwt:dave", "{pending}");
    let links = pending["pending"].as_array().unwrap();
    assert_eq!(links.len(), 2, "{pending}");
    // Dave follows each in his browser, proving who he is with his own token.
    for entry in links {
        let (status, page) =
            follow_with(entry["authorization_url"].as_str().unwrap(), &dave_jwt).await;
        assert_eq!(status, 200, "{page}");
        assert!(page.contains("now authorized"), "{page}");
    }
    gw.wait_state("own", "ready", SOON).await;
    let me = whoami(&dave, "own__whoami").await;
    assert_eq!(me["sub"], "dave", "{me}");
    assert_eq!(me["act"], Value::Null, "a browser token: {me}");

    let records = audit_records(state.path());
    let grants: Vec<&Value> = records
        .iter()
        .filter(|r| r["kind"] == "oauth_grant" && r["principal"] == "user:jwt:dave")
        .collect();
    assert!(
        grants
            .iter()
            .any(|r| r["grant"] == "token_exchange" && r["outcome"] == "error"),
        "{grants:?}"
    );
    assert!(
        grants
            .iter()
            .any(|r| r["grant"] == "authorization_code" && r["outcome"] == "ok"),
        "{grants:?}"
    );
    dave.cancel().await.unwrap();
}

/// Enterprise-managed authorization: each user's token is exchanged at the organisation's
/// server for an identity assertion (ID-JAG) for the upstream's authorization server, which
/// takes it from Switchyard's client there for the user's token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_identity_assertion_of_each_user_is_taken_for_their_token() {
    let issuer = Issuer::start().await;
    let upstream = exchanging_only(&issuer).await;
    let state = tempfile::tempdir().unwrap();
    let gw = gateway(&issuer, &upstream, "\"id_jag\"", &[], state.path()).await;
    let alice = authorized_client(&gw, &jwt_of(&gw, "alice")).await;
    gw.wait_state("own", "ready", SOON).await;
    let bob = authorized_client(&gw, &jwt_of(&gw, "bob")).await;
    for (client, user) in [(&alice, "alice"), (&bob, "bob")] {
        let me = whoami(client, "own__whoami").await;
        assert_eq!(me["sub"], user, "{me}");
        assert_eq!(me["via"], "id-jag", "{me}");
        assert_eq!(me["client_id"], upstream.client("client_id"), "{me}");
    }
    let stats = upstream.stats().await;
    let issuer_url = upstream.info["issuer"].as_str().unwrap();
    for exchange in stats["as"]["exchanges"].as_array().unwrap() {
        assert_eq!(
            exchange["requested"], "urn:ietf:params:oauth:token-type:id-jag",
            "{stats}"
        );
        assert_eq!(
            exchange["audience"], issuer_url,
            "its server, by issuer: {stats}"
        );
        assert_eq!(exchange["client_id"], EXCHANGER, "{stats}");
    }
    let taken: Vec<&str> = (stats["as"]["assertions"].as_array().unwrap())
        .iter()
        .map(|a| a["sub"].as_str().unwrap())
        .collect();
    assert!(
        taken.contains(&"alice") && taken.contains(&"bob"),
        "{stats}"
    );
    assert_eq!(stats["as"]["authorizations"], 0, "no browser: {stats}");
    assert!(
        audit_records(state.path())
            .iter()
            .any(|r| r["kind"] == "oauth_grant"
                && r["grant"] == "id_jag"
                && r["principal"] == "user:jwt:bob"
                && r["outcome"] == "ok"),
        "the audit log names the grant"
    );
    for client in [alice, bob] {
        client.cancel().await.unwrap();
    }
}
