//! `[auth]`: what it admits, its defaults, and the mistakes that would weaken it.

use std::time::Duration;

use jsonwebtoken::Algorithm;

use super::{assert_has, load, problems};
use crate::config::{JwtKeys, hash_api_key};

#[test]
fn without_auth_everyone_is_anonymous_but_only_on_loopback() {
    let config = load("a.toml", "").unwrap();
    assert!(!config.auth.configured && config.auth.anonymous);
    let found = problems("b.toml", "[server]\nlisten = \"0.0.0.0:8080\"\n");
    assert_has(
        &found,
        "server.listen: server.listen (0.0.0.0:8080) is not a loopback address and [auth] is not configured",
    );
    let open = load(
        "c.toml",
        "[server]\nlisten = \"0.0.0.0:8080\"\n[auth]\nanonymous = true\n",
    )
    .unwrap();
    assert!(open.auth.configured && open.auth.anonymous);
}

#[test]
fn jwt_and_api_keys() {
    let hash = hash_api_key("ci-key-0123456789abcdef");
    let config = load(
        "/etc/switchyard/s.toml",
        &format!(
            r#"
            [auth]
            resource = "https://mcp.example.com/mcp"
            scopes = ["mcp"]
            [auth.jwt]
            issuer = "https://login.example.com"
            jwks_url = "https://login.example.com/jwks"
            algorithms = ["RS256", "PS256"]
            leeway_seconds = 10
            jwks_min_refresh_seconds = 5
            groups_claim = "roles"
            [auth.api_keys.ci]
            sha256 = "{hash}"
            scopes = ["mcp"]
            groups = ["bots"]
            "#
        ),
    )
    .unwrap();
    let auth = &config.auth;
    assert!(!auth.anonymous);
    assert_eq!(
        auth.authorization_servers[0].as_str(),
        "https://login.example.com/"
    );
    let jwt = auth.jwt.as_ref().unwrap();
    assert_eq!(jwt.algorithms, vec![Algorithm::RS256, Algorithm::PS256]);
    assert_eq!(jwt.leeway, Duration::from_secs(10));
    assert_eq!(jwt.groups_claim, "roles");
    assert!(matches!(
        &jwt.keys,
        JwtKeys::Jwks { min_refresh, .. } if *min_refresh == Duration::from_secs(5)
    ));
    assert_eq!(auth.api_keys[0].name, "ci");
    assert_eq!(auth.api_keys[0].groups, vec!["bots"]);
    // The resource is the endpoint under the public URL unless given.
    let public = url::Url::parse("https://gw.example.com/base/").unwrap();
    let mut unset = auth.clone();
    unset.resource = None;
    assert_eq!(
        unset.resource_or(&public, "/mcp").as_str(),
        "https://gw.example.com/base/mcp"
    );
}

#[test]
fn weakening_mistakes_are_refused() {
    let found = problems(
        "s.toml",
        r#"
        [auth.jwt]
        jwks_url = "https://login.example.com/jwks"
        secret = "a-secret"
        algorithms = ["RS256", "HS256", "none"]
        leeway_seconds = 3600
        [auth.api_keys.ci]
        sha256 = "not-hex"
        [auth.api_keys.bot]
        "#,
    );
    assert_has(&found, "auth.jwt.issuer: is required");
    assert_has(&found, "auth.jwt: give exactly one of");
    assert_has(&found, "auth.jwt.algorithms: `none` is not an algorithm");
    assert_has(&found, "auth.jwt.algorithms: must all be of one family");
    assert_has(&found, "auth.jwt.leeway_seconds: must be between 0 and 300");
    assert_has(
        &found,
        "auth.api_keys.ci.sha256: must be 64 hexadecimal digits",
    );
    assert_has(&found, "auth.api_keys.bot.sha256: is required");

    let found = problems(
        "s.toml",
        "[auth.jwt]\nissuer = \"i\"\nsecret = \"short\"\nalgorithms = [\"RS256\"]\n",
    );
    assert_has(&found, "auth.jwt.secret: must be at least 32 bytes long");
    assert_has(
        &found,
        "auth.jwt.algorithms: do not fit the key, which is Hmac",
    );

    let found = problems("s.toml", "[auth]\nscopes = [\"mcp\"]\n");
    assert_has(&found, "auth: admits nobody");
    let found = problems(
        "s.toml",
        "[auth.jwt]\nissuer = \"i\"\npublic_key_file = \"/nonexistent/key.pem\"\n",
    );
    assert_has(
        &found,
        "auth.jwt.public_key_file: cannot read /nonexistent/key.pem",
    );
}
