//! `switchyard-conformance client URL`: the client the official conformance suite's
//! authorization scenarios drive (`conformance client --suite auth`), built on Switchyard itself.
//!
//! It runs a gateway whose one upstream is the suite's mock server at `URL`, with the scenario's
//! credentials (`MCP_CONFORMANCE_CONTEXT`) in the upstream's OAuth settings; plays the user's
//! browser (the suite's authorization server redirects at once, so following the link to the
//! gateway's callback is the whole of it); then, as an MCP client of the gateway, lists the
//! tools and calls one, answering authorization requests (URL elicitations, for step-up) the
//! same way. Everything OAuth is done by the gateway's own code.

use std::{path::PathBuf, time::Duration};

use anyhow::{Context, bail};
use base64::Engine;
use rmcp::{
    ServiceExt,
    model::{
        CallToolRequestParams, ClientCapabilities, ClientConfig, ElicitationCapability,
        Implementation, UrlElicitationCapability,
    },
    transport::StreamableHttpClientTransport,
};
use serde_json::Value;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use switchyard::{
    Gateway, config,
    error::URL_ELICITATION_REQUIRED,
    upstream::{Upstream, UpstreamState},
};

/// The upstream's name in the gateway.
const UPSTREAM: &str = "suite";
/// The scenario's whole budget (the suite allows 30 s).
const DEADLINE: Duration = Duration::from_secs(25);
/// The most authorizations one request may need (a step-up that keeps asking is refused).
const MAX_AUTHORIZATIONS: usize = 3;
/// The most redirects one authorization's browser follows.
const MAX_REDIRECTS: usize = 8;
/// The client ID metadata document URL the suite expects.
const METADATA_URL: &str = "https://conformance-test.local/client-metadata.json";

pub async fn run(url: &str) -> anyhow::Result<()> {
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    let context: Value = std::env::var("MCP_CONFORMANCE_CONTEXT")
        .ok()
        .map(|text| serde_json::from_str(&text))
        .transpose()
        .context("MCP_CONFORMANCE_CONTEXT is not JSON")?
        .unwrap_or(Value::Null);
    let state_dir = std::env::temp_dir().join(format!(
        "switchyard-conformance-{}-{}",
        std::process::id(),
        uuid::Uuid::new_v4()
    ));
    let result = tokio::time::timeout(DEADLINE, exercise(url, &scenario, &context, &state_dir))
        .await
        .unwrap_or_else(|_| bail!("the scenario did not finish in {}s", DEADLINE.as_secs()));
    let _ = std::fs::remove_dir_all(&state_dir);
    result
}

async fn exercise(
    url: &str,
    scenario: &str,
    context: &Value,
    state_dir: &std::path::Path,
) -> anyhow::Result<()> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let mut config = gateway_config(url, scenario, context, state_dir)?;
    config.server.listen = listener.local_addr()?;
    let endpoint = format!(
        "http://{}{}",
        config.server.listen, config.server.endpoint_path
    );
    let gateway = Gateway::start(config);
    let stop = CancellationToken::new();
    let serving = tokio::spawn(switchyard::front::serve(listener, gateway.clone(), {
        let stop = stop.clone();
        async move { stop.cancelled().await }
    }));
    let outcome = async {
        let upstream = gateway
            .live()
            .upstream(UPSTREAM)
            .cloned()
            .context("the upstream is configured")?;
        until_ready(&upstream).await?;
        use_tools(&endpoint).await
    }
    .await;
    stop.cancel();
    gateway.close(Duration::from_secs(1)).await;
    let _ = serving.await;
    outcome
}

/// The gateway's configuration: one upstream, unprefixed, with the scenario's credentials.
fn gateway_config(
    url: &str,
    scenario: &str,
    context: &Value,
    state_dir: &std::path::Path,
) -> anyhow::Result<config::Config> {
    let text = |key: &str| context.get(key).and_then(Value::as_str).map(str::to_owned);
    let mut key = [0u8; 32];
    aws_lc_rs::rand::fill(&mut key).map_err(|_| anyhow::anyhow!("no random numbers"))?;
    let mut oauth = toml::Table::new();
    if let Some(client_id) = text("client_id") {
        oauth.insert("client_id".into(), client_id.into());
    }
    if let Some(secret) = text("client_secret") {
        oauth.insert("client_secret".into(), secret.into());
    }
    if let Some(pem) = text("private_key_pem") {
        oauth.insert("private_key".into(), pem.into());
        if let Some(algorithm) = text("signing_algorithm") {
            oauth.insert("signing_algorithm".into(), algorithm.into());
        }
    }
    if scenario.contains("client-credentials") {
        oauth.insert("grant".into(), "client_credentials".into());
    }
    let upstream: toml::Table = toml::toml! {
        transport = "streamable_http"
        session = "shared"
        connect_timeout_seconds = 10
        restart = { delay_ms = 200, max_delay_ms = 1000 }
    };
    let mut upstream = upstream;
    upstream.insert("url".into(), url.into());
    upstream.insert("oauth".into(), oauth.into());
    let mut upstreams = toml::Table::new();
    upstreams.insert(UPSTREAM.into(), upstream.into());
    let mut oauth_settings = toml::Table::new();
    oauth_settings.insert("state_dir".into(), state_dir.display().to_string().into());
    oauth_settings.insert(
        "key".into(),
        base64::engine::general_purpose::STANDARD.encode(key).into(),
    );
    oauth_settings.insert("client_metadata_url".into(), METADATA_URL.into());
    let mut catalog = toml::Table::new();
    catalog.insert("prefix_mode".into(), "never".into());
    let mut root = toml::Table::new();
    root.insert("catalog".into(), catalog.into());
    root.insert("oauth".into(), oauth_settings.into());
    root.insert("upstreams".into(), upstreams.into());
    let path = PathBuf::from("conformance-client.toml");
    Ok(config::parse_str(
        &path,
        &root.to_string(),
        &config::ProcessVars,
    )?)
}

/// Waits until the upstream is ready, authorizing whenever it asks.
async fn until_ready(upstream: &Upstream) -> anyhow::Result<()> {
    let mut authorized = 0;
    loop {
        let status = upstream.health().status();
        match status.state {
            UpstreamState::Ready => return Ok(()),
            UpstreamState::Authenticating => {
                if authorized == MAX_AUTHORIZATIONS {
                    bail!("the upstream still wants authorization after {authorized} tries");
                }
                if let Some(url) = &status.authorization_url {
                    authorized += 1;
                    browse(url).await?;
                }
            }
            UpstreamState::Failed if status.retries >= 3 => {
                bail!(
                    "the upstream failed: {}",
                    status.last_error.as_deref().unwrap_or("?")
                );
            }
            _ => {}
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Plays the user's browser: follows the authorization link (the gateway's connect page,
/// which binds this browser with a cookie and redirects to the authorization endpoint), whose
/// answer redirects to the gateway's callback, and follows that with the gateway's cookie.
async fn browse(url: &str) -> anyhow::Result<()> {
    let browser = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    let gateway = reqwest::Url::parse(url)?.origin();
    let mut cookies: Vec<String> = Vec::new();
    let mut next = url.to_owned();
    for _ in 0..MAX_REDIRECTS {
        let target = reqwest::Url::parse(&next)?;
        let mut request = browser.get(target.clone());
        if target.origin() == gateway && !cookies.is_empty() {
            request = request.header(reqwest::header::COOKIE, cookies.join("; "));
        }
        let answer = request.send().await?;
        if target.origin() == gateway {
            cookies.extend(
                answer
                    .headers()
                    .get_all(reqwest::header::SET_COOKIE)
                    .iter()
                    .filter_map(|c| c.to_str().ok()?.split(';').next().map(str::to_owned)),
            );
        }
        let status = answer.status();
        if !status.is_redirection() {
            if status.is_success() {
                return Ok(());
            }
            let page = answer.text().await.unwrap_or_default();
            bail!("{target} answered {status}: {page}");
        }
        let location = answer
            .headers()
            .get(reqwest::header::LOCATION)
            .and_then(|l| l.to_str().ok())
            .with_context(|| format!("{target} answered {status} without a Location"))?;
        next = target.join(location)?.to_string();
    }
    bail!("more than {MAX_REDIRECTS} redirects from {url}")
}

/// Lists the tools through the gateway and calls the first, authorizing where asked to.
async fn use_tools(endpoint: &str) -> anyhow::Result<()> {
    let mut capabilities = ClientCapabilities::default();
    capabilities.elicitation =
        Some(ElicitationCapability::new().with_url(UrlElicitationCapability::default()));
    let client = ClientConfig::new(
        capabilities,
        Implementation::new("switchyard-conformance-client", env!("CARGO_PKG_VERSION")),
    )
    .serve(StreamableHttpClientTransport::from_uri(endpoint.to_owned()))
    .await
    .context("connecting to the gateway")?;
    let tools = client.list_all_tools().await?;
    let tool = tools.first().context("the upstream lists no tools")?;
    let mut authorized = 0;
    loop {
        let params = CallToolRequestParams::new(tool.name.clone());
        match client.call_tool(params).await {
            Ok(_) => break,
            Err(rmcp::ServiceError::McpError(error))
                if error.code == URL_ELICITATION_REQUIRED && authorized < MAX_AUTHORIZATIONS =>
            {
                let url = error
                    .data
                    .as_ref()
                    .and_then(|d| d.pointer("/elicitations/0/url"))
                    .and_then(Value::as_str)
                    .context("an authorization request without a URL")?;
                authorized += 1;
                browse(url).await?;
            }
            Err(error) => bail!("calling `{}`: {error}", tool.name),
        }
    }
    client.cancel().await?;
    Ok(())
}
