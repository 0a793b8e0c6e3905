//! The configuration as written: serde structures for the TOML file, before validation.
//!
//! Everything is optional and loosely typed (strings for enums, floats for seconds) so that
//! `validate` can report every problem at once with its key path, instead of stopping at the
//! first one. Unknown keys are collected by `serde_ignored` in `load`, not rejected here.

use serde::Deserialize;

pub use super::keys::Entries;
use super::oauth::{RawOAuth, RawUpstreamOAuth};

/// The whole file.
#[derive(Debug, Default, Deserialize)]
pub struct RawConfig {
    #[serde(default)]
    pub server: RawServer,
    #[serde(default)]
    pub catalog: RawCatalog,
    #[serde(default)]
    pub upstream_defaults: RawUpstreamDefaults,
    #[serde(default)]
    pub upstreams: Entries<RawUpstream>,
    #[serde(default)]
    pub oauth: RawOAuth,
    #[serde(default)]
    pub admin: RawAdmin,
    pub auth: Option<super::auth::RawAuth>,
    pub limits: Option<super::limits::RawLimits>,
    pub policy: Option<Vec<super::access::RawRule>>,
    pub endpoints: Option<Entries<super::access::RawEndpoint>>,
    pub store: Option<super::store::RawStore>,
}

/// `[admin]`: the operators' listener (API, status page, metrics).
#[derive(Debug, Default, Deserialize)]
pub struct RawAdmin {
    pub enabled: Option<bool>,
    pub listen: Option<String>,
    pub allowed_hosts: Option<Vec<String>>,
    pub token: Option<String>,
    pub allow_commands: Option<bool>,
    pub metrics_on_main_listener: Option<bool>,
    pub overlay_file: Option<String>,
}

/// `[server]`: the downstream endpoint.
#[derive(Debug, Default, Deserialize)]
pub struct RawServer {
    pub listen: Option<String>,
    pub endpoint_path: Option<String>,
    pub allowed_hosts: Option<Vec<String>>,
    pub allowed_origins: Option<Vec<String>>,
    pub session_idle_timeout_seconds: Option<f64>,
    pub max_request_body_bytes: Option<u64>,
    pub client_timeout_seconds: Option<f64>,
    pub shutdown_grace_seconds: Option<f64>,
    pub watch_config: Option<bool>,
    pub passthrough_listen: Option<String>,
    pub upgrade_socket: Option<String>,
}

/// `[catalog]`: how upstream names are merged.
#[derive(Debug, Default, Deserialize)]
pub struct RawCatalog {
    pub prefix_mode: Option<String>,
    pub separator: Option<String>,
    pub page_size: Option<u64>,
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
