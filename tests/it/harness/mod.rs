//! The test harness: real upstreams → a real gateway on 127.0.0.1:0 → real rmcp clients.
//!
//! ```ignore
//! let notes = NotesServer::start().await;
//! let gw = GatewayBuilder::new().demo("local").http("remote", &notes.url()).start().await;
//! let client = gw.client().await;
//! ```

use std::{net::SocketAddr, path::Path, sync::Arc, time::Duration};

use rmcp::{
    RoleClient, ServiceExt,
    model::{
        CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, Implementation,
        ProtocolVersion,
    },
    service::{ClientLifecycleMode, ClientServiceExt, RunningService},
    transport::{
        StreamableHttpClientTransport, streamable_http_client::StreamableHttpClientTransportConfig,
    },
};
use switchyard::{Gateway, config};
use tokio_util::sync::CancellationToken;

mod process;
mod recorder;

pub use process::GatewayProcess;
pub use recorder::Recorder;

pub type Client = RunningService<RoleClient, ClientConfig>;

/// The switchyard binary under test (used as the stdio demo upstream and for the CLI).
pub const SWITCHYARD: &str = env!("CARGO_BIN_EXE_switchyard");

/// The admin token of test gateways whose configuration sets none.
pub const TEST_ADMIN_TOKEN: &str = "test-admin-token-0123456789";

/// Where a configuration built in memory says it was read from.
const IN_MEMORY: &str = "/tmp/switchyard-it.toml";

/// Logs to the test output (shown for the tests that fail): what `RUST_LOG` asks for, or the
/// gateway's warnings and errors.
pub fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("switchyard=warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_test_writer()
        .try_init();
}

/// Builds a gateway configuration and starts the gateway.
#[derive(Default)]
pub struct GatewayBuilder {
    sections: Vec<String>,
    upstreams: Vec<String>,
}

impl GatewayBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a raw TOML section (e.g. `[catalog]\nprefix_mode = "never"`).
    pub fn section(mut self, toml: &str) -> Self {
        self.sections.push(toml.to_owned());
        self
    }

    /// Adds an upstream `[upstreams.NAME]` with the given TOML body.
    pub fn upstream(mut self, name: &str, body: &str) -> Self {
        self.upstreams.push(format!("[upstreams.{name}]\n{body}\n"));
        self
    }

    /// Adds `switchyard demo-server` over stdio.
    pub fn demo(self, name: &str) -> Self {
        let body = format!(
            "transport = \"stdio\"\ncommand = {SWITCHYARD:?}\nargs = [\"demo-server\"]\nconnect_timeout_seconds = 10"
        );
        self.upstream(name, &body)
    }

    /// Adds a streamable-HTTP upstream at `url`.
    pub fn http(self, name: &str, url: &str) -> Self {
        self.http_with(name, url, "")
    }

    /// Adds a streamable-HTTP upstream at `url`, with `extra` keys.
    pub fn http_with(self, name: &str, url: &str, extra: &str) -> Self {
        let body = format!(
            "transport = \"streamable_http\"\nurl = {url:?}\nconnect_timeout_seconds = 5\n{extra}"
        );
        self.upstream(name, &body)
    }

    pub fn config_text(&self) -> String {
        let mut text = self.sections.join("\n");
        text.push('\n');
        text.push_str(&self.upstreams.join("\n"));
        text
    }

    /// Starts the gateway and waits until every upstream has been tried once.
    pub async fn start(self) -> TestGateway {
        TestGateway::start(self.config()).await
    }

    /// Starts the gateway without waiting for its upstreams.
    pub async fn start_unsettled(self) -> TestGateway {
        TestGateway::launch(self.config()).await
    }

    /// Writes the configuration to `dir/switchyard.toml` and starts the gateway from that file
    /// (so that it can reload it, and keeps its overlay beside it).
    pub async fn start_on_file(self, dir: &Path) -> TestGateway {
        let path = dir.join("switchyard.toml");
        let mut text = self.config_text();
        if !text.contains("[store]") {
            // The store's file beside it, so that a reload finds the same one.
            text = format!("[store]\npath = \"sessions.redb\"\n\n{text}");
        }
        if !text.contains("[oauth]") {
            text = format!("[oauth]\nstate_dir = \"state\"\n\n{text}");
        }
        std::fs::write(&path, text).unwrap();
        let config = config::load(&path)
            .unwrap_or_else(|e| panic!("test config rejected: {e}\n{}", self.config_text()));
        TestGateway::start(config).await
    }

    /// Two demo upstreams, `demo` and `other`, on the memory store, started from a file in
    /// `dir`: what the admin API's edits of upstreams (kept in the overlay beside it) work on.
    pub async fn two_demos_on_file(dir: &Path) -> TestGateway {
        GatewayBuilder::new()
            .section("[store]\nkind = \"memory\"")
            .demo("demo")
            .demo("other")
            .start_on_file(dir)
            .await
    }

    fn config(&self) -> config::Config {
        let text = self.config_text();
        config::parse_str(Path::new(IN_MEMORY), &text, &config::ProcessVars)
            .unwrap_or_else(|e| panic!("test config rejected: {e}\n{text}"))
    }
}

/// A gateway serving on 127.0.0.1 at an ephemeral port, with its admin listener on another.
pub struct TestGateway {
    pub gateway: Arc<Gateway>,
    pub addr: SocketAddr,
    pub admin: SocketAddr,
    stop: CancellationToken,
    _state: tempfile::TempDir,
}

impl TestGateway {
    /// Starts a gateway on `config` and waits until every upstream has been tried once.
    pub async fn start(config: config::Config) -> Self {
        let gateway = Self::launch(config).await;
        tokio::time::timeout(Duration::from_secs(60), gateway.gateway.wait_settled())
            .await
            .expect("upstreams did not settle");
        gateway
    }

    /// Starts a gateway on `config`.
    pub async fn launch(config: config::Config) -> Self {
        init_logging();
        let path = config.server.endpoint_path.clone();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut config = config;
        config.server.listen = addr;
        // The embedded store's file: one of its own, unless the test names one.
        let state = tempfile::tempdir().unwrap();
        if let config::StoreKind::Embedded { path: path @ None } = &mut config.store.kind {
            *path = Some(state.path().join("sessions.redb"));
        }
        // The state directory (the audit log's kept head, OAuth's files): a test's own, unless
        // it names one, never the home directory's. (A configuration from a file keeps its
        // own, which a reload reads again: `start_on_file` names one.)
        let home_state = config::default_state_dir(&config::ProcessVars, Path::new("/tmp"));
        if config.oauth.state_dir == home_state && config.source == Path::new(IN_MEMORY) {
            config.oauth.state_dir = state.path().to_path_buf();
        }
        let gateway = Gateway::start(config);
        let stop = CancellationToken::new();
        let token = switchyard::auth::AdminToken::configured(
            gateway
                .live()
                .config
                .admin
                .token
                .as_deref()
                .unwrap_or(TEST_ADMIN_TOKEN),
        );
        let front = switchyard::front::Front::new(gateway.clone(), token.clone());
        let admin_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let admin = admin_listener.local_addr().unwrap();
        let shutdown = stop.clone();
        tokio::spawn(switchyard::admin::serve(
            admin_listener,
            gateway.clone(),
            front.mcp.clone(),
            token,
            async move { shutdown.cancelled().await },
        ));
        let shutdown = stop.clone();
        tokio::spawn(front.serve(listener, gateway.clone(), async move {
            shutdown.cancelled().await
        }));
        assert_eq!(path, gateway.live().config.server.endpoint_path);
        Self {
            gateway,
            addr,
            admin,
            stop,
            _state: state,
        }
    }

    /// `http://ADMIN/PATH`.
    pub fn admin_url(&self, path: &str) -> String {
        format!("http://{}{path}", self.admin)
    }

    /// The JSON the admin API answers a GET of `path` with.
    pub async fn admin_json(&self, path: &str) -> serde_json::Value {
        self.admin_answer(reqwest::Method::GET, path).await.1
    }

    /// The status and JSON body (null if none) of an admin API request.
    pub async fn admin_answer(
        &self,
        method: reqwest::Method,
        path: &str,
    ) -> (u16, serde_json::Value) {
        let answer = self.admin_request(method, path).send().await.unwrap();
        let status = answer.status().as_u16();
        (status, answer.json().await.unwrap_or_default())
    }

    /// What `/metrics` on the admin listener serves now.
    pub async fn metrics_text(&self) -> String {
        self.admin_request(reqwest::Method::GET, "/metrics")
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    /// A request to the admin listener, with its token.
    pub fn admin_request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let token = self.gateway.live().config.admin.token.clone();
        reqwest::Client::new()
            .request(method, self.admin_url(path))
            .bearer_auth(token.as_deref().unwrap_or(TEST_ADMIN_TOKEN))
    }

    /// `http://GATEWAY/PATH` (a virtual endpoint's, say).
    pub fn url_at(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub fn url(&self) -> String {
        format!(
            "http://{}{}",
            self.addr,
            self.gateway.live().config.server.endpoint_path
        )
    }

    /// A client that `initialize`s and keeps a session (protocol 2025-11-25).
    pub async fn client(&self) -> Client {
        connect_client(&self.url(), "it-client").await
    }

    /// A stateless 2026-07-28 client (`server/discover`, no session).
    pub async fn modern_client(&self) -> Client {
        client_info("it-modern")
            .serve_with_lifecycle(
                StreamableHttpClientTransport::from_uri(self.url()),
                ClientLifecycleMode::Discover {
                    preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                },
            )
            .await
            .expect("modern client connects")
    }

    /// The status of upstream `name` (`state`, `last_error`, `retries`, `transport`, …) as
    /// `/healthz` shows it.
    pub async fn upstream_health(&self, name: &str) -> serde_json::Value {
        let health = self.health().await;
        health["upstreams"]
            .as_array()
            .unwrap()
            .iter()
            .find(|u| u["name"] == name)
            .unwrap_or_else(|| panic!("no upstream {name} in {health}"))
            .clone()
    }

    /// Upstream `name`, as the gateway runs it now.
    pub fn upstream(&self, name: &str) -> Arc<switchyard::upstream::Upstream> {
        self.gateway
            .live()
            .upstream(name)
            .cloned()
            .unwrap_or_else(|| panic!("no upstream {name}"))
    }

    /// The state of upstream `name` now.
    pub fn state(&self, name: &str) -> &'static str {
        self.upstream(name).health().status().state.as_str()
    }

    /// Waits (up to `within`) until upstream `name` is in `state`.
    pub async fn wait_state(&self, name: &str, state: &str, within: Duration) {
        let reached = eventually(within, || self.state(name) == state).await;
        let status = self.upstream(name).health().status();
        assert!(reached, "{name} did not become {state}: {status:?}");
    }

    /// `GET /oauth/pending` as the operator sees it (with the admin token): every
    /// authorization users have yet to give.
    pub async fn pending(&self) -> serde_json::Value {
        let token = self.gateway.live().config.admin.token.clone();
        let answer = reqwest::Client::new()
            .get(format!("http://{}/oauth/pending", self.addr))
            .bearer_auth(token.as_deref().unwrap_or(TEST_ADMIN_TOKEN))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 200);
        answer.json().await.unwrap()
    }

    /// `GET /healthz` as JSON.
    pub async fn health(&self) -> serde_json::Value {
        healthz(self.addr).await
    }
}

/// The first link on the pending list of the gateway at `addr` (as the operator sees it, with
/// `admin_token`), once it wants an authorization (within 20 s).
pub async fn wait_for_link(addr: SocketAddr, admin_token: &str) -> String {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let pending: serde_json::Value = reqwest::Client::new()
            .get(format!("http://{addr}/oauth/pending"))
            .bearer_auth(admin_token)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if let Some(link) = pending["pending"][0]["authorization_url"].as_str() {
            return link.to_owned();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{addr} never wanted authorization: {pending}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `GET /healthz` of the gateway listening on `addr`, as JSON.
pub async fn healthz(addr: SocketAddr) -> serde_json::Value {
    reqwest::get(format!("http://{addr}/healthz"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

impl Drop for TestGateway {
    fn drop(&mut self) {
        self.stop.cancel();
        self.gateway.shutdown();
    }
}

fn client_info(name: &str) -> ClientConfig {
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new(name, "0.1.0"),
    )
}

/// A session client of `url` (the gateway, or an upstream directly).
pub async fn connect_client(url: &str, name: &str) -> Client {
    client_info(name)
        .serve(StreamableHttpClientTransport::from_uri(url.to_owned()))
        .await
        .expect("client connects")
}

/// A client of `url` for test user `user` (their `api_key` as bearer token): a session
/// client, or with `modern` a stateless 2026-07-28 one.
pub async fn user_client(url: &str, user: &str, modern: bool) -> Client {
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url.to_owned()).auth_header(api_key(user)),
    );
    let info = client_info(user);
    let client = if modern {
        let lifecycle = ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        };
        info.serve_with_lifecycle(transport, lifecycle).await
    } else {
        info.serve(transport).await
    };
    client.unwrap_or_else(|error| panic!("{user} connects to {url}: {error}"))
}

/// The first text block of a tool result.
pub fn text(result: &CallToolResult) -> &str {
    result
        .content
        .iter()
        .find_map(|c| c.as_text())
        .map(|t| t.text.as_str())
        .expect("a text block")
}

/// The names in a client's `tools/list`, all pages.
pub async fn tool_names<S: rmcp::Service<RoleClient>>(
    client: &RunningService<RoleClient, S>,
) -> Vec<String> {
    let tools = client.list_all_tools().await.expect("tools/list");
    tools.into_iter().map(|t| t.name.into_owned()).collect()
}

/// Polls `check` every 20 ms until it holds or `within` passes.
pub async fn eventually(within: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + within;
    while tokio::time::Instant::now() < deadline {
        if check() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    check()
}

/// A 127.0.0.1 port with nothing listening on it.
pub async fn closed_port() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    listener.local_addr().unwrap().port()
}

/// A server on 127.0.0.1 that answers every request with `status`, `content_type` and `body`.
pub async fn answering(
    status: u16,
    content_type: &'static str,
    body: &'static str,
) -> std::net::SocketAddr {
    let app = axum::Router::new().fallback(move || async move {
        (
            http::StatusCode::from_u16(status).unwrap(),
            [(http::header::CONTENT_TYPE, content_type)],
            body,
        )
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

/// A notes server as the gateway's one upstream, `remote`.
pub async fn remote_notes() -> (crate::fixtures::notes::NotesServer, TestGateway) {
    let notes = crate::fixtures::notes::NotesServer::start().await;
    let gw = GatewayBuilder::new()
        .http("remote", &notes.url())
        .start()
        .await;
    (notes, gw)
}

/// The usual setup: the demo server over stdio as `local`, a notes server as `remote`.
pub async fn two_upstreams() -> (crate::fixtures::notes::NotesServer, TestGateway) {
    let notes = crate::fixtures::notes::NotesServer::start().await;
    let gw = GatewayBuilder::new()
        .demo("local")
        .http("remote", &notes.url())
        .start()
        .await;
    (notes, gw)
}

/// Calls `name` with JSON `arguments`, on any client.
pub async fn call<S: rmcp::Service<RoleClient>>(
    client: &RunningService<RoleClient, S>,
    name: &str,
    arguments: serde_json::Value,
) -> Result<CallToolResult, rmcp::ServiceError> {
    let mut params = CallToolRequestParams::new(name.to_owned());
    if let serde_json::Value::Object(arguments) = arguments {
        params = params.with_arguments(arguments);
    }
    client.call_tool(params).await
}

/// A raw `initialize` (protocol 2025-06-18), for tests that speak HTTP to the endpoint.
pub const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw-test","version":"1"}}}"#;

/// The API key of test user `user`.
pub fn api_key(user: &str) -> String {
    format!("{user}-0123456789abcdef")
}

/// `[auth.api_keys.USER]` tables admitting each of `users` with their `api_key`.
pub fn api_keys_section(users: &[&str]) -> String {
    users
        .iter()
        .map(|user| {
            format!(
                "[auth.api_keys.{user}]\nsha256 = {:?}\n",
                config::hash_api_key(&api_key(user))
            )
        })
        .collect()
}

/// A POST of `body` to `gw`'s endpoint with the headers every MCP POST carries, and
/// `authorization` (a whole header value) and `session` if given.
pub async fn post_mcp(
    gw: &TestGateway,
    authorization: Option<&str>,
    session: Option<&str>,
    body: impl Into<reqwest::Body>,
) -> reqwest::Response {
    let mut request = reqwest::Client::new()
        .post(gw.url())
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(body);
    if let Some(value) = authorization {
        request = request.header("authorization", value);
    }
    if let Some(id) = session {
        request = request.header("mcp-session-id", id);
    }
    request.send().await.unwrap()
}

/// Runs a client script (`which`, for messages) that prints `{"steps": {NAME: {ok, …}}}` as its
/// last JSON line: its steps, and whether it exited with success.
pub async fn script_steps(
    command: &mut tokio::process::Command,
    which: &str,
) -> (serde_json::Map<String, serde_json::Value>, bool) {
    let output = tokio::time::timeout(Duration::from_secs(120), command.output())
        .await
        .expect("the client finishes in time")
        .expect("the client runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let summary: serde_json::Value = stdout
        .lines()
        .rev()
        .find_map(|line| serde_json::from_str(line).ok())
        .unwrap_or_else(|| {
            panic!(
                "{which}: no summary\n{stdout}\n{}",
                String::from_utf8_lossy(&output.stderr)
            )
        });
    let steps = summary["steps"].as_object().expect("steps").clone();
    (steps, output.status.success())
}
