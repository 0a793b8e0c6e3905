//! `[oauth]` and each upstream's `oauth`: settings as written, secrets kept out of `Debug`,
//! and the mistakes each key is refused for.

use std::{path::Path, time::Duration};

use super::{assert_has, load, problems};
use crate::config::{AuthMethod, ExchangeServer, GrantKind, OAuthKey, TransportConfig};

#[test]
fn oauth_settings_and_upstream_oauth() {
    let config = load(
        "/etc/switchyard/switchyard.toml",
        r#"
        [oauth]
        public_url = "https://gw.example.com/base"
        state_dir = "state"
        key = "c3dpdGNoeWFyZC10ZXN0cy1zdG9yZS1rZXktMzJieXQ="
        client_name = "Example gateway"
        success_redirect = "https://app.example.com/connected"
        authorization_lifetime_seconds = 300

        [upstreams.github]
        url = "https://api.example.com/mcp"
        oauth = { client_id = "${env:GH_TOKEN}", client_secret = "s", scopes = ["repo"] }

        [upstreams.machine]
        url = "https://m.example.com/mcp"
        oauth = { grant = "client_credentials", client_id = "m", client_secret = "t", token_endpoint_auth_method = "client_secret_post" }

        [upstreams.open]
        url = "https://o.example.com/mcp"
        "#,
    )
    .unwrap();
    let oauth = &config.oauth;
    assert_eq!(
        oauth.public_url.as_ref().map(|u| u.as_str()),
        Some("https://gw.example.com/base")
    );
    assert_eq!(oauth.state_dir, Path::new("/etc/switchyard/state"));
    assert!(matches!(oauth.key, OAuthKey::Inline(_)));
    assert_eq!(oauth.client_name, "Example gateway");
    assert_eq!(oauth.authorization_lifetime, Duration::from_secs(300));
    let http = |i: usize| match &config.upstreams[i].transport {
        TransportConfig::Http(http) => http.oauth.clone(),
        TransportConfig::Stdio(_) => panic!("http"),
    };
    let github = http(0);
    assert_eq!(github.client_id.as_deref(), Some("ghp_123"));
    assert_eq!(github.scopes, Some(vec!["repo".to_owned()]));
    assert_eq!(github.grants, [GrantKind::AuthorizationCode]);
    let machine = http(1);
    assert_eq!(machine.grants, [GrantKind::ClientCredentials]);
    assert_eq!(machine.auth_method, Some(AuthMethod::ClientSecretPost));
    let shown = format!("{config:?}");
    assert!(shown.contains("client_secret: Some(\"…\")"), "{shown}");
    assert!(!shown.contains("\"t\""), "the secret is not shown: {shown}");
    assert!(
        http(2).enabled,
        "OAuth is on for every HTTP upstream by default"
    );
}

#[test]
fn oauth_problems_are_located() {
    let found = problems(
        "s.toml",
        r#"
        [oauth]
        key = "too-short"
        public_url = "not a url"
        client_metadata_url = "http://gw.example.com/doc.json"

        [upstreams.a]
        url = "https://a.example.com/mcp"
        oauth = { grant = "device", client_secret = "x", token_endpoint_auth_method = "magic" }

        [upstreams.b]
        url = "https://b.example.com/mcp"
        oauth = { grant = "client_credentials" }

        [upstreams.c]
        url = "https://c.example.com/mcp"
        oauth = { client_id = "c", private_key = "-----BEGIN PRIVATE KEY-----\nnope\n-----END PRIVATE KEY-----" }

        [upstreams.d]
        command = "d"
        oauth = { client_id = "d" }
        "#,
    );
    for expected in [
        "oauth.key: must be 32 bytes in base64",
        "oauth.public_url: `not a url` is not an http:// or https:// URL",
        "oauth.client_metadata_url: must be an https:// URL with a path",
        "upstreams.a.oauth.grant: `device` is not one of",
        "upstreams.a.oauth.token_endpoint_auth_method: `magic` is not one of",
        "upstreams.a.oauth.client_secret: needs `client_id`",
        "upstreams.b.oauth.client_id: the client_credentials grant needs a client_id",
        "upstreams.b.oauth.grant: the client_credentials grant needs `client_secret` or a private key",
        "upstreams.c.oauth.private_key: is not a usable RS256 private key",
        "upstreams.d.oauth: does not apply to transport `stdio`",
    ] {
        assert_has(&found, expected);
    }
}

#[test]
fn grants_tried_in_order_and_the_token_exchange() {
    let config = load(
        "/etc/switchyard/switchyard.toml",
        r#"
        [auth.jwt]
        issuer = "https://login.example.com"
        jwks_url = "https://login.example.com/jwks"

        [upstreams.files]
        url = "https://files.example.com/mcp"
        oauth.grant = ["token_exchange", "authorization_code"]
        oauth.token_exchange = { issuer = "https://login.example.com", client_id = "gw", client_secret = "${env:GH_TOKEN}", audience = "files", subject_token_type = "jwt" }
        "#,
    )
    .unwrap();
    let TransportConfig::Http(http) = &config.upstreams[0].transport else {
        panic!("http")
    };
    let oauth = &http.oauth;
    assert_eq!(
        oauth.grants,
        [GrantKind::TokenExchange, GrantKind::AuthorizationCode]
    );
    assert!(oauth.exchanges() && oauth.in_browser() && !oauth.is_machine());
    let exchange = oauth.token_exchange.as_ref().unwrap();
    assert_eq!(
        exchange.server,
        ExchangeServer::Issuer(url::Url::parse("https://login.example.com").unwrap())
    );
    assert_eq!(exchange.auth_method, AuthMethod::ClientSecretBasic);
    assert_eq!(exchange.audience.as_deref(), Some("files"));
    assert_eq!(
        exchange.subject_token_type,
        "urn:ietf:params:oauth:token-type:jwt"
    );
    let shown = format!("{config:?}");
    assert!(
        !shown.contains("ghp_123"),
        "the secret is not shown: {shown}"
    );
}

#[test]
fn grant_and_token_exchange_problems_are_located() {
    let found = problems(
        "s.toml",
        r#"
        [upstreams.a]
        url = "https://a.example.com/mcp"
        oauth.grant = ["authorization_code", "token_exchange", "token_exchange"]

        [upstreams.b]
        url = "https://b.example.com/mcp"
        oauth.grant = ["client_credentials", "token_exchange"]
        oauth.client_id = "b"
        oauth.client_secret = "s"
        oauth.token_exchange = { client_secret = "x", token_endpoint_auth_method = "private_key_jwt", subject_token_type = "saml" }

        [upstreams.c]
        url = "https://c.example.com/mcp"
        oauth.token_exchange = { issuer = "https://login.example.com", token_endpoint = "https://login.example.com/token", client_id = "c" }

        [upstreams.d]
        url = "https://d.example.com/mcp"
        oauth.grant = []

        [upstreams.e]
        url = "https://e.example.com/mcp"
        oauth.grant = ["id_jag", "token_exchange"]
        oauth.token_exchange = { issuer = "https://login.example.com", client_id = "e" }
        "#,
    );
    for expected in [
        "upstreams.a.oauth.grant: names `token_exchange` twice",
        "upstreams.a.oauth.grant: `authorization_code` waits for a person to authorize: it can only come last",
        "upstreams.a.oauth.token_exchange: the `token_exchange` grant needs this table",
        "upstreams.a.oauth.grant: `token_exchange` exchanges the JWT each user authenticates with: it needs `[auth.jwt]`",
        "upstreams.b.oauth.grant: `client_credentials` stands alone",
        "upstreams.b.oauth.token_exchange.issuer: name the authorization server that exchanges tokens",
        "upstreams.b.oauth.token_exchange.client_id: the token exchange needs Switchyard's client",
        "upstreams.b.oauth.token_exchange.token_endpoint_auth_method: `private_key_jwt` is not one of",
        "upstreams.b.oauth.token_exchange.subject_token_type: `saml` is not one of",
        "upstreams.c.oauth.token_exchange.issuer: give `issuer` or `token_endpoint`, not both",
        "upstreams.c.oauth.token_exchange: has no effect unless `grant` names `token_exchange`",
        "upstreams.d.oauth.grant: names no grant",
        "upstreams.e.oauth.grant: `token_exchange` and `id_jag` both exchange the user's token",
        "upstreams.e.oauth.client_id: the `id_jag` grant needs Switchyard's client at the upstream's authorization server",
    ] {
        assert_has(&found, expected);
    }
}
