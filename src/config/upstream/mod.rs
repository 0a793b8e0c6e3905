//! One `[upstreams.NAME]` table (and `[upstream_defaults]`): as written (`Raw*`, loosely typed so
//! that every problem is reported at once), checked (`check`), and as the runtime uses it.

mod check;

use std::{collections::HashMap, path::PathBuf, time::Duration};

use http::{HeaderName, HeaderValue};
use serde::Deserialize;
use url::Url;

use super::{
    UserHeader,
    items::{ItemRules, RawCache},
    keys::Entries,
    oauth::{RawUpstreamOAuth, UpstreamOAuth},
};
use crate::names::UpstreamName;

pub(super) use check::default_policy;

/// One upstream MCP server.
#[derive(Debug, Clone, PartialEq)]
pub struct UpstreamConfig {
    pub name: UpstreamName,
    pub transport: TransportConfig,
    pub session: SessionMode,
    /// Whose lists the clients of this upstream see.
    pub discovery: Discovery,
    /// The roots (URIs) the gateway answers `roots/list` with on connections no client's
    /// request is in flight on (its own, at start).
    pub roots: Vec<String>,
    /// Whether to find out which tools the server lists only to clients that declare a
    /// capability (see `upstream::needs`).
    pub probe_client_features: bool,
    pub policy: UpstreamPolicy,
    /// Argument checks, pinning and caching of its items.
    pub items: ItemRules,
}

/// Whose lists (tools, prompts, resources) of an upstream clients see.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Discovery {
    /// One discovery, on the upstream's shared connection, shown to everyone.
    Shared,
    /// Each user's own, discovered with their own token or headers (OAuth or `${claim:…}`
    /// upstreams where users authenticate), for servers whose lists depend on the user.
    PerUser,
}

#[derive(Debug, Clone, PartialEq)]
pub enum TransportConfig {
    Stdio(StdioConfig),
    Http(HttpConfig),
}

/// Timeouts, failure handling and limits of one upstream.
#[derive(Debug, Clone, PartialEq)]
pub struct UpstreamPolicy {
    /// Starting the upstream and its handshake.
    pub connect_timeout: Duration,
    /// Listing its tools, prompts, resources and templates.
    pub discovery_timeout: Duration,
    /// How long a call may wait for an answer (or, with progress, for the next progress).
    pub tool_timeout: Duration,
    /// Tool timeouts by the upstream's own tool name, overriding `tool_timeout`.
    pub tool_timeouts: HashMap<String, Duration>,
    /// The longest a call may take however much progress it reports.
    pub max_tool_timeout: Duration,
    pub failure_mode: FailureMode,
    pub restart: RestartPolicy,
    /// Requests in flight at once; `None` for no limit.
    pub max_concurrent_requests: Option<usize>,
    /// Requests that may wait for a free place before new ones are refused.
    pub max_queued_requests: usize,
    /// A per-client upstream session (a process, for stdio) unused this long is closed.
    pub idle_timeout: Option<Duration>,
    /// How often a ready upstream is checked (a ping) while nothing else shows it is alive.
    pub health_interval: Duration,
    /// The longest a health check may take; also, with calls in flight, how long the upstream
    /// may go without finishing one before it is checked at once.
    pub health_timeout: Duration,
    /// A stream from an HTTP upstream that brings nothing (no event, no keep-alive) this long
    /// is taken for stalled: resumed where the upstream allows it, else ended.
    pub stream_idle_timeout: Duration,
}

impl UpstreamPolicy {
    /// The timeout of `tool` (the upstream's name for it).
    pub fn tool_timeout(&self, tool: &str) -> Duration {
        self.tool_timeouts
            .get(tool)
            .copied()
            .unwrap_or(self.tool_timeout)
    }
}

/// What clients see of an upstream that is down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureMode {
    /// Its tools, prompts and resources are hidden until it is back.
    Open,
    /// They stay listed, and using them fails with an error naming the upstream.
    Closed,
}

/// How a failed upstream is retried: waits from `delay` doubling to `max_delay`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestartPolicy {
    /// Consecutive failed attempts before giving up; `None` never gives up.
    pub max_attempts: Option<u32>,
    pub delay: Duration,
    pub max_delay: Duration,
}

/// A local server started as a child process speaking newline-delimited JSON-RPC.
#[derive(Debug, Clone, PartialEq)]
pub struct StdioConfig {
    pub command: String,
    pub args: Vec<String>,
    /// The child's environment, besides the few variables every program expects
    /// (`upstream::stdio::BASE_ENV`): nothing else of the gateway's own reaches it.
    pub env: Vec<(String, String)>,
    /// Variables of the gateway's environment passed on as they are: names, or `PREFIX*`.
    pub inherit_env: Vec<String>,
    /// Working directory; relative paths were resolved against the config file's directory.
    pub cwd: Option<PathBuf>,
    /// With `session = "per_client"`: the most processes alive at once.
    pub max_processes: usize,
}

/// A remote server over HTTP.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpConfig {
    pub url: Url,
    /// Sent on every request to this upstream.
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// Sent on every request, with the user's validated claims filled in (`${claim:sub}`).
    pub user_headers: Vec<(HeaderName, UserHeader)>,
    /// Client request headers passed on to this upstream (client name, upstream name).
    pub forward_headers: Vec<(HeaderName, HeaderName)>,
    pub protocol: HttpProtocol,
    pub oauth: UpstreamOAuth,
}

/// Which HTTP transport an upstream speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpProtocol {
    /// Streamable HTTP (2025-03-26 and later).
    StreamableHttp,
    /// The legacy HTTP+SSE transport (2024-11-05): a GET event stream and POSTs.
    Sse,
    /// Streamable HTTP if the server speaks it, else legacy SSE; found out on first connect.
    Auto,
}

/// Whether downstream sessions share one upstream session or each get their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionMode {
    Shared,
    PerClient,
}

/// `[upstream_defaults]`: values every upstream inherits unless it sets its own.
#[derive(Debug, Default, Deserialize)]
pub struct RawUpstreamDefaults {
    pub connect_timeout_seconds: Option<f64>,
    pub discovery_timeout_seconds: Option<f64>,
    pub default_tool_timeout_seconds: Option<f64>,
    pub max_tool_timeout_seconds: Option<f64>,
    pub failure_mode: Option<String>,
    pub restart: Option<RawRestart>,
    pub max_concurrent_requests: Option<u32>,
    pub max_queued_requests: Option<u32>,
    pub idle_timeout_seconds: Option<f64>,
    pub health_interval_seconds: Option<f64>,
    pub health_timeout_seconds: Option<f64>,
    pub stream_idle_timeout_seconds: Option<f64>,
}

/// `restart = { … }`: how a failed upstream is retried.
#[derive(Debug, Default, Clone, Deserialize)]
pub struct RawRestart {
    pub max_attempts: Option<u32>,
    pub delay_ms: Option<u64>,
    pub max_delay_ms: Option<u64>,
}

/// The settings an upstream can inherit, whichever table they were read from.
#[derive(Clone, Copy)]
pub struct PolicyView<'a> {
    pub connect_timeout_seconds: Option<f64>,
    pub discovery_timeout_seconds: Option<f64>,
    pub default_tool_timeout_seconds: Option<f64>,
    pub max_tool_timeout_seconds: Option<f64>,
    pub failure_mode: Option<&'a str>,
    pub restart: Option<&'a RawRestart>,
    pub max_concurrent_requests: Option<u32>,
    pub max_queued_requests: Option<u32>,
    pub idle_timeout_seconds: Option<f64>,
    pub health_interval_seconds: Option<f64>,
    pub health_timeout_seconds: Option<f64>,
    pub stream_idle_timeout_seconds: Option<f64>,
}

impl RawUpstreamDefaults {
    pub fn policy(&self) -> PolicyView<'_> {
        PolicyView {
            connect_timeout_seconds: self.connect_timeout_seconds,
            discovery_timeout_seconds: self.discovery_timeout_seconds,
            default_tool_timeout_seconds: self.default_tool_timeout_seconds,
            max_tool_timeout_seconds: self.max_tool_timeout_seconds,
            failure_mode: self.failure_mode.as_deref(),
            restart: self.restart.as_ref(),
            max_concurrent_requests: self.max_concurrent_requests,
            max_queued_requests: self.max_queued_requests,
            idle_timeout_seconds: self.idle_timeout_seconds,
            health_interval_seconds: self.health_interval_seconds,
            health_timeout_seconds: self.health_timeout_seconds,
            stream_idle_timeout_seconds: self.stream_idle_timeout_seconds,
        }
    }
}

/// `[upstreams.NAME]`: one upstream server. Transport-specific keys are all here, flat, and
/// `validate` checks that each one fits the chosen transport.
#[derive(Debug, Default, Deserialize)]
pub struct RawUpstream {
    pub transport: Option<String>,
    /// The key `transport` was read from, for problems (the JSON form calls it `type`).
    #[serde(skip)]
    pub transport_key: Option<&'static str>,
    pub enabled: Option<bool>,
    // stdio
    pub command: Option<String>,
    pub args: Option<Vec<String>>,
    pub env: Option<Entries<String>>,
    pub inherit_env: Option<Vec<String>>,
    pub cwd: Option<String>,
    pub max_processes: Option<u32>,
    // streamable_http, sse, auto
    pub url: Option<String>,
    pub headers: Option<Entries<String>>,
    pub forward_headers: Option<Vec<String>>,
    pub rename_headers: Option<Entries<String>>,
    pub oauth: Option<RawUpstreamOAuth>,
    // all
    pub session: Option<String>,
    pub discovery: Option<String>,
    pub roots: Option<Vec<String>>,
    pub tool_timeout_seconds: Option<Entries<f64>>,
    pub validate_arguments: Option<bool>,
    pub pin: Option<bool>,
    pub cache: Option<RawCache>,
    pub tool_cache: Option<Entries<RawCache>>,
    pub audit_arguments: Option<String>,
    pub inline_resources: Option<bool>,
    pub probe_client_features: Option<bool>,
    pub inline_max_bytes: Option<u64>,
    // as in [upstream_defaults]
    pub connect_timeout_seconds: Option<f64>,
    pub discovery_timeout_seconds: Option<f64>,
    pub default_tool_timeout_seconds: Option<f64>,
    pub max_tool_timeout_seconds: Option<f64>,
    pub failure_mode: Option<String>,
    pub restart: Option<RawRestart>,
    pub max_concurrent_requests: Option<u32>,
    pub max_queued_requests: Option<u32>,
    pub idle_timeout_seconds: Option<f64>,
    pub health_interval_seconds: Option<f64>,
    pub health_timeout_seconds: Option<f64>,
    pub stream_idle_timeout_seconds: Option<f64>,
}

impl RawUpstream {
    /// The first key that makes this upstream run a program on the gateway's host or read
    /// its files or environment (a stdio command, or a placeholder other than `${claim:…}`),
    /// if any: what an upstream added through the admin API may do only with
    /// `[admin] allow_commands`.
    pub fn privileged_key(&self) -> Option<String> {
        if self.command.is_some()
            || self.args.is_some()
            || self.env.is_some()
            || self.inherit_env.is_some()
            || self.cwd.is_some()
            || self.transport.as_deref() == Some("stdio")
        {
            return Some("command".into());
        }
        let reads =
            |value: &Option<String>| value.as_deref().is_some_and(super::expand::reads_host);
        if reads(&self.url) {
            return Some("url".into());
        }
        if let Some((name, _)) = self
            .headers
            .iter()
            .flat_map(|headers| headers.iter())
            .find(|(_, value)| super::expand::reads_host(value))
        {
            return Some(format!("headers.{}", super::keys::key_segment(name)));
        }
        let oauth = self.oauth.as_ref()?;
        if oauth.private_key_file.is_some() {
            return Some("oauth.private_key_file".into());
        }
        [
            ("client_id", &oauth.client_id),
            ("client_secret", &oauth.client_secret),
            ("private_key", &oauth.private_key),
        ]
        .into_iter()
        .find(|(_, value)| reads(value))
        .map(|(key, _)| format!("oauth.{key}"))
    }

    pub fn policy(&self) -> PolicyView<'_> {
        PolicyView {
            connect_timeout_seconds: self.connect_timeout_seconds,
            discovery_timeout_seconds: self.discovery_timeout_seconds,
            default_tool_timeout_seconds: self.default_tool_timeout_seconds,
            max_tool_timeout_seconds: self.max_tool_timeout_seconds,
            failure_mode: self.failure_mode.as_deref(),
            restart: self.restart.as_ref(),
            max_concurrent_requests: self.max_concurrent_requests,
            max_queued_requests: self.max_queued_requests,
            idle_timeout_seconds: self.idle_timeout_seconds,
            health_interval_seconds: self.health_interval_seconds,
            health_timeout_seconds: self.health_timeout_seconds,
            stream_idle_timeout_seconds: self.stream_idle_timeout_seconds,
        }
    }
}
