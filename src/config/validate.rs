//! Raw configuration → runtime `Config`, collecting every problem with its key path.

use std::{net::SocketAddr, path::Path, str::FromStr, time::Duration};

use url::Url;

use super::{
    AdminSettings, AllowedOrigins, CatalogSettings, Config, ConfigError, OverlayInfo, PrefixMode,
    ServerSettings,
    expand::Vars,
    keys::{Checker, is_reserved_path, key_segment},
    overlay::RawOverlay,
    parse::Parsed,
    raw::{RawAdmin, RawCatalog, RawServer},
    upstream::default_policy,
};

pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";
/// Where a new Switchyard started with `--upgrade` takes the listening sockets over.
pub const DEFAULT_UPGRADE_SOCKET: &str = "/tmp/switchyard-upgrade.sock";
pub const DEFAULT_ENDPOINT_PATH: &str = "/mcp";
pub const DEFAULT_SEPARATOR: &str = "__";
const DEFAULT_SESSION_IDLE_TIMEOUT: Duration = Duration::from_secs(30 * 60);
const DEFAULT_MAX_REQUEST_BODY_BYTES: u64 = 4 * 1024 * 1024;
const DEFAULT_CLIENT_TIMEOUT: Duration = Duration::from_secs(30);
const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(10);
pub const DEFAULT_ADMIN_LISTEN: &str = "127.0.0.1:9090";
const MAX_SEPARATOR_LEN: usize = 8;
const DEFAULT_PAGE_SIZE: u64 = 500;
const MAX_PAGE_SIZE: u64 = 10_000;

/// Checks `parsed` merged with `overlay` and builds the runtime config, or returns every
/// problem found: those of the file if it has any, else those of the overlay.
pub fn validate(
    parsed: Parsed,
    path: &Path,
    overlay: RawOverlay,
    vars: &dyn Vars,
) -> Result<Config, ConfigError> {
    let Parsed {
        mut raw,
        upstreams_key,
        problems,
    } = parsed;
    raw.upstreams
        .items
        .retain(|(name, _)| !overlay.removed.contains(name));
    let mut check = Checker {
        problems,
        vars,
        base_dir: path.parent().map(Path::to_path_buf).unwrap_or_default(),
    };
    let server = check.server(&raw.server);
    let catalog = check.catalog(&raw.catalog);
    let defaults = check.policy(
        "upstream_defaults",
        raw.upstream_defaults.policy(),
        &default_policy(),
    );
    let mut upstreams = check.upstreams(&raw.upstreams, upstreams_key, &defaults);
    let oauth = check.oauth(&raw.oauth);
    let admin = check.admin(&raw.admin);
    let auth = check.auth(raw.auth.as_ref());
    let limits = check.limits(raw.limits.as_ref(), auth.configured);
    let policy = check.policy_rules(raw.policy.as_deref());
    let endpoints = check.endpoints(raw.endpoints.as_ref(), &server.endpoint_path);
    let store = check.store(raw.store.as_ref());
    if let Some(problem) = auth.exposure(server.listen) {
        check.problem("server.listen", problem);
    }
    if let Some(listen) = server.passthrough_listen
        && let Some(problem) = auth.exposure(listen)
    {
        check.problem(
            "server.passthrough_listen",
            problem.replace("server.listen", "server.passthrough_listen"),
        );
    }
    if !auth.configured {
        for upstream in &upstreams {
            if upstream.discovery == super::Discovery::PerUser {
                check.problem(
                    format!("upstreams.{}.discovery", upstream.name),
                    "`per_user` needs users who authenticate ([auth]); without it there is \
                     one user",
                );
            }
        }
    }
    if server.allowed_hosts.is_empty() && (!auth.configured || auth.anonymous) {
        check.problem(
            "server.allowed_hosts",
            "an empty list accepts any Host, which lets any web page reach the endpoint \
             through DNS rebinding; list the names clients use, or have every client \
             authenticate ([auth] without anonymous = true)",
        );
    }

    // The overlay's upstreams, checked the same way, their problems kept apart.
    let file_problems = std::mem::replace(&mut check.problems, overlay.problems);
    for (name, _) in overlay.upstreams.iter() {
        if raw.upstreams.iter().any(|(defined, _)| defined == name) {
            check.problem(
                format!("upstreams.{}", key_segment(name)),
                format!(
                    "is also defined in {}; an upstream added through the admin API needs a \
                     name of its own",
                    path.display()
                ),
            );
        }
    }
    if !admin.allow_commands {
        for (name, upstream) in overlay.upstreams.iter() {
            if let Some(key) = upstream.privileged_key() {
                check.problem(
                    format!("upstreams.{}.{key}", key_segment(name)),
                    "runs a program or reads the gateway's files or environment, which an \
                     upstream added through the admin API may do only with \
                     [admin] allow_commands = true",
                );
            }
        }
    }
    upstreams.extend(check.upstreams(&overlay.upstreams, "upstreams", &defaults));
    let overlay_problems = std::mem::take(&mut check.problems);
    if !file_problems.is_empty() {
        return Err(ConfigError::Invalid {
            path: path.to_owned(),
            problems: file_problems,
        });
    }
    if !overlay_problems.is_empty() {
        return Err(ConfigError::Invalid {
            path: overlay.path,
            problems: overlay_problems,
        });
    }
    Ok(Config {
        source: path.to_owned(),
        server,
        catalog,
        upstreams,
        oauth,
        admin,
        auth,
        limits,
        policy,
        endpoints,
        store,
        overlay: OverlayInfo {
            path: overlay.path,
            added: overlay
                .upstreams
                .items
                .into_iter()
                .map(|(n, _)| n)
                .collect(),
            removed: overlay.removed,
        },
    })
}

impl Checker<'_> {
    /// A socket address at `key`; on a problem, records it and returns `fallback`.
    fn address(&mut self, key: &str, text: &str, fallback: SocketAddr) -> SocketAddr {
        match self.expand(key, text) {
            Some(text) => SocketAddr::from_str(&text).unwrap_or_else(|_| {
                self.problem(
                    key,
                    format!("`{text}` is not an address like `127.0.0.1:8080` or `[::1]:8080`"),
                );
                fallback
            }),
            None => fallback,
        }
    }

    fn server(&mut self, raw: &RawServer) -> ServerSettings {
        let listen_text = raw.listen.as_deref().unwrap_or(DEFAULT_LISTEN);
        let fallback = SocketAddr::from(([127, 0, 0, 1], 8080));
        let listen = self.address("server.listen", listen_text, fallback);
        let endpoint_path = raw
            .endpoint_path
            .clone()
            .unwrap_or_else(|| DEFAULT_ENDPOINT_PATH.into());
        if !endpoint_path.starts_with('/') || endpoint_path.len() < 2 {
            self.problem(
                "server.endpoint_path",
                format!("`{endpoint_path}` must start with `/` and name a path, like `/mcp`"),
            );
        } else if endpoint_path.contains(['?', '#', ' ', '{', '}', '*', ':']) {
            self.problem(
                "server.endpoint_path",
                "must be a plain path, without query, spaces or any of `{ } * :`",
            );
        } else if is_reserved_path(&endpoint_path) {
            self.problem(
                "server.endpoint_path",
                format!("`{endpoint_path}` is taken by Switchyard's own endpoints (`/healthz`, `/oauth/…`)"),
            );
        }
        let allowed_hosts = raw
            .allowed_hosts
            .clone()
            .unwrap_or_else(|| vec!["localhost".into(), "127.0.0.1".into(), "::1".into()]);
        let max_body = raw
            .max_request_body_bytes
            .unwrap_or(DEFAULT_MAX_REQUEST_BODY_BYTES);
        if max_body < 1024 {
            self.problem("server.max_request_body_bytes", "must be at least 1024");
        }
        ServerSettings {
            listen,
            endpoint_path,
            allowed_origins: self.origins(raw.allowed_origins.as_deref(), &allowed_hosts),
            allowed_hosts,
            session_idle_timeout: self.seconds(
                "server.session_idle_timeout_seconds",
                raw.session_idle_timeout_seconds,
                DEFAULT_SESSION_IDLE_TIMEOUT,
            ),
            max_request_body_bytes: usize::try_from(max_body).unwrap_or(usize::MAX),
            client_timeout: self.seconds(
                "server.client_timeout_seconds",
                raw.client_timeout_seconds,
                DEFAULT_CLIENT_TIMEOUT,
            ),
            shutdown_grace: self.seconds(
                "server.shutdown_grace_seconds",
                raw.shutdown_grace_seconds,
                DEFAULT_SHUTDOWN_GRACE,
            ),
            watch_config: raw.watch_config.unwrap_or(true),
            passthrough_listen: raw.passthrough_listen.as_deref().map(|text| {
                self.address(
                    "server.passthrough_listen",
                    text,
                    SocketAddr::from(([127, 0, 0, 1], 8081)),
                )
            }),
            upgrade_socket: match raw.upgrade_socket.as_deref() {
                Some(text) => self
                    .expand("server.upgrade_socket", text)
                    .map(std::path::PathBuf::from)
                    .unwrap_or_else(|| DEFAULT_UPGRADE_SOCKET.into()),
                None => DEFAULT_UPGRADE_SOCKET.into(),
            },
        }
    }

    fn admin(&mut self, raw: &RawAdmin) -> AdminSettings {
        let fallback = SocketAddr::from(([127, 0, 0, 1], 9090));
        let listen = raw.enabled.unwrap_or(true).then(|| {
            let text = raw.listen.as_deref().unwrap_or(DEFAULT_ADMIN_LISTEN);
            self.address("admin.listen", text, fallback)
        });
        let token = match raw.token.as_deref() {
            Some(text) => match self.expand("admin.token", text) {
                Some(token) if token.len() < 16 => {
                    self.problem("admin.token", "must be at least 16 characters long");
                    None
                }
                token => token,
            },
            None => None,
        };
        if let Some(addr) = listen
            && !addr.ip().is_loopback()
            && token.is_none()
        {
            self.problem(
                "admin.token",
                format!(
                    "is required when admin.listen ({addr}) is not a loopback address: \
                     the admin API can change what the gateway serves"
                ),
            );
        }
        AdminSettings {
            listen,
            allowed_hosts: raw.allowed_hosts.clone().unwrap_or_default(),
            token,
            allow_commands: raw.allow_commands.unwrap_or(false),
            metrics_on_main_listener: raw.metrics_on_main_listener.unwrap_or(false),
        }
    }

    /// The configured origins; unset, the web pages served from the allowed hosts (any
    /// scheme and port), or any origin if every host is allowed.
    fn origins(&mut self, origins: Option<&[String]>, hosts: &[String]) -> AllowedOrigins {
        let Some(origins) = origins else {
            if hosts.is_empty() {
                return AllowedOrigins::Any;
            }
            return AllowedOrigins::Only(hosts.iter().flat_map(|h| origins_of_host(h)).collect());
        };
        if origins.iter().any(|origin| origin == "*") {
            if origins.len() > 1 {
                self.problem(
                    "server.allowed_origins",
                    "`*` (any origin) cannot be combined with other origins",
                );
            }
            return AllowedOrigins::Any;
        }
        for (i, origin) in origins.iter().enumerate() {
            let valid = origin == "null"
                || Url::parse(origin.trim_end_matches(":*"))
                    .is_ok_and(|u| u.has_host() && u.path() == "/");
            if !valid {
                self.problem(
                    format!("server.allowed_origins[{i}]"),
                    format!(
                        "`{origin}` is not an origin like `https://app.example.com`, \
                         `http://localhost:*`, `null` or `*`"
                    ),
                );
            }
        }
        AllowedOrigins::Only(origins.to_vec())
    }

    /// A `prefix_mode` value at `key`.
    pub(super) fn prefix_mode(&mut self, key: &str, text: &str) -> Option<PrefixMode> {
        match text {
            "always" => Some(PrefixMode::Always),
            "conditional" => Some(PrefixMode::Conditional),
            "never" => Some(PrefixMode::Never),
            other => {
                self.problem(
                    key,
                    format!("`{other}` is not one of `always`, `conditional`, `never`"),
                );
                None
            }
        }
    }

    fn catalog(&mut self, raw: &RawCatalog) -> CatalogSettings {
        let prefix_mode = raw
            .prefix_mode
            .as_deref()
            .map_or(Some(PrefixMode::Always), |text| {
                self.prefix_mode("catalog.prefix_mode", text)
            })
            .unwrap_or(PrefixMode::Always);
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

/// The origins of web pages served from `host` (an allowed `Host` value: a name or address,
/// with or without a port), over http and https.
fn origins_of_host(host: &str) -> [String; 2] {
    let (name, port) = match host.rsplit_once(':') {
        // `::1` and other bare IPv6 addresses have colons but no port.
        Some((name, port)) if !name.contains(':') || name.ends_with(']') => (name, port),
        _ => (host, "*"),
    };
    let name = if name.contains(':') && !name.starts_with('[') {
        format!("[{name}]")
    } else {
        name.to_owned()
    };
    ["http", "https"].map(|scheme| format!("{scheme}://{name}:{port}"))
}
