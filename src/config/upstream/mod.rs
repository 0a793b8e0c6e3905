//! One `[upstreams.NAME]` table (and `[upstream_defaults]`): as written (`Raw*`, loosely typed so
//! that every problem is reported at once), checked (`check`), and as the runtime uses it.

mod check;
mod sandbox;

use std::{collections::HashMap, path::PathBuf, time::Duration};

use http::{HeaderName, HeaderValue};
use schemars::JsonSchema;
use serde::Deserialize;
use url::Url;

use super::{
    UserHeader,
    items::{INLINE_BYTES, INLINE_BYTES_MOST, ItemRules, RawCache},
    keys::Entries,
    kinds::{Expanded, Seconds},
    upstream_oauth::{RawUpstreamOAuth, UpstreamOAuth},
};
use crate::names::UpstreamName;

pub(super) use check::default_policy;
pub use sandbox::{RawSandbox, SandboxConfig};

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
    /// What the process may touch, where it is confined.
    pub sandbox: Option<SandboxConfig>,
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
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[schemars(rename = "UpstreamDefaults")]
pub struct RawUpstreamDefaults {
    /// How long starting an upstream and its handshake may take (for `auto`, the probe
    /// too). Seconds.
    #[schemars(with = "Option<Seconds>", extend("default" = default_policy().connect_timeout.as_secs()))]
    pub connect_timeout_seconds: Option<f64>,
    /// How long listing an upstream's tools, prompts, resources and templates may take.
    /// Seconds.
    #[schemars(with = "Option<Seconds>", extend("default" = default_policy().discovery_timeout.as_secs()))]
    pub discovery_timeout_seconds: Option<f64>,
    /// How long a forwarded request (`tools/call`, `prompts/get`, `resources/read`, …) may
    /// wait for its answer; each progress notification starts the wait again. Seconds.
    #[schemars(with = "Option<Seconds>", extend("default" = default_policy().tool_timeout.as_secs()))]
    pub default_tool_timeout_seconds: Option<f64>,
    /// The longest a forwarded request may take however much progress it reports.
    /// Seconds.
    #[schemars(with = "Option<Seconds>", extend("default" = default_policy().max_tool_timeout.as_secs()))]
    pub max_tool_timeout_seconds: Option<f64>,
    /// While an upstream is down: `open` hides its tools, prompts and resources until it is
    /// back; `closed` keeps them listed, and using them fails naming the upstream.
    #[schemars(extend("enum" = ["open", "closed"], "default" = "open"))]
    pub failure_mode: Option<String>,
    /// How a failed upstream is retried (a stdio server restarted, an HTTP one reconnected).
    #[schemars(extend("default" = { "max_attempts": 0, "delay_ms": 1000, "max_delay_ms": 30000 }))]
    pub restart: Option<RawRestart>,
    /// Requests in flight to one upstream at once; beyond it, up to `max_queued_requests`
    /// wait. 0: no limit.
    #[schemars(extend("default" = 0))]
    pub max_concurrent_requests: Option<u32>,
    /// Requests that may wait for a free place before more are refused (overload error).
    #[schemars(extend("default" = default_policy().max_queued_requests))]
    pub max_queued_requests: Option<u32>,
    /// A per-client upstream session (for stdio, a process) unused this long is closed.
    /// Seconds. Default: kept until the client session ends.
    #[schemars(with = "Option<Seconds>")]
    pub idle_timeout_seconds: Option<f64>,
    /// How often a ready upstream is pinged while nothing else shows it is alive. Seconds.
    #[schemars(with = "Option<Seconds>", extend("default" = default_policy().health_interval.as_secs()))]
    pub health_interval_seconds: Option<f64>,
    /// The longest a health check may take; also, with calls in flight, how long the
    /// upstream may go without finishing one before it is checked. Seconds.
    #[schemars(with = "Option<Seconds>", extend("default" = default_policy().health_timeout.as_secs()))]
    pub health_timeout_seconds: Option<f64>,
    /// A stream from an HTTP upstream that brings nothing this long has stalled: it is
    /// resumed where the upstream allows it, else ended. Seconds.
    #[schemars(with = "Option<Seconds>", extend("default" = default_policy().stream_idle_timeout.as_secs()))]
    pub stream_idle_timeout_seconds: Option<f64>,
}

/// `restart = { … }`: how a failed upstream is retried: the first wait is `delay_ms`, doubling
/// per failed attempt up to `max_delay_ms`.
#[derive(Debug, Default, Clone, Deserialize, JsonSchema)]
#[schemars(rename = "Restart")]
pub struct RawRestart {
    /// Failures in a row before Switchyard gives up on the upstream. 0: never gives up.
    #[schemars(extend("default" = 0))]
    pub max_attempts: Option<u32>,
    /// The first wait after a failure. Milliseconds, at least 1.
    #[schemars(range(min = 1), extend("default" = default_policy().restart.delay.as_millis() as u64))]
    pub delay_ms: Option<u64>,
    /// The longest wait between attempts, not shorter than `delay_ms`. Milliseconds.
    #[schemars(range(min = 1), extend("default" = default_policy().restart.max_delay.as_millis() as u64))]
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
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[schemars(rename = "Upstream")]
pub struct RawUpstream {
    /// How the upstream is reached: `stdio` (a local program), `streamable_http`, `sse` (the
    /// legacy HTTP+SSE transport of 2024-11-05) or `auto` (streamable HTTP if the server
    /// speaks it, else SSE). Default: `stdio` with `command`, `auto` with `url`.
    #[schemars(extend("enum" = ["stdio", "streamable_http", "sse", "auto"]))]
    pub transport: Option<String>,
    /// The key `transport` was read from, for problems (the JSON form calls it `type`).
    #[serde(skip)]
    pub transport_key: Option<&'static str>,
    /// `false` leaves the upstream out without deleting it.
    #[schemars(extend("default" = true))]
    pub enabled: Option<bool>,
    // stdio
    /// stdio: the program to start (looked up on `PATH`); its stderr goes to the log.
    #[schemars(with = "Option<Expanded>")]
    pub command: Option<String>,
    /// stdio: the program's arguments.
    #[schemars(with = "Option<Vec<Expanded>>")]
    pub args: Option<Vec<String>>,
    /// stdio: the program's environment variables. Besides them it gets only those
    /// `inherit_env` names and a few every program expects (`PATH`, `HOME`, `LANG`, …).
    #[schemars(with = "Option<Entries<Expanded>>")]
    pub env: Option<Entries<String>>,
    /// stdio: variables of the gateway's environment passed on as they are: names, or
    /// prefixes ending in `*`.
    #[schemars(extend("items" = { "type": "string", "pattern": "^[A-Za-z0-9_]+\\*?$" }))]
    pub inherit_env: Option<Vec<String>>,
    /// stdio: the program's working directory, relative to this file's directory.
    #[schemars(with = "Option<Expanded>")]
    pub cwd: Option<String>,
    /// stdio with `session = "per_client"`: the most client processes alive at once.
    /// Processes.
    #[schemars(range(min = 1), extend("default" = check::DEFAULT_MAX_PROCESSES))]
    pub max_processes: Option<u32>,
    /// stdio: confine the program to what it is given (Linux: Landlock, seccomp, namespaces,
    /// resource limits).
    pub sandbox: Option<RawSandbox>,
    // streamable_http, sse, auto
    /// HTTP: the server's MCP endpoint (for `sse`, its event-stream URL), `http://` or
    /// `https://`.
    #[schemars(with = "Option<Expanded>")]
    pub url: Option<String>,
    /// HTTP: headers sent with every request. Values may name the user's validated token
    /// claims, `${claim:NAME}` (the header is left out when the user has no such claim).
    #[schemars(with = "Option<Entries<Expanded>>")]
    pub headers: Option<Entries<String>>,
    /// HTTP: headers of the client's request passed on to this upstream (never its
    /// credentials).
    pub forward_headers: Option<Vec<String>>,
    /// HTTP: client headers passed on under another name: `{ CLIENT_NAME = "UPSTREAM_NAME" }`.
    pub rename_headers: Option<Entries<String>>,
    /// HTTP: how Switchyard authorizes itself to this upstream.
    pub oauth: Option<RawUpstreamOAuth>,
    // all
    /// `shared`: all clients use one upstream session; `per_client`: each client session
    /// gets its own. Default: `shared` for stdio, `per_client` for HTTP.
    #[schemars(extend("enum" = ["shared", "per_client"]))]
    pub session: Option<String>,
    /// Whose lists clients see: `shared`, one discovery for everyone; `per_user`, each user's
    /// own (an OAuth or `${claim:…}` upstream, with `[auth]`).
    #[schemars(extend("enum" = ["shared", "per_user"], "default" = "shared"))]
    pub discovery: Option<String>,
    /// What the upstream is told when it asks for roots on its own account: URIs or absolute
    /// paths.
    #[schemars(with = "Option<Vec<Expanded>>", extend("default" = []))]
    pub roots: Option<Vec<String>>,
    /// Timeouts of single tools, by the upstream's own tool name, over
    /// `default_tool_timeout_seconds`. Seconds.
    #[schemars(with = "Option<Entries<Seconds>>")]
    pub tool_timeout_seconds: Option<Entries<f64>>,
    /// Check tool arguments against the tool's input schema (a call that breaks it gets
    /// -32602).
    #[schemars(extend("default" = true))]
    pub validate_arguments: Option<bool>,
    /// Pin this upstream's tool definitions. Default: `[catalog] pin`.
    pub pin: Option<bool>,
    /// Cache every tool call and resource read of this upstream.
    pub cache: Option<RawCache>,
    /// Cache calls of single tools, by the upstream's own tool name, over `cache`.
    pub tool_cache: Option<Entries<RawCache>>,
    /// How its calls' arguments appear in audit records: `none`, `sha256` or `full`.
    /// Default: `[audit] arguments`.
    #[schemars(extend("enum" = ["none", "sha256", "full"]))]
    pub audit_arguments: Option<String>,
    /// Read the resources its tool results link to, as the caller would, and inline them for
    /// clients that cannot follow links.
    #[schemars(extend("default" = false))]
    pub inline_resources: Option<bool>,
    /// Find out which tools the server lists only to clients that declare a capability
    /// (listing them again without each), so each client is listed the tools meant for it.
    #[schemars(extend("default" = true))]
    pub probe_client_features: Option<bool>,
    /// With `inline_resources = true`: how much of linked resources one tool result may have
    /// inlined. Bytes, at most 16 MiB.
    #[schemars(range(min = 1, max = INLINE_BYTES_MOST), extend("default" = INLINE_BYTES))]
    pub inline_max_bytes: Option<u64>,
    // as in [upstream_defaults]
    /// How long starting an upstream and its handshake may take (for `auto`, the probe
    /// too). Seconds.
    /// Default: `[upstream_defaults]`'s.
    #[schemars(with = "Option<Seconds>")]
    pub connect_timeout_seconds: Option<f64>,
    /// How long listing an upstream's tools, prompts, resources and templates may take.
    /// Seconds.
    /// Default: `[upstream_defaults]`'s.
    #[schemars(with = "Option<Seconds>")]
    pub discovery_timeout_seconds: Option<f64>,
    /// How long a forwarded request (`tools/call`, `prompts/get`, `resources/read`, …) may
    /// wait for its answer; each progress notification starts the wait again. Seconds.
    /// Default: `[upstream_defaults]`'s.
    #[schemars(with = "Option<Seconds>")]
    pub default_tool_timeout_seconds: Option<f64>,
    /// The longest a forwarded request may take however much progress it reports.
    /// Seconds.
    /// Default: `[upstream_defaults]`'s.
    #[schemars(with = "Option<Seconds>")]
    pub max_tool_timeout_seconds: Option<f64>,
    /// While an upstream is down: `open` hides its tools, prompts and resources until it is
    /// back; `closed` keeps them listed, and using them fails naming the upstream.
    /// Default: `[upstream_defaults]`'s.
    #[schemars(extend("enum" = ["open", "closed"]))]
    pub failure_mode: Option<String>,
    /// How a failed upstream is retried (a stdio server restarted, an HTTP one reconnected).
    /// Default: `[upstream_defaults]`'s.
    pub restart: Option<RawRestart>,
    /// Requests in flight to one upstream at once; beyond it, up to `max_queued_requests`
    /// wait. 0: no limit.
    /// Default: `[upstream_defaults]`'s.
    pub max_concurrent_requests: Option<u32>,
    /// Requests that may wait for a free place before more are refused (overload error).
    /// Default: `[upstream_defaults]`'s.
    pub max_queued_requests: Option<u32>,
    /// A per-client upstream session (for stdio, a process) unused this long is closed.
    /// Seconds. Default: `[upstream_defaults]`'s (unset there: kept until the client session
    /// ends).
    #[schemars(with = "Option<Seconds>")]
    pub idle_timeout_seconds: Option<f64>,
    /// How often a ready upstream is pinged while nothing else shows it is alive. Seconds.
    /// Default: `[upstream_defaults]`'s.
    #[schemars(with = "Option<Seconds>")]
    pub health_interval_seconds: Option<f64>,
    /// The longest a health check may take; also, with calls in flight, how long the
    /// upstream may go without finishing one before it is checked. Seconds.
    /// Default: `[upstream_defaults]`'s.
    #[schemars(with = "Option<Seconds>")]
    pub health_timeout_seconds: Option<f64>,
    /// A stream from an HTTP upstream that brings nothing this long has stalled: it is
    /// resumed where the upstream allows it, else ended. Seconds.
    /// Default: `[upstream_defaults]`'s.
    #[schemars(with = "Option<Seconds>")]
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
