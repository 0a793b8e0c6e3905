//! Raw configuration → runtime `Config`, collecting every problem with its key path.

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    str::FromStr,
    time::Duration,
};

use http::{HeaderName, HeaderValue};
use url::Url;

use super::{
    CatalogSettings, Config, HttpConfig, PrefixMode, Problem, ServerSettings, SessionMode,
    StdioConfig, TransportConfig, UpstreamConfig,
    expand::{Vars, expand},
    parse::{Parsed, key_segment},
    raw::{Entries, RawCatalog, RawServer, RawUpstream, RawUpstreamDefaults},
};
use crate::names::UpstreamName;

pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";
pub const DEFAULT_ENDPOINT_PATH: &str = "/mcp";
pub const DEFAULT_SEPARATOR: &str = "__";
const DEFAULT_SESSION_IDLE_TIMEOUT: Duration = Duration::from_secs(30 * 60);
const DEFAULT_MAX_REQUEST_BODY_BYTES: u64 = 4 * 1024 * 1024;
const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
const DEFAULT_DISCOVERY_TIMEOUT: Duration = Duration::from_secs(30);
const DEFAULT_MAX_PROCESSES: u32 = 16;
const MAX_SEPARATOR_LEN: usize = 8;
const DEFAULT_PAGE_SIZE: u64 = 500;
const MAX_PAGE_SIZE: u64 = 10_000;

/// Headers the transport sets itself; configuring them would break the protocol.
const RESERVED_HEADERS: &[&str] = &[
    "accept",
    "connection",
    "content-length",
    "content-type",
    "host",
    "last-event-id",
    "mcp-method",
    "mcp-name",
    "mcp-protocol-version",
    "mcp-session-id",
    "transfer-encoding",
];

/// Checks `parsed` and builds the runtime config, or returns every problem found.
pub fn validate(parsed: Parsed, path: &Path, vars: &dyn Vars) -> Result<Config, Vec<Problem>> {
    let Parsed {
        raw,
        upstreams_key,
        problems,
    } = parsed;
    let mut check = Checker {
        problems,
        vars,
        base_dir: path.parent().map(Path::to_path_buf).unwrap_or_default(),
    };
    let server = check.server(&raw.server);
    let catalog = check.catalog(&raw.catalog);
    let defaults = check.defaults(&raw.upstream_defaults);
    let upstreams = check.upstreams(&raw.upstreams, upstreams_key, &defaults);
    if check.problems.is_empty() {
        Ok(Config {
            source: path.to_owned(),
            server,
            catalog,
            upstreams,
        })
    } else {
        Err(check.problems)
    }
}

/// Inherited per-upstream values.
struct Defaults {
    connect_timeout: Duration,
    discovery_timeout: Duration,
}

/// Walks the raw config, recording problems and substituting defaults so checking can go on.
struct Checker<'a> {
    problems: Vec<Problem>,
    vars: &'a dyn Vars,
    base_dir: PathBuf,
}

impl Checker<'_> {
    fn problem(&mut self, key: impl Into<String>, message: impl Into<String>) {
        self.problems.push(Problem {
            key: key.into(),
            message: message.into(),
        });
    }

    /// Expands placeholders; on failure records the problem and returns `None`.
    fn expand(&mut self, key: &str, value: &str) -> Option<String> {
        expand(value, self.vars)
            .map_err(|reason| self.problem(key, reason))
            .ok()
    }

    fn seconds(&mut self, key: &str, value: Option<f64>, default: Duration) -> Duration {
        match value {
            None => default,
            Some(s) if s.is_finite() && s > 0.0 && s < 1e9 => Duration::from_secs_f64(s),
            Some(s) => {
                self.problem(
                    key,
                    format!("must be a positive number of seconds, not {s}"),
                );
                default
            }
        }
    }

    fn server(&mut self, raw: &RawServer) -> ServerSettings {
        let listen_text = raw.listen.as_deref().unwrap_or(DEFAULT_LISTEN);
        let fallback = SocketAddr::from(([127, 0, 0, 1], 8080));
        let listen = match self.expand("server.listen", listen_text) {
            Some(text) => SocketAddr::from_str(&text).unwrap_or_else(|_| {
                self.problem(
                    "server.listen",
                    format!("`{text}` is not an address like `127.0.0.1:8080` or `[::1]:8080`"),
                );
                fallback
            }),
            None => fallback,
        };
        let endpoint_path = raw
            .endpoint_path
            .clone()
            .unwrap_or_else(|| DEFAULT_ENDPOINT_PATH.into());
        if !endpoint_path.starts_with('/') || endpoint_path.len() < 2 {
            self.problem(
                "server.endpoint_path",
                format!("`{endpoint_path}` must start with `/` and name a path, like `/mcp`"),
            );
        } else if endpoint_path.contains(['?', '#', ' ']) {
            self.problem(
                "server.endpoint_path",
                "must be a plain path, without query or spaces",
            );
        }
        let max_body = raw
            .max_request_body_bytes
            .unwrap_or(DEFAULT_MAX_REQUEST_BODY_BYTES);
        if max_body < 1024 {
            self.problem("server.max_request_body_bytes", "must be at least 1024");
        }
        ServerSettings {
            listen,
            endpoint_path,
            allowed_hosts: raw
                .allowed_hosts
                .clone()
                .unwrap_or_else(|| vec!["localhost".into(), "127.0.0.1".into(), "::1".into()]),
            allowed_origins: self.origins(raw.allowed_origins.as_deref().unwrap_or_default()),
            session_idle_timeout: self.seconds(
                "server.session_idle_timeout_seconds",
                raw.session_idle_timeout_seconds,
                DEFAULT_SESSION_IDLE_TIMEOUT,
            ),
            max_request_body_bytes: usize::try_from(max_body).unwrap_or(usize::MAX),
        }
    }

    fn origins(&mut self, origins: &[String]) -> Vec<String> {
        for (i, origin) in origins.iter().enumerate() {
            let valid = origin == "null"
                || Url::parse(origin.trim_end_matches(":*"))
                    .is_ok_and(|u| u.has_host() && u.path() == "/");
            if !valid {
                self.problem(
                    format!("server.allowed_origins[{i}]"),
                    format!(
                        "`{origin}` is not an origin like `https://app.example.com`, \
                         `http://localhost:*` or `null`"
                    ),
                );
            }
        }
        origins.to_vec()
    }

    fn catalog(&mut self, raw: &RawCatalog) -> CatalogSettings {
        let prefix_mode = match raw.prefix_mode.as_deref() {
            None | Some("always") => PrefixMode::Always,
            Some("conditional") => PrefixMode::Conditional,
            Some("never") => PrefixMode::Never,
            Some(other) => {
                self.problem(
                    "catalog.prefix_mode",
                    format!("`{other}` is not one of `always`, `conditional`, `never`"),
                );
                PrefixMode::Always
            }
        };
        let separator = raw
            .separator
            .clone()
            .unwrap_or_else(|| DEFAULT_SEPARATOR.into());
        if let Err(reason) = check_separator(&separator) {
            self.problem("catalog.separator", reason);
        }
        let page_size = raw.page_size.unwrap_or(DEFAULT_PAGE_SIZE);
        if !(1..=MAX_PAGE_SIZE).contains(&page_size) {
            self.problem(
                "catalog.page_size",
                format!("must be between 1 and {MAX_PAGE_SIZE}, not {page_size}"),
            );
        }
        CatalogSettings {
            prefix_mode,
            separator,
            page_size: page_size.clamp(1, MAX_PAGE_SIZE) as usize,
        }
    }

    fn defaults(&mut self, raw: &RawUpstreamDefaults) -> Defaults {
        Defaults {
            connect_timeout: self.seconds(
                "upstream_defaults.connect_timeout_seconds",
                raw.connect_timeout_seconds,
                DEFAULT_CONNECT_TIMEOUT,
            ),
            discovery_timeout: self.seconds(
                "upstream_defaults.discovery_timeout_seconds",
                raw.discovery_timeout_seconds,
                DEFAULT_DISCOVERY_TIMEOUT,
            ),
        }
    }

    fn upstreams(
        &mut self,
        raw: &Entries<RawUpstream>,
        base: &str,
        defaults: &Defaults,
    ) -> Vec<UpstreamConfig> {
        for name in &raw.duplicates {
            self.problem(
                format!("{base}.{}", key_segment(name)),
                "this upstream is defined more than once",
            );
        }
        let mut upstreams = Vec::new();
        for (name, upstream) in raw.iter() {
            let key = format!("{base}.{}", key_segment(name));
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
        defaults: &Defaults,
    ) -> Option<UpstreamConfig> {
        let name = UpstreamName::new(name)
            .map_err(|reason| self.problem(key, reason))
            .ok();
        let transport = self.transport(key, raw)?;
        let session = match raw.session.as_deref() {
            None => match transport {
                TransportConfig::Stdio(_) => SessionMode::Shared,
                TransportConfig::StreamableHttp(_) => SessionMode::PerClient,
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
        let connect_timeout = self.seconds(
            &format!("{key}.connect_timeout_seconds"),
            raw.connect_timeout_seconds,
            defaults.connect_timeout,
        );
        let discovery_timeout = self.seconds(
            &format!("{key}.discovery_timeout_seconds"),
            raw.discovery_timeout_seconds,
            defaults.discovery_timeout,
        );
        Some(UpstreamConfig {
            name: name?,
            transport,
            session,
            connect_timeout,
            discovery_timeout,
        })
    }

    /// Picks the transport (explicit, or implied by `command` / `url`) and checks its keys.
    fn transport(&mut self, key: &str, raw: &RawUpstream) -> Option<TransportConfig> {
        let kind_key = format!("{key}.{}", raw.transport_key.unwrap_or("transport"));
        let kind = match (raw.transport.as_deref(), &raw.command, &raw.url) {
            (Some(kind), _, _) => kind,
            (None, Some(_), None) => "stdio",
            (None, None, Some(_)) => "streamable_http",
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
        match kind {
            "stdio" => self.stdio(key, raw).map(TransportConfig::Stdio),
            "streamable_http" => self.http(key, raw).map(TransportConfig::StreamableHttp),
            other => {
                self.problem(
                    kind_key,
                    format!("`{other}` is not a supported transport (`stdio`, `streamable_http`)"),
                );
                None
            }
        }
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
            cwd,
            max_processes: max_processes as usize,
        })
    }

    fn http(&mut self, key: &str, raw: &RawUpstream) -> Option<HttpConfig> {
        self.not_for(
            key,
            &[
                ("command", raw.command.is_some()),
                ("args", raw.args.is_some()),
                ("env", raw.env.is_some()),
                ("cwd", raw.cwd.is_some()),
                ("max_processes", raw.max_processes.is_some()),
            ],
            "streamable_http",
        );
        let Some(url) = raw.url.as_deref() else {
            self.problem(key, "transport `streamable_http` needs `url`");
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
        let headers = self.headers(&format!("{key}.headers"), raw.headers.as_ref());
        Some(HttpConfig { url: url?, headers })
    }

    fn string_map(&mut self, key: &str, raw: Option<&Entries<String>>) -> Vec<(String, String)> {
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

    fn headers(
        &mut self,
        key: &str,
        raw: Option<&Entries<String>>,
    ) -> Vec<(HeaderName, HeaderValue)> {
        let mut headers = Vec::new();
        for (name, value) in self.string_map(key, raw) {
            let header_key = format!("{key}.{}", key_segment(&name));
            let Ok(header_name) = HeaderName::from_str(&name) else {
                self.problem(header_key, "is not a valid HTTP header name");
                continue;
            };
            if RESERVED_HEADERS.contains(&header_name.as_str()) {
                self.problem(
                    header_key,
                    "is set by the MCP transport and cannot be configured",
                );
                continue;
            }
            match HeaderValue::from_str(&value) {
                Ok(mut header_value) => {
                    header_value.set_sensitive(is_secret_header(&header_name));
                    headers.push((header_name, header_value));
                }
                Err(_) => {
                    self.problem(header_key, "value holds characters not allowed in a header")
                }
            }
        }
        headers
    }
}

/// Headers whose values must not appear in logs.
fn is_secret_header(name: &HeaderName) -> bool {
    let name = name.as_str();
    name == "authorization"
        || name == "cookie"
        || name == "proxy-authorization"
        || name.contains("token")
        || name.contains("key")
        || name.contains("secret")
}

/// Separator rules: 1–8 characters of `[A-Za-z0-9_.-]` with at least one that cannot appear in
/// an upstream name, so the first occurrence in `{upstream}{sep}{name}` marks the split.
pub fn check_separator(separator: &str) -> Result<(), String> {
    if separator.is_empty() || separator.len() > MAX_SEPARATOR_LEN {
        return Err(format!("must be 1 to {MAX_SEPARATOR_LEN} characters long"));
    }
    if !separator
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
    {
        return Err(format!(
            "`{separator}` may only use letters, digits, `_`, `.` and `-` \
             (the characters MCP allows in tool names)"
        ));
    }
    if separator
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    {
        return Err(format!(
            "`{separator}` must contain a character that upstream names cannot hold \
             (`_`, `.` or an uppercase letter), or prefixed names could not be split"
        ));
    }
    Ok(())
}
