//! Downstream authentication: bearer JWTs checked against a JWKS issuer and static API keys,
//! the challenges and metadata that guide clients, scopes, and sessions bound to the principal
//! that opened them. Every refusal is tried for real against a running gateway.

use std::time::Duration;

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use rmcp::{
    ServiceExt,
    model::CallToolRequestParams,
    transport::{
        StreamableHttpClientTransport, streamable_http_client::StreamableHttpClientTransportConfig,
    },
};
use serde_json::{Value, json};

use crate::{
    deps,
    fixtures::{
        issuer::{self, ISSUER, Issuer, claims, now, sign},
        oauth_upstream::OAuthUpstream,
    },
    harness::{GatewayBuilder, INITIALIZE, TestGateway, api_key, api_keys_section, post_mcp, text},
};

/// A POST of `body` to the endpoint with `authorization` (a whole header value) and `session`.
async fn post(
    gw: &TestGateway,
    authorization: Option<&str>,
    session: Option<&str>,
    body: &str,
) -> reqwest::Response {
    post_mcp(gw, authorization, session, body.to_owned()).await
}

/// Status, `WWW-Authenticate` and body of a refused request.
async fn refused(answer: reqwest::Response) -> (u16, String, Value) {
    let status = answer.status().as_u16();
    let challenge = answer
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let body = answer.json().await.unwrap_or(Value::Null);
    (status, challenge, body)
}

async fn jwt_gateway(issuer: &Issuer, extra: &str) -> TestGateway {
    GatewayBuilder::new()
        .section(&format!(
            "[auth]\nscopes = []\n{extra}\n[auth.jwt]\nissuer = {ISSUER:?}\njwks_url = {:?}\njwks_min_refresh_seconds = 60\n",
            issuer.jwks_url
        ))
        .demo("demo")
        .start()
        .await
}

#[tokio::test]
async fn forged_expired_and_misdirected_tokens_are_refused() {
    let issuer = Issuer::start().await;
    let gw = jwt_gateway(&issuer, "").await;
    let aud = gw.url();
    let metadata = format!(
        "http://{}/.well-known/oauth-protected-resource/mcp",
        gw.addr
    );

    // Without a token: 401 with the challenge naming the metadata.
    let (status, challenge, body) = refused(post(&gw, None, None, INITIALIZE).await).await;
    assert_eq!(status, 401);
    assert_eq!(
        challenge,
        format!("Bearer resource_metadata=\"{metadata}\"")
    );
    assert_eq!(body["error"]["code"], -32001, "{body}");

    let valid = sign(&claims("alice", &aud), "issuer.key", "k1");
    let tamper = |token: &str| {
        let mut parts: Vec<String> = token.split('.').map(str::to_owned).collect();
        let forged = json!({"iss": ISSUER, "sub": "mallory", "aud": aud, "exp": now() + 300});
        parts[1] = base64_url(forged.to_string().as_bytes());
        parts.join(".")
    };
    let with = |patch: Value| {
        let mut claims = claims("alice", &aud);
        for (key, value) in patch.as_object().unwrap() {
            if value.is_null() {
                claims.as_object_mut().unwrap().remove(key);
            } else {
                claims[key] = value.clone();
            }
        }
        sign(&claims, "issuer.key", "k1")
    };
    let public_pem = std::fs::read(issuer::key_path("issuer.pub")).unwrap();
    let hs256_with_public_key = jsonwebtoken::encode(
        &Header::new(Algorithm::HS256),
        &claims("alice", &aud),
        &EncodingKey::from_secret(&public_pem),
    )
    .unwrap();
    let unsigned = format!(
        "{}.{}.",
        base64_url(br#"{"alg":"none","typ":"JWT"}"#),
        base64_url(claims("alice", &aud).to_string().as_bytes())
    );
    let cases: Vec<(&str, String, &str)> = vec![
        ("expired", with(json!({"exp": now() - 120})), "expired"),
        (
            "not yet valid",
            with(json!({"nbf": now() + 120})),
            "not valid yet",
        ),
        (
            "wrong audience",
            with(json!({"aud": "https://elsewhere.test/mcp"})),
            "another resource",
        ),
        (
            "another gateway's resource",
            with(json!({"aud": format!("http://127.0.0.1:1/mcp")})),
            "another resource",
        ),
        (
            "wrong issuer",
            with(json!({"iss": "https://evil.test"})),
            "another issuer",
        ),
        ("no exp", with(json!({"exp": null})), "required claim"),
        ("no subject", with(json!({"sub": null})), "no subject"),
        ("alg none", unsigned, "neither a JWT"),
        (
            "tampered payload",
            tamper(&valid),
            "signature does not verify",
        ),
        (
            "unknown kid",
            sign(&claims("alice", &aud), "other.key", "k2"),
            "does not publish",
        ),
        (
            "signed by another key under a known kid",
            sign(&claims("alice", &aud), "other.key", "k1"),
            "signature does not verify",
        ),
        (
            "HS256 with the RSA public key",
            hs256_with_public_key,
            "algorithm",
        ),
        ("not a JWT", "abcdef".into(), "not a known API key"),
    ];
    for (case, token, reason) in &cases {
        let (status, challenge, body) =
            refused(post(&gw, Some(&format!("Bearer {token}")), None, INITIALIZE).await).await;
        assert_eq!(status, 401, "{case}: {body}");
        assert!(
            challenge.starts_with("Bearer error=\"invalid_token\"")
                && challenge.contains(&format!("resource_metadata=\"{metadata}\"")),
            "{case}: {challenge}"
        );
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(reason), "{case}: {message}");
        assert!(
            !message.contains(token.as_str()),
            "{case}: the token is echoed"
        );
    }
    let (status, _, _) =
        refused(post(&gw, Some("Basic YWxpY2U6eA=="), None, INITIALIZE).await).await;
    assert_eq!(status, 401, "a Basic header");
    // Unknown key ids cannot make the gateway hammer the issuer: one fetch at start of need,
    // at most one more per jwks_min_refresh_seconds.
    assert!(issuer.fetches() <= 2, "{} JWKS fetches", issuer.fetches());

    // The valid token is served, through a real client.
    let client = authorized_client(&gw, &valid).await;
    let result = client
        .call_tool(
            CallToolRequestParams::new("demo__echo")
                .with_arguments(json!({"text": "hi"}).as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    assert_eq!(text(&result), "hi");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_rotated_key_is_fetched_once_it_is_published() {
    let issuer = Issuer::start().await;
    let gw = GatewayBuilder::new()
        .section(&format!(
            "[auth.jwt]\nissuer = {ISSUER:?}\njwks_url = {:?}\njwks_min_refresh_seconds = 0.5\n",
            issuer.jwks_url
        ))
        .demo("demo")
        .start()
        .await;
    let rotated = sign(&claims("alice", &gw.url()), "other.key", "k2");
    let bearer = format!("Bearer {rotated}");
    let (status, _, _) = refused(post(&gw, Some(&bearer), None, INITIALIZE).await).await;
    assert_eq!(status, 401);
    issuer.publish("other.key", "k2");
    tokio::time::sleep(Duration::from_millis(600)).await;
    let answer = post(&gw, Some(&bearer), None, INITIALIZE).await;
    assert_eq!(answer.status(), 200);
    assert_eq!(issuer.fetches(), 2);
    // A checked token is remembered: more requests fetch nothing and check nothing again.
    let again = post(&gw, Some(&bearer), None, INITIALIZE).await;
    assert_eq!(again.status(), 200);
    assert_eq!(issuer.fetches(), 2);
}

#[tokio::test]
async fn api_keys_scopes_and_the_metadata_document() {
    let hash = |name: &str| switchyard::config::hash_api_key(&api_key(name));
    let gw = GatewayBuilder::new()
        .section(&format!(
            r#"[auth]
scopes = ["mcp:tools"]
authorization_servers = ["https://login.switchyard.test"]
resource_name = "Team gateway"
[auth.api_keys.alice]
sha256 = "{}"
scopes = ["mcp:tools"]
[auth.api_keys.bob]
sha256 = "{}"
"#,
            hash("alice"),
            hash("bob")
        ))
        .demo("demo")
        .start()
        .await;
    let answer = post(
        &gw,
        Some(&format!("Bearer {}", api_key("alice"))),
        None,
        INITIALIZE,
    )
    .await;
    assert_eq!(answer.status(), 200);

    let (status, challenge, body) = refused(
        post(
            &gw,
            Some(&format!("Bearer {}", api_key("bob"))),
            None,
            INITIALIZE,
        )
        .await,
    )
    .await;
    assert_eq!(status, 403, "{body}");
    assert!(
        challenge.starts_with("Bearer error=\"insufficient_scope\"")
            && challenge.contains("scope=\"mcp:tools\""),
        "{challenge}"
    );
    let (status, challenge, _) = refused(post(&gw, None, None, INITIALIZE).await).await;
    assert_eq!(status, 401);
    assert!(challenge.contains("scope=\"mcp:tools\""), "{challenge}");

    for path in [
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ] {
        let metadata: Value = reqwest::get(format!("http://{}{path}", gw.addr))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(
            metadata,
            json!({
                "resource": gw.url(),
                "authorization_servers": ["https://login.switchyard.test"],
                "scopes_supported": ["mcp:tools"],
                "bearer_methods_supported": ["header"],
                "resource_name": "Team gateway",
            }),
            "{path}"
        );
    }
    let elsewhere = reqwest::get(format!(
        "http://{}/.well-known/oauth-protected-resource/other",
        gw.addr
    ))
    .await
    .unwrap();
    assert_eq!(elsewhere.status(), 404);
}

#[tokio::test]
async fn a_session_answers_only_the_principal_that_opened_it() {
    let gw = GatewayBuilder::new()
        .section(&format!(
            "[auth]\nanonymous = true\n{}",
            api_keys_section(&["alice", "bob"])
        ))
        .demo("demo")
        .start()
        .await;
    let alice = format!("Bearer {}", api_key("alice"));
    let bob = format!("Bearer {}", api_key("bob"));
    let opened = post(&gw, Some(&alice), None, INITIALIZE).await;
    assert_eq!(opened.status(), 200);
    let session = opened.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let list = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;

    for (who, authorization) in [("bob", Some(bob.as_str())), ("anonymous", None)] {
        let (status, _, body) = refused(post(&gw, authorization, Some(&session), list).await).await;
        assert_eq!(status, 404, "{who} reached alice's session: {body}");
        assert_eq!(body["error"]["code"], -32001);
        let mut delete = reqwest::Client::new()
            .delete(gw.url())
            .header("mcp-session-id", &session);
        if let Some(value) = authorization {
            delete = delete.header("authorization", value);
        }
        assert_eq!(delete.send().await.unwrap().status(), 404, "{who} ended it");
    }
    // A bad token is refused even where anonymous requests are served.
    let (status, _, _) = refused(post(&gw, Some("Bearer nope-nope-nope"), None, list).await).await;
    assert_eq!(status, 401);

    let answer = post(&gw, Some(&alice), Some(&session), list).await;
    assert_eq!(answer.status(), 200);
    assert!(answer.text().await.unwrap().contains("demo__echo"));
}

/// An rmcp session client sending `token` as its bearer.
pub async fn authorized_client(
    gw: &TestGateway,
    token: &str,
) -> rmcp::service::RunningService<rmcp::RoleClient, ()> {
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(gw.url()).auth_header(token.to_owned()),
    );
    ().serve(transport)
        .await
        .expect("the authorized client connects")
}

fn base64_url(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// The official TypeScript SDK's client signs in by itself: from the gateway's 401 it reads the
/// protected-resource metadata, finds the authorization server there (a real one:
/// `oidc-provider`), registers, gets a code for the scope the challenge names with the gateway
/// as resource indicator, and then lists the tools with the JWT it got, which the gateway
/// checks against the provider's keys.
#[tokio::test]
async fn an_sdk_client_finds_the_authorization_server_and_signs_in() {
    let provider = OAuthUpstream::start(&["--interactions=auto", "--account=dana"]).await;
    let issuer = provider.info["issuer"]
        .as_str()
        .unwrap()
        .trim_end_matches('/')
        .to_owned();
    let gw = GatewayBuilder::new()
        .section(&format!(
            "[auth]\nscopes = [\"mcp:tools\"]\n[auth.jwt]\nissuer = {issuer:?}\njwks_url = \"{issuer}/jwks\"\n"
        ))
        .demo("demo")
        .start()
        .await;
    provider
        .configure(json!({"extra_resource": gw.url()}))
        .await;
    let output = tokio::process::Command::new(deps::node22())
        .arg(deps::node_packages().join("oauth-client.mjs"))
        .arg(gw.url())
        .output()
        .await
        .expect("node runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let report: Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("{e}: {stdout}\n{}", String::from_utf8_lossy(&output.stderr)));
    assert_eq!(report["ok"], true, "{report:#}");
    assert_eq!(report["authorization_server"], issuer, "{report:#}");
    assert_eq!(report["resource"], gw.url(), "{report:#}");
    assert!(
        report["tools"]
            .as_array()
            .unwrap()
            .contains(&json!("demo__echo")),
        "{report:#}"
    );
    let token = &provider.stats().await["as"]["last_access_token"];
    assert_eq!(
        (&token["sub"], &token["aud"]),
        (&json!("dana"), &json!(gw.url()))
    );
}
