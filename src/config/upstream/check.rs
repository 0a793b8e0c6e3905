//! Checking one `[upstreams.NAME]` table: its name, transport (and the keys that fit it),
//! session mode, and the policy (timeouts, failure handling, limits) it inherits or sets.

use std::{collections::HashMap, path::PathBuf, time::Duration};

use url::Url;

use super::{
    Discovery, FailureMode, HttpConfig, HttpProtocol, PolicyView, RawUpstream, RestartPolicy,
    SessionMode, StdioConfig, TransportConfig, UpstreamConfig, UpstreamPolicy,
};
use crate::config::keys::{Checker, Entries, key_segment, key_under};
use crate::names::UpstreamName;

pub(super) const DEFAULT_MAX_PROCESSES: u32 = 16;

/// The policy an upstream inherits when `[upstream_defaults]` says nothing.
pub fn default_policy() -> UpstreamPolicy {
    UpstreamPolicy {
        connect_timeout: Duration::from_secs(30),
        discovery_timeout: Duration::from_secs(30),
        tool_timeout: Duration::from_secs(120),
        tool_timeouts: HashMap::new(),
        max_tool_timeout: Duration::from_secs(30 * 60),
        failure_mode: FailureMode::Open,
        restart: RestartPolicy {
            max_attempts: None,
            delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(30),
        },
        max_concurrent_requests: None,
        max_queued_requests: 100,
        idle_timeout: None,
        health_interval: Duration::from_secs(15),
        health_timeout: Duration::from_secs(10),
        stream_idle_timeout: Duration::from_secs(120),
    }
}

impl Checker<'_> {
    /// The policy of the table at `key`, falling back to `inherited` for what it leaves out.
    pub(in crate::config) fn policy(
        &mut self,
        key: &str,
        raw: PolicyView<'_>,
        inherited: &UpstreamPolicy,
    ) -> UpstreamPolicy {
        let at = |field: &str| format!("{key}.{field}");
        let tool_timeout = self.seconds(
            &at("default_tool_timeout_seconds"),
            raw.default_tool_timeout_seconds,
            inherited.tool_timeout,
        );
        let max_tool_timeout = self.seconds(
            &at("max_tool_timeout_seconds"),
            raw.max_tool_timeout_seconds,
            inherited.max_tool_timeout,
        );
        let set_here =
            raw.default_tool_timeout_seconds.is_some() || raw.max_tool_timeout_seconds.is_some();
        if set_here && tool_timeout > max_tool_timeout {
            self.problem(
                at("default_tool_timeout_seconds"),
                longer_than_max(tool_timeout, max_tool_timeout),
            );
        }
        let failure_mode = match raw.failure_mode {
            None => inherited.failure_mode,
            Some("open") => FailureMode::Open,
            Some("closed") => FailureMode::Closed,
            Some(other) => {
                self.problem(
                    at("failure_mode"),
                    format!("`{other}` is not one of `open`, `closed`"),
                );
                inherited.failure_mode
            }
        };
        let max_concurrent_requests = match raw.max_concurrent_requests {
            None => inherited.max_concurrent_requests,
            Some(0) => None,
            Some(n) => Some(n as usize),
        };
        UpstreamPolicy {
            connect_timeout: self.seconds(
                &at("connect_timeout_seconds"),
                raw.connect_timeout_seconds,
                inherited.connect_timeout,
            ),
            discovery_timeout: self.seconds(
                &at("discovery_timeout_seconds"),
                raw.discovery_timeout_seconds,
                inherited.discovery_timeout,
            ),
            tool_timeout,
            tool_timeouts: inherited.tool_timeouts.clone(),
            max_tool_timeout,
            failure_mode,
            restart: self.restart(&at("restart"), raw, inherited.restart),
            max_concurrent_requests,
            max_queued_requests: raw
                .max_queued_requests
                .map_or(inherited.max_queued_requests, |n| n as usize),
            idle_timeout: match raw.idle_timeout_seconds {
                None => inherited.idle_timeout,
                Some(s) => Some(self.seconds(&at("idle_timeout_seconds"), Some(s), Duration::ZERO)),
            },
            health_interval: self.seconds(
                &at("health_interval_seconds"),
                raw.health_interval_seconds,
                inherited.health_interval,
            ),
            health_timeout: self.seconds(
                &at("health_timeout_seconds"),
                raw.health_timeout_seconds,
                inherited.health_timeout,
            ),
            stream_idle_timeout: self.seconds(
                &at("stream_idle_timeout_seconds"),
                raw.stream_idle_timeout_seconds,
                inherited.stream_idle_timeout,
            ),
        }
    }

    fn restart(
        &mut self,
        key: &str,
        raw: PolicyView<'_>,
        inherited: RestartPolicy,
    ) -> RestartPolicy {
        let Some(raw) = raw.restart else {
            return inherited;
        };
        let delay = raw.delay_ms.map_or(inherited.delay, Duration::from_millis);
        let max_delay = raw
            .max_delay_ms
            .map_or(inherited.max_delay, Duration::from_millis);
        if delay.is_zero() {
            self.problem(format!("{key}.delay_ms"), "must be at least 1");
        }
        if max_delay < delay {
            self.problem(
                format!("{key}.max_delay_ms"),
                "must not be shorter than delay_ms",
            );
        }
        RestartPolicy {
            max_attempts: match raw.max_attempts {
                None => inherited.max_attempts,
                Some(0) => None,
                Some(n) => Some(n),
            },
            delay,
            max_delay,
        }
    }

    pub(in crate::config) fn upstreams(
        &mut self,
        raw: &Entries<RawUpstream>,
        base: &str,
        defaults: &UpstreamPolicy,
    ) -> Vec<UpstreamConfig> {
        // A file that is only a map of servers has them at the top (`base` is empty).
        for name in &raw.duplicates {
            self.problem(
                key_under(base, name),
                "this upstream is defined more than once",
            );
        }
        let mut upstreams = Vec::new();
        for (name, upstream) in raw.iter() {
            let key = key_under(base, name);
            let checked = self.upstream(&key, name, upstream, defaults);
            if let Some(checked) = checked
                && upstream.enabled != Some(false)
            {
                upstreams.push(checked);
            }
        }
        upstreams
    }

    fn upstream(
        &mut self,
        key: &str,
        name: &str,
        raw: &RawUpstream,
        defaults: &UpstreamPolicy,
    ) -> Option<UpstreamConfig> {
        let name = UpstreamName::new(name)
            .map_err(|reason| self.problem(key, reason))
            .ok();
        let transport = self.transport(key, raw)?;
        let session = match raw.session.as_deref() {
            None => match transport {
                TransportConfig::Stdio(_) => SessionMode::Shared,
                TransportConfig::Http(_) => SessionMode::PerClient,
            },
            Some("shared") => SessionMode::Shared,
            Some("per_client") => SessionMode::PerClient,
            Some(other) => {
                self.problem(
                    format!("{key}.session"),
                    format!("`{other}` is not one of `shared`, `per_client`"),
                );
                SessionMode::Shared
            }
        };
        let discovery = self.discovery(key, raw, &transport);
        let mut policy = self.policy(key, raw.policy(), defaults);
        let timeouts_key = format!("{key}.tool_timeout_seconds");
        for dup in raw.tool_timeout_seconds.iter().flat_map(|t| &t.duplicates) {
            self.problem(
                format!("{timeouts_key}.{}", key_segment(dup)),
                "is given more than once",
            );
        }
        for (tool, seconds) in raw.tool_timeout_seconds.iter().flat_map(Entries::iter) {
            let tool_key = format!("{timeouts_key}.{}", key_segment(tool));
            let before = self.problem_count();
            let timeout = self.seconds(&tool_key, Some(*seconds), policy.tool_timeout);
            if self.problem_count() == before && timeout > policy.max_tool_timeout {
                self.problem(tool_key, longer_than_max(timeout, policy.max_tool_timeout));
            }
            policy.tool_timeouts.insert(tool.to_owned(), timeout);
        }
        let roots = self.roots(key, raw.roots.as_deref().unwrap_or_default());
        let items = self.item_rules(
            key,
            raw.validate_arguments,
            raw.pin,
            (raw.cache.as_ref(), raw.tool_cache.as_ref()),
            raw.audit_arguments.as_deref(),
            (raw.inline_resources, raw.inline_max_bytes),
        );
        Some(UpstreamConfig {
            name: name?,
            transport,
            session,
            discovery,
            roots,
            probe_client_features: raw.probe_client_features.unwrap_or(true),
            policy,
            items,
        })
    }

    /// `roots`: URIs (`file:///…`), or absolute paths made `file://` URIs.
    fn roots(&mut self, key: &str, raw: &[String]) -> Vec<String> {
        let mut roots = Vec::with_capacity(raw.len());
        for (n, text) in raw.iter().enumerate() {
            let root_key = format!("{key}.roots[{n}]");
            let Some(text) = self.expand(&root_key, text) else {
                continue;
            };
            let uri = if text.starts_with('/') {
                url::Url::from_file_path(&text).map_err(|()| "is not an absolute path".to_owned())
            } else {
                url::Url::parse(&text).map_err(|error| {
                    format!("is not a URI (`file:///path`) or an absolute path: {error}")
                })
            };
            match uri {
                Ok(uri) => roots.push(uri.to_string()),
                Err(reason) => self.problem(root_key, reason),
            }
        }
        roots
    }

    /// `discovery`: per user only where connections are (OAuth with users authorizing, or
    /// headers naming the user); whether users authenticate at all is checked with `[auth]`.
    fn discovery(
        &mut self,
        key: &str,
        raw: &RawUpstream,
        transport: &TransportConfig,
    ) -> Discovery {
        match raw.discovery.as_deref() {
            None | Some("shared") => Discovery::Shared,
            Some("per_user") => {
                let personal = matches!(transport, TransportConfig::Http(http)
                    if (http.oauth.enabled && !http.oauth.is_machine())
                        || !http.user_headers.is_empty());
                if !personal {
                    self.problem(
                        format!("{key}.discovery"),
                        "`per_user` needs an upstream that each user reaches with their own \
                         credentials: OAuth (not client_credentials) or headers with \
                         `${claim:…}`",
                    );
                }
                Discovery::PerUser
            }
            Some(other) => {
                self.problem(
                    format!("{key}.discovery"),
                    format!("`{other}` is not one of `shared`, `per_user`"),
                );
                Discovery::Shared
            }
        }
    }

    /// Picks the transport (explicit, or implied by `command` / `url`) and checks its keys.
    fn transport(&mut self, key: &str, raw: &RawUpstream) -> Option<TransportConfig> {
        let kind_key = format!("{key}.{}", raw.transport_key.unwrap_or("transport"));
        let kind = match (raw.transport.as_deref(), &raw.command, &raw.url) {
            (Some(kind), _, _) => kind,
            (None, Some(_), None) => "stdio",
            (None, None, Some(_)) => "auto",
            (None, Some(_), Some(_)) => {
                self.problem(
                    key,
                    "has both `command` and `url`; set `transport` to choose",
                );
                return None;
            }
            (None, None, None) => {
                self.problem(
                    key,
                    "needs `command` (a local stdio server) or `url` (a remote server)",
                );
                return None;
            }
        };
        let protocol = match kind {
            "stdio" => return self.stdio(key, raw).map(TransportConfig::Stdio),
            "streamable_http" => HttpProtocol::StreamableHttp,
            "sse" => HttpProtocol::Sse,
            "auto" => HttpProtocol::Auto,
            other => {
                self.problem(
                    kind_key,
                    format!(
                        "`{other}` is not a supported transport \
                         (`stdio`, `streamable_http`, `sse`, `auto`)"
                    ),
                );
                return None;
            }
        };
        self.http(key, kind, raw, protocol)
            .map(TransportConfig::Http)
    }

    fn not_for(&mut self, key: &str, present: &[(&str, bool)], transport: &str) {
        for (field, is_set) in present {
            if *is_set {
                self.problem(
                    format!("{key}.{field}"),
                    format!("does not apply to transport `{transport}`"),
                );
            }
        }
    }

    fn stdio(&mut self, key: &str, raw: &RawUpstream) -> Option<StdioConfig> {
        self.not_for(
            key,
            &[
                ("url", raw.url.is_some()),
                ("headers", raw.headers.is_some()),
                ("forward_headers", raw.forward_headers.is_some()),
                ("rename_headers", raw.rename_headers.is_some()),
                ("oauth", raw.oauth.is_some()),
            ],
            "stdio",
        );
        let Some(command) = raw.command.as_deref() else {
            self.problem(key, "transport `stdio` needs `command`");
            return None;
        };
        let command = self
            .expand(&format!("{key}.command"), command)
            .unwrap_or_default();
        if command.trim().is_empty() && raw.command.as_deref().is_some_and(|c| !c.contains('$')) {
            self.problem(format!("{key}.command"), "is empty");
        }
        let args = raw
            .args
            .iter()
            .flatten()
            .enumerate()
            .map(|(i, arg)| {
                self.expand(&format!("{key}.args[{i}]"), arg)
                    .unwrap_or_default()
            })
            .collect();
        let env = self.string_map(&format!("{key}.env"), raw.env.as_ref());
        for (name, _) in &env {
            if name.is_empty() || name.contains(['=', '\0']) {
                self.problem(
                    format!("{key}.env.{}", key_segment(name)),
                    "is not a valid environment variable name",
                );
            }
        }
        let inherit_env = raw.inherit_env.clone().unwrap_or_default();
        for (i, name) in inherit_env.iter().enumerate() {
            let bare = name.strip_suffix('*').unwrap_or(name);
            let valid =
                !bare.is_empty() && bare.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !valid {
                self.problem(
                    format!("{key}.inherit_env[{i}]"),
                    format!("`{name}` is not a variable name (or a prefix ending in `*`)"),
                );
            }
        }
        let cwd = raw.cwd.as_deref().map(|cwd| {
            let cwd = PathBuf::from(self.expand(&format!("{key}.cwd"), cwd).unwrap_or_default());
            if cwd.is_relative() {
                self.base_dir.join(cwd)
            } else {
                cwd
            }
        });
        let max_processes = raw.max_processes.unwrap_or(DEFAULT_MAX_PROCESSES);
        if max_processes == 0 {
            self.problem(format!("{key}.max_processes"), "must be at least 1");
        }
        Some(StdioConfig {
            command,
            args,
            env,
            inherit_env,
            cwd,
            max_processes: max_processes as usize,
            sandbox: raw.sandbox.as_ref().map(|raw| self.sandbox(key, raw)),
        })
    }

    fn http(
        &mut self,
        key: &str,
        kind: &str,
        raw: &RawUpstream,
        protocol: HttpProtocol,
    ) -> Option<HttpConfig> {
        self.not_for(
            key,
            &[
                ("command", raw.command.is_some()),
                ("args", raw.args.is_some()),
                ("env", raw.env.is_some()),
                ("inherit_env", raw.inherit_env.is_some()),
                ("cwd", raw.cwd.is_some()),
                ("max_processes", raw.max_processes.is_some()),
                ("sandbox", raw.sandbox.is_some()),
            ],
            kind,
        );
        let Some(url) = raw.url.as_deref() else {
            self.problem(key, format!("transport `{kind}` needs `url`"));
            return None;
        };
        let url_key = format!("{key}.url");
        let url = self.expand(&url_key, url)?;
        let url = match Url::parse(&url) {
            Ok(url) if matches!(url.scheme(), "http" | "https") && url.has_host() => Some(url),
            Ok(_) => {
                self.problem(
                    &url_key,
                    format!("`{url}` must be an http:// or https:// URL"),
                );
                None
            }
            Err(e) => {
                self.problem(&url_key, format!("`{url}` is not a valid URL: {e}"));
                None
            }
        };
        let (headers, user_headers) = self.headers(&format!("{key}.headers"), raw.headers.as_ref());
        let forward_headers = self.forward_headers(key, raw, &headers, &user_headers);
        let oauth = self.upstream_oauth(key, raw.oauth.as_ref());
        Some(HttpConfig {
            url: url?,
            headers,
            user_headers,
            forward_headers,
            protocol,
            oauth,
        })
    }

    pub(in crate::config) fn string_map(
        &mut self,
        key: &str,
        raw: Option<&Entries<String>>,
    ) -> Vec<(String, String)> {
        let Some(raw) = raw else {
            return Vec::new();
        };
        for dup in &raw.duplicates {
            self.problem(
                format!("{key}.{}", key_segment(dup)),
                "is given more than once",
            );
        }
        raw.iter()
            .map(|(name, value)| {
                let value = self
                    .expand(&format!("{key}.{}", key_segment(name)), value)
                    .unwrap_or_default();
                (name.to_owned(), value)
            })
            .collect()
    }
}

fn longer_than_max(timeout: Duration, max: Duration) -> String {
    format!(
        "{}s is longer than max_tool_timeout_seconds ({}s)",
        timeout.as_secs_f64(),
        max.as_secs_f64()
    )
}
