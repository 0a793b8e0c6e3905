//! Switchyard in a real browser: the status page, and web pages calling the MCP endpoint across
//! origins (CORS). Headless Chromium driven through ChromeDriver with the W3C WebDriver protocol
//! (a handful of JSON requests, spoken here directly).

use std::{
    io::{BufRead, BufReader},
    os::unix::process::CommandExt,
    process::{Child, Command, Stdio},
    time::Duration,
};

use serde_json::{Value, json};

use crate::{
    deps::chromedriver,
    fixtures::{crashable::Crashable, freezer::Freezer},
    harness::{GatewayBuilder, TEST_ADMIN_TOKEN, api_key, api_keys_section, call},
};

/// A Chromium session behind its own ChromeDriver; both end when it is dropped.
pub struct Browser {
    http: reqwest::Client,
    /// `http://127.0.0.1:PORT/session/ID`.
    session: String,
    driver: Child,
    _profile: tempfile::TempDir,
}

impl Browser {
    pub async fn start() -> Self {
        // A process group of its own, which the browser it starts joins: ending the group
        // ends both (killing the driver alone leaves the browser running).
        let mut driver = Command::new(chromedriver())
            .args(["--port=0", "--allowed-ips=127.0.0.1"])
            .process_group(0)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let stdout = driver.stdout.take().unwrap();
        let port = tokio::task::spawn_blocking(move || {
            let mut lines = BufReader::new(stdout).lines();
            let port = lines.by_ref().map_while(Result::ok).find_map(|line| {
                let at = line.find("started successfully on port ")?;
                let rest = &line[at + "started successfully on port ".len()..];
                rest.trim_end_matches('.').parse::<u16>().ok()
            });
            // Keep reading so that the driver never blocks on a full pipe.
            std::thread::spawn(move || lines.for_each(drop));
            port
        })
        .await
        .unwrap()
        .expect("chromedriver names its port");
        let profile = tempfile::tempdir().unwrap();
        let args = [
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--window-size=1280,900",
        ]
        .map(String::from)
        .into_iter()
        .chain([format!("--user-data-dir={}", profile.path().display())])
        .collect::<Vec<_>>();
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": "/usr/bin/chromium", "args": args},
        }}});
        let http = reqwest::Client::new();
        let base = format!("http://127.0.0.1:{port}");
        let created = send(http.post(format!("{base}/session")).json(&capabilities)).await;
        let id = created["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {created}"));
        Self {
            session: format!("{base}/session/{id}"),
            http,
            driver,
            _profile: profile,
        }
    }

    pub async fn goto(&self, url: &str) {
        let request = self.http.post(format!("{}/url", self.session));
        send(request.json(&json!({ "url": url }))).await;
    }

    /// Runs `script` (a function body) in the page; what it returns.
    pub async fn eval(&self, script: &str) -> Value {
        let request = self.http.post(format!("{}/execute/sync", self.session));
        send(request.json(&json!({ "script": script, "args": [] }))).await
    }

    /// Clicks the element matching `selector`.
    pub async fn click(&self, selector: &str) {
        let script = format!("document.querySelector({selector:?}).click(); return null;");
        self.eval(&script).await;
    }

    /// Whether an element matching `selector` appears within `within`.
    pub async fn wait_for(&self, selector: &str, within: Duration) -> bool {
        let script = format!("return document.querySelector({selector:?}) !== null;");
        let deadline = tokio::time::Instant::now() + within;
        while tokio::time::Instant::now() < deadline {
            if self.eval(&script).await == json!(true) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        false
    }

    /// A PNG of the viewport.
    pub async fn screenshot(&self) -> Vec<u8> {
        use base64::Engine;
        let value = send(self.http.get(format!("{}/screenshot", self.session))).await;
        base64::engine::general_purpose::STANDARD
            .decode(value.as_str().expect("base64 PNG"))
            .expect("valid base64")
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let group = format!("-{}", self.driver.id());
        let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// Sends a WebDriver command; its `value`, or a panic naming the driver's error.
async fn send(request: reqwest::RequestBuilder) -> Value {
    let response = request.send().await.expect("chromedriver answers");
    let status = response.status();
    let body: Value = response.json().await.expect("chromedriver answers JSON");
    assert!(status.is_success(), "WebDriver error {status}: {body}");
    body["value"].clone()
}

/// The page shows an upstream go from `connecting` to `ready`, and a killed one go `failed`,
/// with live traffic figures; a screenshot is kept in the target directory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_page_follows_upstream_states_in_a_browser() {
    let demo = crate::bench::demo_http().await;
    let target = demo.trim_start_matches("http://").trim_end_matches("/mcp");
    let later = Freezer::start(target.parse().unwrap()).await;
    later.freeze();
    let crashable = Crashable::new();
    let gw = GatewayBuilder::new()
        .upstream(
            "crashes",
            &crashable.upstream(&format!(
                "restart = {{ delay_ms = 60000, max_delay_ms = 60000 }}\n{}",
                crashable.sandboxed()
            )),
        )
        .upstream(
            "later",
            &format!(
                "transport = \"streamable_http\"\nurl = \"http://{}/mcp\"\n\
                 connect_timeout_seconds = 60",
                later.addr
            ),
        )
        .start_unsettled()
        .await;
    gw.wait_state("crashes", "ready", Duration::from_secs(20))
        .await;

    let browser = Browser::start().await;
    browser
        .goto(&gw.admin_url(&format!("/#token={TEST_ADMIN_TOKEN}")))
        .await;
    let row = |name: &str, state: &str| format!("tr[data-upstream={name:?}][data-state={state:?}]");
    let soon = Duration::from_secs(15);
    assert!(
        browser.wait_for(&row("later", "connecting"), soon).await,
        "the page shows `later` connecting"
    );
    assert!(browser.wait_for(&row("crashes", "ready"), soon).await);
    // A sandboxed server's transport says so; what is enforced is its title.
    let transport = |name: &str, what: &str| {
        format!(
            "return document.querySelector('tr[data-upstream={name:?}] td.col-transport').{what};"
        )
    };
    let said = browser.eval(&transport("crashes", "textContent")).await;
    assert_eq!(said, "stdio, sandboxed", "the transport cell");
    let title = browser.eval(&transport("crashes", "title")).await;
    assert!(title.as_str().unwrap().starts_with("enforced: "), "{title}");
    assert!(
        title.as_str().unwrap().contains("paths (Landlock)"),
        "{title}"
    );

    later.thaw();
    assert!(
        browser.wait_for(&row("later", "ready"), soon).await,
        "the page shows `later` ready without being reloaded"
    );
    let said = browser.eval(&transport("later", "textContent")).await;
    assert_eq!(said, "streamable_http", "a server without a sandbox");
    let client = gw.client().await;
    for text in ["one", "two", "three"] {
        call(&client, "later__echo", json!({ "text": text }))
            .await
            .unwrap();
    }

    crashable.kill().await;
    assert!(
        browser.wait_for(&row("crashes", "failed"), soon).await,
        "the page shows the killed upstream failed"
    );
    let error = browser
        .eval(&format!(
            "return document.querySelector({:?}).textContent;",
            row("crashes", "failed")
        ))
        .await;
    assert!(
        error.as_str().unwrap().contains("closed"),
        "the row says why: {error}"
    );
    // The Reconnect button brings the failed upstream back at once (its restart delay is a
    // minute), and the page shows it.
    browser
        .click(&format!(
            "{} button[data-action=\"reconnect\"]",
            row("crashes", "failed")
        ))
        .await;
    assert!(
        browser.wait_for(&row("crashes", "ready"), soon).await,
        "the page's Reconnect brought `crashes` back"
    );
    let tools = browser
        .eval(&format!(
            "return document.querySelector({:?}).textContent;",
            row("later", "ready")
        ))
        .await;
    assert!(
        tools.as_str().unwrap().contains('6'),
        "its tool count: {tools}"
    );

    let png = browser.screenshot().await;
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "a PNG");
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("status-page.png");
    std::fs::write(&path, &png).unwrap();
    eprintln!("status page screenshot: {}", path.display());
}

/// The page's Disable and Enable buttons switch an upstream off and on, and a change made
/// elsewhere (the admin API) shows on the page as it happens: the page follows the event
/// stream and reads the status only when told something changed, never on a timer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_page_switches_upstreams_and_hears_changes_made_elsewhere() {
    let dir = tempfile::tempdir().unwrap();
    let gw = GatewayBuilder::two_demos_on_file(dir.path()).await;
    let browser = Browser::start().await;
    browser
        .goto(&gw.admin_url(&format!("/#token={TEST_ADMIN_TOKEN}")))
        .await;
    let soon = Duration::from_secs(15);
    let row = |name: &str| format!("tr[data-upstream={name:?}][data-state=\"ready\"]");
    assert!(browser.wait_for(&row("demo"), soon).await);
    assert!(browser.wait_for(&row("other"), soon).await);
    browser
        .click(&format!("{} button[data-action=\"disable\"]", row("demo")))
        .await;
    let off = |name: &str| format!("#disabled li[data-upstream={name:?}]");
    assert!(browser.wait_for(&off("demo"), soon).await, "listed as off");
    assert!(
        !browser
            .wait_for("tr[data-upstream=\"demo\"]", Duration::from_millis(1))
            .await,
        "and its row is gone"
    );
    browser
        .click(&format!("{} button[data-action=\"enable\"]", off("demo")))
        .await;
    assert!(
        browser.wait_for(&row("demo"), soon).await,
        "switched on from the page"
    );

    // A client opens a session: the page's figures follow from the stream's counters alone,
    // and the status is not read again while no state changes.
    let status_reads = "return performance.getEntriesByType('resource')\
                        .filter((e) => e.name.endsWith('/api/status')).length;";
    // Switching `demo` on sends several events (its states, its catalog, the reload of the
    // file it was written to), each followed by a read of the status: count from when they
    // have stopped coming.
    let mut before = browser.eval(status_reads).await;
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = browser.eval(status_reads).await;
        if now == before {
            break;
        }
        before = now;
    }
    let _client = gw.client().await;
    let sessions = "return document.getElementById('t-sessions').textContent;";
    let mut shown = Value::Null;
    for _ in 0..30 {
        shown = browser.eval(sessions).await;
        if shown == json!("1") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(shown, json!("1"), "the session count came in the stream");
    tokio::time::sleep(Duration::from_millis(2000)).await;
    assert_eq!(browser.eval(status_reads).await, before, "no polling");

    browser
        .click(&format!(
            "{} button[data-action=\"rediscover\"]",
            row("other")
        ))
        .await;
    let said = format!(
        "return document.querySelector({:?}).textContent;",
        format!("{} .message", row("other"))
    );
    let mut told = Value::Null;
    for _ in 0..50 {
        told = browser.eval(&said).await;
        if told == json!("listing again") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(told, json!("listing again"), "Rediscover was accepted");

    // Changed elsewhere: on the page well before any poll would have shown it.
    let (status, _) = gw
        .admin_answer(reqwest::Method::POST, "/api/upstreams/other/disable")
        .await;
    assert_eq!(status, 200);
    assert!(
        browser
            .wait_for(&off("other"), Duration::from_millis(900))
            .await,
        "the page heard of it"
    );
}

/// A page with nothing on it, served on 127.0.0.1 at an ephemeral port; its origin.
async fn blank_page() -> String {
    let app = axum::Router::new().route(
        "/",
        axum::routing::get(|| async { axum::response::Html("<html><body>a page</body></html>") }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}")
}

/// What a page's `fetch` of `endpoint` sees: an `initialize` without credentials, then one with
/// `key`; or the error `fetch` threw.
fn fetch_script(endpoint: &str, key: &str) -> String {
    format!(
        r#"return (async () => {{
  const headers = {{ "content-type": "application/json", "accept": "application/json, text/event-stream" }};
  const body = JSON.stringify({{ jsonrpc: "2.0", id: 1, method: "initialize",
    params: {{ protocolVersion: "2025-06-18", capabilities: {{}}, clientInfo: {{ name: "page", version: "1" }} }} }});
  const seen = {{}};
  try {{
    const anonymous = await fetch({endpoint:?}, {{ method: "POST", headers, body }});
    seen.unauthorized = anonymous.status;
    seen.challenge = anonymous.headers.get("www-authenticate");
    const answer = await fetch({endpoint:?}, {{ method: "POST", body,
      headers: {{ ...headers, authorization: "Bearer {key}" }} }});
    seen.status = answer.status;
    seen.session = answer.headers.get("mcp-session-id");
    seen.text = await answer.text();
  }} catch (error) {{
    seen.error = String(error);
  }}
  return seen;
}})();"#
    )
}

#[tokio::test]
async fn pages_of_allowed_origins_call_the_endpoint_and_others_cannot() {
    let allowed = blank_page().await;
    let refused = blank_page().await;
    let key = api_key("page");
    let gw = GatewayBuilder::new()
        .section(&format!(
            "[server]\nallowed_origins = [{allowed:?}]\n{}",
            api_keys_section(&["page"])
        ))
        .demo("demo")
        .start()
        .await;
    let browser = Browser::start().await;

    browser.goto(&allowed).await;
    let seen = browser.eval(&fetch_script(&gw.url(), &key)).await;
    assert_eq!(seen["unauthorized"], 401, "{seen}");
    assert!(
        seen["challenge"]
            .as_str()
            .is_some_and(|c| c.contains("resource_metadata=")),
        "the page reads the challenge: {seen}"
    );
    assert_eq!(seen["status"], 200, "{seen}");
    assert!(
        seen["session"]
            .as_str()
            .is_some_and(|id| id.len() >= 32 && id.bytes().all(|b| b.is_ascii_graphic())),
        "the page reads the session id: {seen}"
    );
    assert!(seen["text"].as_str().unwrap().contains("protocolVersion"));

    browser.goto(&refused).await;
    let seen = browser.eval(&fetch_script(&gw.url(), &key)).await;
    assert!(
        seen["error"]
            .as_str()
            .is_some_and(|e| e.contains("Failed to fetch")),
        "a page of another origin gets nothing: {seen}"
    );
    let preflight = reqwest::Client::new()
        .request(reqwest::Method::OPTIONS, gw.url())
        .header("origin", &refused)
        .header("access-control-request-method", "POST")
        .send()
        .await
        .unwrap();
    assert_eq!(preflight.status(), 403);
    assert!(
        preflight
            .headers()
            .get("access-control-allow-origin")
            .is_none()
    );
}

/// What a page's `fetch` of `endpoint` sees: an `initialize` with `key`, then a `DELETE` of
/// the session it opened; or where `fetch` threw.
fn delete_script(endpoint: &str, key: &str) -> String {
    format!(
        r#"return (async () => {{
  const headers = {{ "content-type": "application/json", "accept": "application/json, text/event-stream",
    authorization: "Bearer {key}" }};
  const body = JSON.stringify({{ jsonrpc: "2.0", id: 1, method: "initialize",
    params: {{ protocolVersion: "2025-11-25", capabilities: {{}}, clientInfo: {{ name: "page", version: "1" }} }} }});
  const seen = {{}};
  try {{
    const answer = await fetch({endpoint:?}, {{ method: "POST", headers, body }});
    seen.status = answer.status;
    seen.session = answer.headers.get("mcp-session-id");
  }} catch (error) {{
    seen.error = String(error);
    return seen;
  }}
  try {{
    const ended = await fetch({endpoint:?}, {{ method: "DELETE",
      headers: {{ authorization: "Bearer {key}", "mcp-session-id": seen.session }} }});
    seen.deleted = ended.status;
  }} catch (error) {{
    seen.delete_error = String(error);
  }}
  return seen;
}})();"#
    )
}

/// A configured CORS policy, as a browser enforces it: a virtual endpoint that serves one of
/// the listener's two origins, and lets pages post but not end sessions.
#[tokio::test]
async fn a_configured_cors_policy_holds_in_a_browser() {
    let first = blank_page().await;
    let second = blank_page().await;
    let key = api_key("page");
    let gw = GatewayBuilder::new()
        .section(&format!(
            "[server]\nallowed_origins = [{first:?}, {second:?}]\n{}\n\n\
             [endpoints.narrow]\npath = \"/narrow/mcp\"\n\n\
             [endpoints.narrow.cors]\nallowed_origins = [{first:?}]\n\
             allowed_methods = [\"POST\", \"OPTIONS\"]\nexposed_headers = [\"X-Request-Id\"]\n\
             max_age_seconds = 60",
            api_keys_section(&["page"])
        ))
        .demo("demo")
        .start()
        .await;
    let narrow = gw.url_at("/narrow/mcp");
    let browser = Browser::start().await;

    browser.goto(&first).await;
    let seen = browser.eval(&delete_script(&narrow, &key)).await;
    assert_eq!(seen["status"], 200, "{seen}");
    assert!(
        seen["session"].is_string(),
        "the session id is readable: {seen}"
    );
    assert!(
        seen["delete_error"]
            .as_str()
            .is_some_and(|e| e.contains("Failed to fetch")),
        "DELETE is not allowed to pages here: {seen}"
    );
    let seen = browser.eval(&delete_script(&gw.url(), &key)).await;
    assert_eq!(seen["deleted"], 200, "the main endpoint allows it: {seen}");

    browser.goto(&second).await;
    let seen = browser.eval(&delete_script(&narrow, &key)).await;
    assert!(
        seen["error"]
            .as_str()
            .is_some_and(|e| e.contains("Failed to fetch")),
        "the narrow endpoint does not serve this origin: {seen}"
    );
    let seen = browser.eval(&delete_script(&gw.url(), &key)).await;
    assert_eq!(seen["status"], 200, "the main endpoint does: {seen}");

    let preflight = reqwest::Client::new()
        .request(reqwest::Method::OPTIONS, &narrow)
        .header("origin", &first)
        .header("access-control-request-method", "POST")
        .send()
        .await
        .unwrap();
    assert_eq!(preflight.status(), 204);
    let header = |name: &str| preflight.headers()[name].to_str().unwrap().to_owned();
    assert_eq!(header("access-control-allow-methods"), "POST, OPTIONS");
    assert_eq!(header("access-control-max-age"), "60");
    assert!(header("access-control-expose-headers").ends_with("X-Request-Id"));
    assert!(
        preflight
            .headers()
            .get("access-control-allow-credentials")
            .is_none(),
        "credentials never"
    );
}
