//! The authorizer's decisions about tokens: kept per principal, renewed when due, and kept or
//! dropped after a refusal according to who refused what.

use std::time::Duration;

use super::*;
use crate::oauth::{fake_endpoint::FakeEndpoint, token::now};
use crate::{
    config::{AuthMethod, OAuthKey, OAuthSettings},
    oauth::token::ClientIdentity,
};

pub(in crate::oauth) fn authorizer(state: &std::path::Path) -> Authorizer {
    let settings = OAuthSettings {
        public_url: None,
        state_dir: state.to_owned(),
        key: OAuthKey::Inline([3; 32]),
        client_name: "Switchyard".into(),
        client_metadata_url: None,
        success_redirect: None,
        error_redirect: None,
        authorization_lifetime: Duration::from_secs(600),
    };
    let memory = crate::config::StoreSettings {
        kind: crate::config::StoreKind::Memory,
        ..Default::default()
    };
    let store = crate::store::Store::new(&memory, state, &crate::metrics::standalone());
    let oauth = OAuth::new(
        settings,
        Url::parse("http://127.0.0.1:8080").unwrap(),
        &store,
        Arc::new(crate::audit::Audit::off(crate::metrics::standalone())),
    );
    Authorizer::new(
        oauth,
        UpstreamName::new("files").unwrap(),
        Url::parse("https://files.example.com/mcp").unwrap(),
        UpstreamOAuth::default(),
    )
}

fn token(access: &str) -> TokenSet {
    crate::oauth::token::samples::token(access, None)
}

#[tokio::test]
async fn tokens_are_kept_per_principal_and_survive_a_restart() {
    let state = tempfile::tempdir().unwrap();
    let alice = Principal::user("alice");
    let first = authorizer(state.path());
    first
        .keep(&*first.grant(&alice).await, token("alice-token"))
        .await;
    first
        .keep(
            &*first.grant(&Principal::anonymous()).await,
            token("shared-token"),
        )
        .await;
    assert_eq!(
        first.token(&*first.grant(&alice).await).await.as_deref(),
        Some("alice-token")
    );
    assert_eq!(
        first
            .token(&*first.grant(&Principal::user("bob")).await)
            .await,
        None
    );

    let restarted = authorizer(state.path());
    let grant = restarted.grant(&alice).await;
    assert_eq!(
        restarted.token(&grant).await.as_deref(),
        Some("alice-token")
    );
    let shared = restarted.grant(&Principal::anonymous()).await;
    assert_eq!(
        restarted.token(&shared).await.as_deref(),
        Some("shared-token")
    );

    assert_eq!(restarted.forget_all().await, 2);
    assert_eq!(restarted.token(&grant).await, None);
    let fresh = authorizer(state.path());
    let again = fresh.grant(&alice).await;
    assert_eq!(fresh.token(&again).await, None, "forgotten on disk");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tokens_kept_at_once_for_many_principals_are_all_indexed() {
    let state = tempfile::tempdir().unwrap();
    let first = Arc::new(authorizer(state.path()));
    let keeping: Vec<_> = (0..8)
        .map(|i| {
            let first = first.clone();
            tokio::spawn(async move {
                let grant = first.grant(&Principal::user(&format!("user{i}"))).await;
                first.keep(&grant, token(&format!("token{i}"))).await;
            })
        })
        .collect();
    for keeper in keeping {
        keeper.await.unwrap();
    }
    // A restarted gateway knows them only from the index.
    assert_eq!(authorizer(state.path()).forget_all().await, 8);
}

/// Where nothing listens: every request to it fails at once, as when a server is down.
const DOWN: &str = "http://127.0.0.1:1/token";

/// A token `access` with a refresh token, at `token_url`, `expires_in` seconds from now (negative:
/// past) out of an hour's lifetime.
fn refreshable(access: &str, token_url: &str, expires_in: i64) -> TokenSet {
    let mut token = crate::oauth::token::samples::token(access, Some(3600));
    token.refresh_token = Some(format!("{access}-refresh"));
    token.endpoint.url = token_url.to_owned();
    token.expires_at = Some(now().saturating_add_signed(expires_in));
    token
}

fn refusal(sent_token: Option<&str>) -> Rejection<'_> {
    Rejection {
        status: 401,
        www_authenticate: Some(r#"Bearer error="invalid_token""#),
        sent_token,
    }
}

async fn stored(state: &std::path::Path, principal: &Principal) -> Option<String> {
    let auth = authorizer(state);
    auth.oauth
        .vault
        .load::<TokenSet>(RecordKind::Tokens, &auth.store_key(principal))
        .await
        .unwrap()
        .map(|token| token.access_token)
}

fn needs_authorization(grant: &Grant) -> bool {
    matches!(grant.need(), crate::oauth::Need::Authorization { .. })
}

#[tokio::test]
async fn a_due_token_whose_refresh_fails_is_used_while_it_lasts() {
    let state = tempfile::tempdir().unwrap();
    let auth = authorizer(state.path());
    let alice = Principal::user("alice");
    let grant = auth.grant(&alice).await;
    auth.keep(&grant, refreshable("due", DOWN, 30)).await;
    assert_eq!(auth.token(&grant).await.as_deref(), Some("due"));
    assert_eq!(stored(state.path(), &alice).await.as_deref(), Some("due"));
}

#[tokio::test]
async fn a_refusal_of_a_request_without_a_token_keeps_the_stored_tokens() {
    let state = tempfile::tempdir().unwrap();
    let auth = authorizer(state.path());
    let alice = Principal::user("alice");
    let grant = auth.grant(&alice).await;
    auth.keep(&grant, refreshable("expired", DOWN, -10)).await;
    // The refresh fails: the request goes out without a token, and meets a 401.
    assert_eq!(auth.token(&grant).await, None);
    assert!(!auth.rejected(&grant, refusal(None)).await);
    assert!(grant.token().is_some(), "kept in the grant");
    assert!(!needs_authorization(&grant), "to be refreshed later");
    assert_eq!(
        stored(state.path(), &alice).await.as_deref(),
        Some("expired")
    );
}

#[tokio::test]
async fn a_refused_token_whose_refresh_fails_is_kept_for_a_later_refresh() {
    let state = tempfile::tempdir().unwrap();
    let auth = authorizer(state.path());
    let alice = Principal::user("alice");
    let grant = auth.grant(&alice).await;
    auth.keep(&grant, refreshable("refused", DOWN, 600)).await;
    assert!(!auth.rejected(&grant, refusal(Some("refused"))).await);
    assert!(!needs_authorization(&grant));
    assert_eq!(
        stored(state.path(), &alice).await.as_deref(),
        Some("refused")
    );
}

#[tokio::test]
async fn a_refused_token_that_nothing_renews_is_dropped() {
    let state = tempfile::tempdir().unwrap();
    let auth = authorizer(state.path());
    let alice = Principal::user("alice");
    let grant = auth.grant(&alice).await;
    auth.keep(&grant, token("refused")).await;
    assert!(!auth.rejected(&grant, refusal(Some("refused"))).await);
    assert!(grant.token().is_none());
    assert!(needs_authorization(&grant));
    assert_eq!(stored(state.path(), &alice).await, None);
}

#[tokio::test]
async fn a_refresh_token_the_server_refuses_is_dropped() {
    let server = FakeEndpoint::start(400, r#"{"error":"invalid_grant"}"#).await;
    let state = tempfile::tempdir().unwrap();
    let auth = authorizer(state.path());
    let alice = Principal::user("alice");
    let grant = auth.grant(&alice).await;
    auth.keep(&grant, refreshable("refused", &server.url, 600))
        .await;
    assert!(!auth.rejected(&grant, refusal(Some("refused"))).await);
    let seen = server.seen();
    assert_eq!(seen.len(), 1, "one refresh");
    assert_eq!(
        seen[0].field("refresh_token").as_deref(),
        Some("refused-refresh")
    );
    assert!(
        seen[0].headers.get("authorization").is_none(),
        "a public client"
    );
    assert!(grant.token().is_none());
    assert!(needs_authorization(&grant));
    assert_eq!(stored(state.path(), &alice).await, None);
}

#[tokio::test]
async fn a_refusal_of_a_request_sent_before_a_token_came_retries_with_it() {
    let state = tempfile::tempdir().unwrap();
    let auth = authorizer(state.path());
    let grant = auth.grant(&Principal::anonymous()).await;
    auth.keep(&grant, refreshable("new", DOWN, 600)).await;
    assert!(auth.rejected(&grant, refusal(None)).await);
    assert_eq!(
        grant.token().map(|t| t.access_token.clone()).as_deref(),
        Some("new")
    );
}

#[tokio::test]
async fn the_client_credentials_grant_discovers_through_the_challenge() {
    let server = FakeEndpoint::routes(|base| {
        vec![
            (
                "/.well-known/oauth-authorization-server",
                serde_json::json!({"issuer": base, "token_endpoint": format!("{base}/token")})
                    .to_string(),
            ),
            (
                "/token",
                r#"{"access_token":"machine","token_type":"Bearer","expires_in":600}"#.into(),
            ),
        ]
    })
    .await;
    // The upstream advertises its resource metadata in its challenge only.
    let upstream = FakeEndpoint::routes(|base| {
        vec![(
            "/meta/prm",
            serde_json::json!({"resource": format!("{base}/mcp"), "authorization_servers": [server.base]})
                .to_string(),
        )]
    })
    .await;
    let state = tempfile::tempdir().unwrap();
    let mut auth = authorizer(state.path());
    auth.url = Url::parse(&format!("{}/mcp", upstream.base)).unwrap();
    auth.config = UpstreamOAuth {
        grants: vec![crate::config::GrantKind::ClientCredentials],
        client_id: Some("machine".into()),
        client_secret: Some("secret".into()),
        ..UpstreamOAuth::default()
    };
    let grant = auth.grant(&Principal::anonymous()).await;
    assert_eq!(
        auth.token(&grant).await,
        None,
        "nothing found without the challenge"
    );

    let challenge = format!(r#"Bearer resource_metadata="{}/meta/prm""#, upstream.base);
    let rejection = Rejection {
        status: 401,
        www_authenticate: Some(&challenge),
        sent_token: None,
    };
    assert!(auth.rejected(&grant, rejection).await);
    assert_eq!(auth.token(&grant).await.as_deref(), Some("machine"));
    let asked = server.seen();
    let token_request = asked.iter().find(|r| r.path == "/token").unwrap();
    assert_eq!(
        token_request.field("resource"),
        Some(format!("{}/mcp", upstream.base))
    );
}

/// A fresh P-256 key for `private_key_jwt`.
fn signing_key() -> crate::config::PrivateKey {
    use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};
    use base64::{Engine, engine::general_purpose::STANDARD};
    let rng = aws_lc_rs::rand::SystemRandom::new();
    let der = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
    let base64 = STANDARD.encode(der.as_ref());
    let lines: Vec<&str> = base64
        .as_bytes()
        .chunks(64)
        .map(|line| std::str::from_utf8(line).unwrap())
        .collect();
    crate::config::PrivateKey {
        pem: format!(
            "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
            lines.join("\n")
        ),
        algorithm: jsonwebtoken::Algorithm::ES256,
    }
}

/// The revocation requests forgetting a token of `client` makes.
async fn revocations(client: ClientIdentity) -> Vec<crate::oauth::fake_endpoint::Seen> {
    let server = FakeEndpoint::start(200, "{}").await;
    let state = tempfile::tempdir().unwrap();
    let mut auth = authorizer(state.path());
    if client.auth_method == AuthMethod::PrivateKeyJwt {
        auth.config.private_key = Some(signing_key());
    }
    let mut token = refreshable("access", DOWN, 600);
    token.endpoint.revocation = Some(server.url.clone());
    token.client = client;
    auth.keep(&*auth.grant(&Principal::anonymous()).await, token)
        .await;
    assert_eq!(auth.forget_all().await, 1);
    let seen = server.seen();
    let hints: Vec<_> = seen.iter().map(|r| r.field("token_type_hint")).collect();
    assert_eq!(
        hints,
        [Some("access_token".into()), Some("refresh_token".into())]
    );
    assert_eq!(seen[1].field("token").as_deref(), Some("access-refresh"));
    seen
}

fn identity(auth_method: AuthMethod, secret: Option<&str>) -> ClientIdentity {
    ClientIdentity {
        client_id: "switchyard app".into(),
        client_secret: secret.map(str::to_owned),
        auth_method,
    }
}

#[tokio::test]
async fn revocation_authenticates_the_client_as_the_token_endpoint_does() {
    let basic = revocations(identity(AuthMethod::ClientSecretBasic, Some("s3cret/+"))).await;
    for request in &basic {
        // Each of id and secret form-encoded, then joined (RFC 6749 §2.3.1).
        assert_eq!(
            request.headers["authorization"],
            "Basic c3dpdGNoeWFyZCthcHA6czNjcmV0JTJGJTJC"
        );
        assert_eq!(request.field("client_id"), None);
        assert_eq!(request.field("client_secret"), None);
    }

    let post = revocations(identity(AuthMethod::ClientSecretPost, Some("s3cret"))).await;
    for request in &post {
        assert!(request.headers.get("authorization").is_none());
        assert_eq!(
            request.field("client_id").as_deref(),
            Some("switchyard app")
        );
        assert_eq!(request.field("client_secret").as_deref(), Some("s3cret"));
    }

    let jwt = revocations(identity(AuthMethod::PrivateKeyJwt, None)).await;
    let assertions: Vec<_> = jwt.iter().map(|r| r.field("client_assertion")).collect();
    for (request, assertion) in jwt.iter().zip(&assertions) {
        assert!(request.headers.get("authorization").is_none());
        assert_eq!(
            request.field("client_id").as_deref(),
            Some("switchyard app")
        );
        assert_eq!(
            request.field("client_assertion_type").as_deref(),
            Some("urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
        );
        assert_eq!(assertion.as_deref().map(|a| a.split('.').count()), Some(3));
    }
    assert_ne!(assertions[0], assertions[1], "an assertion is used once");

    let public = revocations(identity(AuthMethod::None, None)).await;
    for request in &public {
        assert!(request.headers.get("authorization").is_none());
        assert_eq!(
            request.field("client_id").as_deref(),
            Some("switchyard app")
        );
        assert_eq!(request.field("client_secret"), None);
    }
}

#[tokio::test]
async fn a_refresh_in_flight_does_not_bring_forgotten_tokens_back() {
    let server = FakeEndpoint::start_slow(
        Duration::from_millis(300),
        200,
        r#"{"access_token":"fresh","token_type":"Bearer","expires_in":600}"#,
    )
    .await;
    let state = tempfile::tempdir().unwrap();
    let auth = authorizer(state.path());
    let alice = Principal::user("alice");
    let grant = auth.grant(&alice).await;
    auth.keep(&grant, refreshable("due", &server.url, 30)).await;
    let forget = async {
        // Once the refresh is under way.
        tokio::time::sleep(Duration::from_millis(50)).await;
        auth.forget_all().await
    };
    let (renewed, forgotten) = tokio::join!(auth.token(&grant), forget);
    assert_eq!(renewed.as_deref(), Some("fresh"));
    assert_eq!(forgotten, 1);
    assert!(grant.token().is_none());
    assert_eq!(stored(state.path(), &alice).await, None);
}

#[tokio::test]
async fn a_failure_is_kept_as_it_was_and_escaped_once_where_shown() {
    let state = tempfile::tempdir().unwrap();
    let auth = authorizer(state.path());
    let grant = auth.grant(&Principal::anonymous()).await;
    let pending = crate::oauth::pending::PendingAuthorization {
        upstream: auth.upstream.clone(),
        principal: Principal::anonymous(),
        verifier: "v".into(),
        authorize_url: "https://as.example/authorize".into(),
        redirect_uri: "http://127.0.0.1:8080/oauth/callback".into(),
        scopes: Vec::new(),
        endpoint: crate::oauth::token::samples::endpoint(),
        client: crate::oauth::token::samples::client(),
        issuer: None,
        require_iss: false,
        created: std::time::SystemTime::now(),
        superseded: false,
    };
    let refused = crate::oauth::CallbackQuery {
        error: Some("access_denied".into()),
        error_description: Some("no\nway".into()),
        ..Default::default()
    };
    assert!(auth.complete(pending, refused).await.is_err());
    let crate::oauth::Need::Failed(reason) = grant.need() else {
        panic!("{:?}", grant.need())
    };
    // As given; it is escaped where it is shown (see `upstream::status`).
    assert!(reason.ends_with("no\nway"), "{reason}");
}
