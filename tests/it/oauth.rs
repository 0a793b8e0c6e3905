//! OAuth towards an upstream, end to end with real parts: a certified authorization server
//! (`oidc-provider`), an MCP server on the official TypeScript SDK that checks its tokens, a
//! browser that logs in and consents, and Switchyard in between, authorizing, refreshing,
//! storing, and surviving restarts; bad callbacks leave nothing behind.

use std::{
    path::Path,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use serde_json::{Value, json};

use crate::{
    fixtures::oauth_upstream::{Browser, OAuthUpstream},
    harness::{GatewayBuilder, Recorder, TestGateway, call, eventually, text, tool_names},
};

const SOON: Duration = Duration::from_secs(20);
/// The token store key of these tests (32 bytes, base64).
const KEY: &str = "c3dpdGNoeWFyZC10ZXN0cy1zdG9yZS1rZXktMzJieXQ=";

/// A gateway with the demo server as `local` and the OAuth upstream as `secure`.
fn gateway(upstream: &OAuthUpstream, state: &Path, oauth: &str, settings: &str) -> GatewayBuilder {
    GatewayBuilder::new()
        .section(&format!(
            "[oauth]\nstate_dir = {:?}\nkey = {KEY:?}\n{settings}",
            state.display().to_string()
        ))
        .demo("local")
        .http_with(
            "secure",
            upstream.mcp_url(),
            &format!("restart = {{ delay_ms = 100, max_delay_ms = 400 }}\noauth = {{ {oauth} }}"),
        )
}

fn preregistered(upstream: &OAuthUpstream) -> String {
    format!(
        "client_id = {:?}, client_secret = {:?}",
        upstream.client("client_id"),
        upstream.client("client_secret")
    )
}

/// Waits for `secure` to want authorization; its link, as the operator's list shows it.
async fn link(gw: &TestGateway) -> String {
    gw.wait_state("secure", "authenticating", SOON).await;
    let pending = gw.pending().await;
    pending["pending"][0]["authorization_url"]
        .as_str()
        .unwrap_or_else(|| panic!("no link in {pending}"))
        .to_owned()
}

async fn whoami(client: &crate::harness::Client) -> Value {
    let result = call(client, "secure__whoami", json!({})).await.unwrap();
    serde_json::from_str(text(&result)).unwrap()
}

/// The token files in the store.
fn stored_tokens(state: &Path) -> Vec<std::path::PathBuf> {
    match std::fs::read_dir(state.join("tokens")) {
        Ok(entries) => entries.map(|e| e.unwrap().path()).collect(),
        Err(_) => Vec::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_authorizes_through_the_callback_and_stays_authorized() {
    let upstream = OAuthUpstream::start(&["--access-token-ttl=4"]).await;
    let state = tempfile::tempdir().unwrap();
    let gw = gateway(&upstream, state.path(), &preregistered(&upstream), "")
        .start_unsettled()
        .await;
    let url = link(&gw).await;

    // Waiting users are told where to go: on the pending list (the operator's, where users
    // do not authenticate), and in the errors of calls; the link is the gateway's own.
    let pending = gw.pending().await;
    assert_eq!(pending["pending"][0]["upstream"], "secure", "{pending}");
    assert_eq!(pending["pending"][0]["authorization_url"], url.as_str());
    assert!(
        url.starts_with(&format!("http://{}/oauth/connect/", gw.addr)),
        "{url}"
    );
    let plain = gw.client().await;
    let error = call(&plain, "secure__whoami", json!({})).await.unwrap_err();
    let rmcp::ServiceError::McpError(error) = error else {
        panic!("{error}")
    };
    assert!(error.message.contains("needs authorization"), "{error:?}");
    assert_eq!(
        error.data.as_ref().unwrap()["authorizationUrl"],
        url.as_str()
    );
    let capable = Recorder::capable("user").connect(&gw.url()).await;
    let error = call(&capable, "secure__whoami", json!({}))
        .await
        .unwrap_err();
    let rmcp::ServiceError::McpError(error) = error else {
        panic!("{error}")
    };
    assert_eq!(
        error.code.0, -32042,
        "a URL elicitation for a capable client"
    );
    assert_eq!(
        error.data.as_ref().unwrap()["elicitations"][0]["url"],
        url.as_str()
    );
    // The other upstream serves meanwhile.
    assert_eq!(
        text(
            &call(&plain, "local__echo", json!({"text": "meanwhile"}))
                .await
                .unwrap()
        ),
        "meanwhile"
    );

    // The user logs in and consents; the provider sends the browser back to the gateway.
    let (status, page) = Browser::new().authorize(&url, "alice").await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("now authorized"), "{page}");
    gw.wait_state("secure", "ready", SOON).await;
    assert!(
        eventually(SOON, || capable.service().seen().tools_changed >= 1).await,
        "clients are told the tools changed"
    );
    assert!(
        tool_names(&capable)
            .await
            .contains(&"secure__whoami".to_owned())
    );
    assert_eq!(whoami(&plain).await["sub"], "alice");

    // The token expires: it is refreshed before it does, and calls go on.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(whoami(&plain).await["sub"], "alice");
    let stats = upstream.stats().await;
    assert!(
        stats["as"]["tokens"]["refresh_token"].as_u64() >= Some(1),
        "{stats}"
    );
    assert_eq!(stats["as"]["grants_revoked"], 0, "{stats}");

    // The tokens are kept encrypted, readable by their owner only.
    let files = stored_tokens(state.path());
    assert_eq!(files.len(), 1, "{files:?}");
    let bytes = std::fs::read(&files[0]).unwrap();
    let token = stats["as"]["last_access_token"]["jti"].as_str().unwrap();
    assert!(!String::from_utf8_lossy(&bytes).contains(token));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&files[0]).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    // A restart needs no new authorization.
    drop((plain, capable));
    drop(gw);
    let gw = gateway(&upstream, state.path(), &preregistered(&upstream), "")
        .start()
        .await;
    assert_eq!(gw.state("secure"), "ready");
    let client = gw.client().await;
    assert_eq!(whoami(&client).await["sub"], "alice");
    assert_eq!(upstream.stats().await["as"]["authorizations"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_calls_after_a_refused_token_refreshes_it_once() {
    let upstream = OAuthUpstream::start(&["--access-token-ttl=300", "--interactions=auto"]).await;
    let (_state, gw) = authorized(&upstream).await;
    let mut clients = Vec::new();
    for _ in 0..6 {
        let client = gw.client().await;
        assert_eq!(whoami(&client).await["sub"], "alice");
        clients.push(client);
    }

    // The server stops accepting the token; every call meets a 401 and asks for a refresh.
    upstream.invalidate_tokens().await;
    let calls = clients
        .iter()
        .map(|client| async move { whoami(client).await["sub"].clone() });
    for sub in futures::future::join_all(calls).await {
        assert_eq!(sub, "alice");
    }
    let stats = upstream.stats().await;
    assert_eq!(
        stats["as"]["tokens"]["refresh_token"], 1,
        "one refresh: {stats}"
    );
    assert_eq!(stats["as"]["grants_revoked"], 0, "{stats}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_replayed_and_refused_callbacks_store_nothing() {
    let upstream = OAuthUpstream::start(&["--interactions=auto"]).await;
    let state = tempfile::tempdir().unwrap();
    let audit = state.path().join("audit.log");
    let settings = format!("\n[audit]\nfile = {:?}\n", audit.display().to_string());
    let gw = gateway(
        &upstream,
        state.path(),
        &preregistered(&upstream),
        &settings,
    )
    .start_unsettled()
    .await;
    let url = link(&gw).await;
    let callback = |query: &str| format!("http://{}/oauth/callback?{query}", gw.addr);

    // A state that was never issued.
    let (status, page) = Browser::new()
        .open(&callback("code=abc&state=forged"))
        .await;
    assert_eq!(status, 403);
    assert!(page.contains("not started in this browser"), "{page}");
    assert_eq!(gw.state("secure"), "authenticating");

    // A genuine state with a wrong code: the provider refuses it; the upstream shows why.
    let browser = Browser::new();
    let genuine = browser.callback_url(&url).await;
    // In any other browser, the genuine callback is refused and leaves the state unused.
    let (status, _) = Browser::new().open(&genuine).await;
    assert_eq!(status, 403);
    let tampered = reqwest::Url::parse(&genuine).unwrap();
    let pairs: Vec<(String, String)> = tampered
        .query_pairs()
        .map(|(k, v)| {
            let v = if k == "code" {
                "wrong".into()
            } else {
                v.into_owned()
            };
            (k.into_owned(), v)
        })
        .collect();
    let mut tampered = tampered.clone();
    tampered.query_pairs_mut().clear().extend_pairs(&pairs);
    let (status, page) = browser.open(tampered.as_str()).await;
    assert_eq!(status, 400);
    assert!(page.contains("invalid_grant"), "{page}");
    assert!(stored_tokens(state.path()).is_empty());
    // Used once, the state is gone even though the exchange failed (and the browser's
    // binding with it).
    let (status, _) = browser.open(&genuine).await;
    assert_eq!(status, 403);

    // It asks again with a new link; this time the user completes it, once.
    let url = eventually_new_link(&gw, &url).await;
    let browser = Browser::new();
    let genuine = browser.callback_url(&url).await;
    assert_eq!(browser.open(&genuine).await.0, 200);
    let (status, page) = browser.open(&genuine).await;
    assert_eq!(status, 403, "a replayed callback");
    assert!(page.contains("not started in this browser"), "{page}");
    gw.wait_state("secure", "ready", SOON).await;
    assert_eq!(stored_tokens(state.path()).len(), 1);

    // A web page of another origin cannot have a browser forget them.
    for (name, value) in [
        ("origin", "http://evil.example"),
        ("sec-fetch-site", "cross-site"),
    ] {
        let forged = reqwest::Client::new()
            .post(format!("http://{}/oauth/forget/secure", gw.addr))
            .header(name, value)
            .send()
            .await
            .unwrap();
        assert_eq!(forged.status(), 403, "{name}: {value}");
    }
    assert_eq!(stored_tokens(state.path()).len(), 1);

    // Forgotten tokens must be authorized again; a user who refuses is reported as such.
    upstream.configure(json!({"interactions": "deny"})).await;
    let forget = reqwest::Client::new()
        .post(format!("http://{}/oauth/forget/secure", gw.addr))
        .send()
        .await
        .unwrap();
    assert_eq!(forget.status(), 200);
    assert_eq!(forget.json::<Value>().await.unwrap()["forgotten"], true);
    assert!(stored_tokens(state.path()).is_empty());
    let url = link(&gw).await;
    let browser = Browser::new();
    let (status, page) = browser.open(&browser.callback_url(&url).await).await;
    assert_eq!(status, 400);
    assert!(page.contains("access_denied"), "{page}");
    assert!(
        eventually(SOON, || gw
            .upstream("secure")
            .health()
            .status()
            .last_error
            .as_deref()
            .is_some_and(|e| e.contains("access_denied")))
        .await,
        "the upstream shows the provider's refusal"
    );
    assert!(stored_tokens(state.path()).is_empty());

    // Each grant and the forgetting are in the audit log, for whom and which upstream; never
    // a code or a state.
    let wanted = [
        ("oauth_grant", "error"),
        ("oauth_grant", "ok"),
        ("oauth_forget", "ok"),
        ("oauth_grant", "error"),
    ];
    let records = || -> Vec<Value> {
        std::fs::read_to_string(&audit)
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter(|record| {
                record["kind"]
                    .as_str()
                    .is_some_and(|k| k.starts_with("oauth_"))
            })
            .collect()
    };
    assert!(
        eventually(SOON, || records().len() == wanted.len()).await,
        "{:#?}",
        records()
    );
    for (record, (kind, outcome)) in records().iter().zip(wanted) {
        assert_eq!(
            (record["kind"].as_str(), record["outcome"].as_str()),
            (Some(kind), Some(outcome)),
            "{record}"
        );
        assert_eq!(record["upstream"], "secure", "{record}");
        assert_eq!(record["principal"], "anonymous", "{record}");
    }
    let text = std::fs::read_to_string(&audit).unwrap();
    let code = reqwest::Url::parse(&genuine)
        .unwrap()
        .query_pairs()
        .find(|(k, _)| k == "code")
        .map(|(_, v)| v.into_owned())
        .unwrap();
    assert!(
        !text.contains(&code),
        "no authorization code in the audit log"
    );
}

/// Waits until `secure` shows a link other than `old`.
async fn eventually_new_link(gw: &TestGateway, old: &str) -> String {
    let upstream = gw.upstream("secure");
    let changed = eventually(SOON, || {
        let status = upstream.health().status();
        status
            .authorization_url
            .as_deref()
            .is_some_and(|u| u != old)
    })
    .await;
    assert!(changed, "no new link: {:?}", upstream.health().status());
    upstream
        .health()
        .status()
        .authorization_url
        .clone()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_authorization_is_refused_and_replaced() {
    let upstream = OAuthUpstream::start(&["--interactions=auto"]).await;
    let state = tempfile::tempdir().unwrap();
    let gw = gateway(
        &upstream,
        state.path(),
        &preregistered(&upstream),
        "authorization_lifetime_seconds = 1\n",
    )
    .start_unsettled()
    .await;
    let url = link(&gw).await;
    let browser = Browser::new();
    let callback = browser.callback_url(&url).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (status, page) = browser.open(&callback).await;
    assert_eq!(status, 400);
    assert!(page.contains("expired"), "{page}");
    assert!(stored_tokens(state.path()).is_empty());
    // The link is dead too.
    let (status, page) = browser.open(&url).await;
    assert_eq!(status, 404);
    assert!(page.contains("start it again"), "{page}");
    // A fresh link replaces the expired one, and works.
    let url = eventually_new_link(&gw, &url).await;
    Browser::new().follow_link(&url).await;
    gw.wait_state("secure", "ready", SOON).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dynamically_registered_client_is_kept_across_restarts() {
    let upstream = OAuthUpstream::start(&["--interactions=auto", "--client-id="]).await;
    let state = tempfile::tempdir().unwrap();
    let done = "success_redirect = \"http://127.0.0.1:9/connected\"\n";
    let gw = gateway(&upstream, state.path(), "", done)
        .start_unsettled()
        .await;
    // The configured page takes the browser, told which upstream it was.
    let answer = authorized_stopping_at(&gw, "/connected").await;
    assert_eq!(answer.status(), 303);
    assert_eq!(
        answer.headers()[reqwest::header::LOCATION],
        "http://127.0.0.1:9/connected?upstream=secure"
    );
    gw.wait_state("secure", "ready", SOON).await;
    let client = gw.client().await;
    let first = whoami(&client).await;
    assert_eq!(first["sub"], "alice");
    drop(client);
    drop(gw);

    let gw = gateway(&upstream, state.path(), "", "").start().await;
    assert_eq!(gw.state("secure"), "ready");
    let client = gw.client().await;
    let again = whoami(&client).await;
    assert_eq!(
        again["client_id"], first["client_id"],
        "the same registration"
    );
    assert_eq!(upstream.stats().await["as"]["registrations"], 1);
}

/// The same over the legacy HTTP+SSE transport: the event stream and every posted message
/// carry the user's token, and calls reach the server as that user.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_authorizes_an_upstream_on_the_legacy_sse_transport() {
    let args = ["--interactions=auto", "--transport=sse", "--mcp-path=/sse"];
    let upstream = OAuthUpstream::start(&args).await;
    let state = tempfile::tempdir().unwrap();
    let gw = GatewayBuilder::new()
        .section(&format!(
            "[oauth]\nstate_dir = {:?}\nkey = {KEY:?}",
            state.path().display().to_string()
        ))
        .upstream(
            "secure",
            &format!(
                "transport = \"sse\"\nurl = {:?}\n{}",
                upstream.mcp_url(),
                upstream.upstream_keys()
            ),
        )
        .start_unsettled()
        .await;
    Browser::new().follow_link(&link(&gw).await).await;
    gw.wait_state("secure", "ready", SOON).await;
    let status = gw.admin_json("/api/status").await;
    assert_eq!(status["servers"][0]["transport"], "sse", "{status}");
    let client = gw.client().await;
    let who = whoami(&client).await;
    assert_eq!(who["sub"], "alice", "{who}");
    assert_eq!(whoami(&client).await["calls"], 2);
}

/// With `error_redirect`, a failed authorization sends the browser to the configured page,
/// told which upstream and why (the provider's refusal), instead of Switchyard's error page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_authorization_goes_to_the_configured_error_page() {
    let upstream = OAuthUpstream::start(&["--interactions=auto"]).await;
    upstream.configure(json!({"interactions": "deny"})).await;
    let state = tempfile::tempdir().unwrap();
    let failed = "error_redirect = \"http://127.0.0.1:9/failed\"\n";
    let gw = gateway(&upstream, state.path(), &preregistered(&upstream), failed)
        .start_unsettled()
        .await;
    let answer = authorized_stopping_at(&gw, "/failed").await;
    assert_eq!(answer.status(), 303);
    let to = reqwest::Url::parse(
        answer.headers()[reqwest::header::LOCATION]
            .to_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(to.path(), "/failed");
    let query: std::collections::HashMap<_, _> = to.query_pairs().into_owned().collect();
    assert_eq!(query["upstream"], "secure", "{to}");
    assert!(query["error"].contains("access_denied"), "{to}");
    assert!(stored_tokens(state.path()).is_empty());
}

/// A user's browser following `gw`'s authorization link through the provider to the
/// callback: the callback's answer, the redirects it gives not followed to `stop`.
async fn authorized_stopping_at(gw: &TestGateway, stop: &'static str) -> reqwest::Response {
    let browser = Browser::new();
    let callback = browser.callback_url(&link(gw).await).await;
    browser
        .stopping_at(stop)
        .get(&callback)
        .send()
        .await
        .unwrap()
}

/// A gateway (with its state directory) fronting `upstream` with a pre-registered client,
/// authorized by a user through the callback, and ready.
async fn authorized(upstream: &OAuthUpstream) -> (tempfile::TempDir, TestGateway) {
    let state = tempfile::tempdir().unwrap();
    let gw = gateway(upstream, state.path(), &preregistered(upstream), "")
        .start_unsettled()
        .await;
    Browser::new().follow_link(&link(&gw).await).await;
    gw.wait_state("secure", "ready", SOON).await;
    (state, gw)
}

/// Sleeps until `at`, in seconds since the epoch.
async fn sleep_until_epoch(at: f64) {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    if at > now {
        tokio::time::sleep(Duration::from_secs_f64(at - now)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_endpoint_outage_keeps_the_tokens() {
    // A 12 s token is due for a refresh 3 s before it expires.
    let upstream = OAuthUpstream::start(&["--access-token-ttl=12", "--interactions=auto"]).await;
    let (state, gw) = authorized(&upstream).await;
    let client = gw.client().await;
    let first = whoami(&client).await;
    let expires = first["exp"].as_u64().unwrap() as f64;

    upstream.configure(json!({"token_endpoint": "down"})).await;
    // Due, and its refresh fails: the token still serves while it lasts.
    sleep_until_epoch(expires - 1.8).await;
    assert_eq!(whoami(&client).await["jti"], first["jti"]);
    assert!(upstream.stats().await["as"]["token_outages"].as_u64() >= Some(1));

    // Expired: calls fail, but the tokens are kept and no one is asked to authorize again.
    sleep_until_epoch(expires + 1.0).await;
    assert!(call(&client, "secure__whoami", json!({})).await.is_err());
    assert_eq!(stored_tokens(state.path()).len(), 1);
    let status = gw.upstream("secure").health().status();
    assert_eq!(status.authorization_url, None, "{status:?}");

    // The token endpoint is back: the token is refreshed, without a new authorization.
    upstream.configure(json!({"token_endpoint": "up"})).await;
    let deadline = tokio::time::Instant::now() + SOON;
    let again = loop {
        if let Ok(result) = call(&client, "secure__whoami", json!({})).await {
            break serde_json::from_str::<Value>(text(&result)).unwrap();
        }
        assert!(tokio::time::Instant::now() < deadline, "no recovery");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(again["sub"], "alice");
    assert_ne!(again["jti"], first["jti"]);
    let stats = upstream.stats().await;
    assert_eq!(stats["as"]["authorizations"], 1, "{stats}");
    assert_eq!(stats["as"]["grants_revoked"], 0, "{stats}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_authorized_upstream_that_goes_down_is_retried_with_backoff() {
    let upstream = OAuthUpstream::start(&["--access-token-ttl=300", "--interactions=auto"]).await;
    let (state, gw) = authorized(&upstream).await;
    let client = gw.client().await;
    assert_eq!(whoami(&client).await["sub"], "alice");

    drop(upstream);
    // A call that fails has the gateway check the upstream at once.
    assert!(call(&client, "secure__whoami", json!({})).await.is_err());
    // Its token is good, but that is no reason to reconnect in a tight loop: each failed
    // attempt counts, and the backoff applies.
    let secure = gw.upstream("secure");
    assert!(
        eventually(SOON, || secure.health().status().retries >= 3).await,
        "{:?}",
        secure.health().status()
    );
    assert_eq!(secure.health().status().authorization_url, None);
    assert_eq!(stored_tokens(state.path()).len(), 1);
}
