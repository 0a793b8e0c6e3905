//! What the gateway hands to the servers it starts and reaches: a stdio child gets a clean
//! environment, an upstream's configured headers never follow a redirect to another origin,
//! the gateway fetches no metadata an upstream points at elsewhere, and users are capped by
//! default.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::{Router, extract::State, http::HeaderMap, response::IntoResponse, routing::any};

use crate::harness::{
    GatewayBuilder, GatewayProcess, INITIALIZE, SWITCHYARD, api_key, api_keys_section, eventually,
    post_mcp,
};

/// A stdio server started by a shell that first writes its environment to a file: it sees
/// its `env`, what `inherit_env` names and the basics, and nothing else of the gateway's.
#[tokio::test]
async fn a_stdio_child_does_not_see_the_gateways_environment() {
    let dir = tempfile::tempdir().unwrap();
    let seen = dir.path().join("env.txt");
    let path = dir.path().join("switchyard.toml");
    std::fs::write(
        &path,
        format!(
            "[upstreams.probe]\ncommand = \"sh\"\n\
             args = [\"-c\", \"env > '{}'; exec '{SWITCHYARD}' demo-server\"]\n\
             env = {{ GIVEN = \"yes\" }}\ninherit_env = [\"PASSED_*\"]\n",
            seen.display()
        ),
    )
    .unwrap();
    let gw = GatewayProcess::start_with_env(
        &path,
        &[],
        &[
            ("SWITCHYARD_TEST_SECRET", "top-secret"),
            ("AWS_SECRET_ACCESS_KEY", "also-secret"),
            ("PASSED_ON", "kept"),
        ],
    );
    assert!(
        eventually(Duration::from_secs(20), || seen.exists()).await,
        "the child started"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    let env = std::fs::read_to_string(&seen).unwrap();
    let names: Vec<&str> = env
        .lines()
        .filter_map(|line| line.split_once('=').map(|(name, _)| name))
        .collect();
    assert!(env.contains("GIVEN=yes\n"), "{env}");
    assert!(env.contains("PASSED_ON=kept\n"), "{env}");
    assert!(names.contains(&"PATH") && names.contains(&"HOME"), "{env}");
    for secret in [
        "SWITCHYARD_TEST_SECRET",
        "AWS_SECRET_ACCESS_KEY",
        "XDG_STATE_HOME",
        "RUST_LOG",
    ] {
        assert!(
            !names.contains(&secret),
            "{secret} leaked into the child: {env}"
        );
    }
    drop(gw);
}

/// Every request a server at `addr` got: its headers.
type Seen = Arc<Mutex<Vec<HeaderMap>>>;

/// A server that records each request's headers and answers `answer`.
async fn recording(
    answer: fn(&str) -> axum::response::Response,
    port_of_other: u16,
) -> (String, Seen) {
    let seen: Seen = Arc::default();
    let app = Router::new()
        .fallback(any(
            move |State(seen): State<Seen>, headers: HeaderMap| async move {
                seen.lock().unwrap().push(headers);
                answer(&format!("http://127.0.0.1:{port_of_other}"))
            },
        ))
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, seen)
}

/// The port of a `http://127.0.0.1:PORT/…` URL.
fn port_of(url: &str) -> u16 {
    reqwest::Url::parse(url).unwrap().port().unwrap()
}

fn refuse(_: &str) -> axum::response::Response {
    (axum::http::StatusCode::NOT_FOUND, "nothing here").into_response()
}

/// An upstream that redirects elsewhere: the other origin never sees the upstream's API key
/// (nor anything: the gateway does not follow).
#[tokio::test]
async fn a_redirect_does_not_carry_the_upstreams_api_key() {
    let (elsewhere, stolen) = recording(refuse, 0).await;
    let port = port_of(&elsewhere);
    fn moved(other: &str) -> axum::response::Response {
        (
            axum::http::StatusCode::TEMPORARY_REDIRECT,
            [("location", format!("{other}/mcp"))],
        )
            .into_response()
    }
    let (upstream, asked) = recording(moved, port).await;
    let gw = GatewayBuilder::new()
        .http_with(
            "moved",
            &upstream,
            "headers = { X-Api-Key = \"key-for-the-upstream-only\" }\n\
             restart = { delay_ms = 100, max_delay_ms = 200 }",
        )
        .start_unsettled()
        .await;
    assert!(
        eventually(Duration::from_secs(20), || asked.lock().unwrap().len() >= 2).await,
        "the gateway tried the upstream"
    );
    let first = asked.lock().unwrap()[0].clone();
    assert_eq!(first["x-api-key"], "key-for-the-upstream-only");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let stolen = stolen.lock().unwrap();
    assert!(
        stolen
            .iter()
            .all(|headers| !headers.contains_key("x-api-key")),
        "the key followed the redirect: {stolen:?}"
    );
    assert!(stolen.is_empty(), "the redirect was followed: {stolen:?}");
    drop(gw);
}

/// An upstream's 401 names resource metadata on another server: the gateway does not fetch
/// it (an upstream could make it request any address on its network).
#[tokio::test]
async fn metadata_on_another_origin_is_not_fetched() {
    let (elsewhere, fetched) = recording(refuse, 0).await;
    let port = port_of(&elsewhere);
    fn challenge(other: &str) -> axum::response::Response {
        (
            axum::http::StatusCode::UNAUTHORIZED,
            [(
                "www-authenticate",
                format!("Bearer resource_metadata=\"{other}/internal/admin\""),
            )],
        )
            .into_response()
    }
    let (upstream, _) = recording(challenge, port).await;
    let gw = GatewayBuilder::new()
        .http_with(
            "pointing",
            &upstream,
            "restart = { delay_ms = 100, max_delay_ms = 200 }",
        )
        .start_unsettled()
        .await;
    let failed = eventually(Duration::from_secs(20), || {
        gw.upstream("pointing")
            .health()
            .status()
            .last_error
            .as_deref()
            .is_some_and(|error| error.contains("another origin"))
    })
    .await;
    assert!(failed, "{:?}", gw.upstream("pointing").health().status());
    assert!(
        fetched.lock().unwrap().is_empty(),
        "the metadata was fetched"
    );
}

/// Where users authenticate, one user cannot open sessions without end: the default cap.
#[tokio::test]
async fn a_user_has_a_default_session_cap() {
    let gw = GatewayBuilder::new()
        .section(&api_keys_section(&["greedy", "other"]))
        .demo("demo")
        .start()
        .await;
    let bearer = |user: &str| format!("Bearer {}", api_key(user));
    for _ in 0..switchyard::config::DEFAULT_SESSIONS {
        let opened = post_mcp(&gw, Some(&bearer("greedy")), None, INITIALIZE).await;
        assert_eq!(opened.status(), 200);
    }
    let refused = post_mcp(&gw, Some(&bearer("greedy")), None, INITIALIZE).await;
    assert_eq!(refused.status(), 429);
    let other = post_mcp(&gw, Some(&bearer("other")), None, INITIALIZE).await;
    assert_eq!(other.status(), 200, "other users are served");
}
