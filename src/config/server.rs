//! `[server]` and `[admin]`: the listeners, as written and as checked: where the MCP endpoint
//! and the admin listener listen, which `Host` and `Origin` values they accept, and the limits
//! and times of the MCP endpoint's requests and sessions.

use std::{net::SocketAddr, str::FromStr, time::Duration};

use schemars::JsonSchema;
use serde::Deserialize;
use url::Url;

use super::{
    keys::{Checker, is_reserved_path},
    kinds::{Expanded, Seconds},
};

pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";
/// Where a new Switchyard started with `--upgrade` takes the listening sockets over.
pub const DEFAULT_UPGRADE_SOCKET: &str = "/tmp/switchyard-upgrade.sock";
pub const DEFAULT_ENDPOINT_PATH: &str = "/mcp";
const DEFAULT_SESSION_IDLE_TIMEOUT: Duration = Duration::from_secs(30 * 60);
const DEFAULT_MAX_REQUEST_BODY_BYTES: u64 = 4 * 1024 * 1024;
const DEFAULT_CLIENT_TIMEOUT: Duration = Duration::from_secs(30);
const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(10);
pub const DEFAULT_ADMIN_LISTEN: &str = "127.0.0.1:9090";

/// `[server]`: the downstream endpoint.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[schemars(rename = "Server")]
pub struct RawServer {
    /// Where the MCP endpoint listens, `HOST:PORT` (`--listen` overrides it). Beyond loopback
    /// it needs `[auth]`.
    #[schemars(with = "Option<Expanded>", extend("default" = DEFAULT_LISTEN))]
    pub listen: Option<String>,
    /// The path of the MCP endpoint: clients connect to `http://LISTEN/ENDPOINT_PATH`. A plain
    /// path, not one of Switchyard's own (`/healthz`, `/oauth/…`, `/.well-known/…`).
    #[schemars(extend("default" = DEFAULT_ENDPOINT_PATH, "pattern" = "^/[^?#{}*: ]+$"))]
    pub endpoint_path: Option<String>,
    /// `Host` values accepted, host names or `host:port` (a guard against DNS rebinding); the
    /// host of `[oauth] public_url` is always accepted. `[]` accepts any host, allowed only
    /// where every client authenticates.
    #[schemars(extend("default" = ["localhost", "127.0.0.1", "::1"]))]
    pub allowed_hosts: Option<Vec<String>>,
    /// Browser origins allowed to call the endpoint (`https://app.example.com`,
    /// `http://localhost:*` for any port, `null`, or `*` for any); requests without `Origin`
    /// are not affected. Default: pages served from the allowed hosts (any origin if every
    /// host is allowed). `[]`: no page.
    pub allowed_origins: Option<Vec<String>>,
    /// A client session with no requests for this long is closed, with its upstream
    /// sessions. Seconds.
    #[schemars(with = "Option<Seconds>", extend("default" = DEFAULT_SESSION_IDLE_TIMEOUT.as_secs()))]
    pub session_idle_timeout_seconds: Option<f64>,
    /// The largest request body accepted (larger ones get HTTP 413). Bytes, at least 1024.
    #[schemars(range(min = 1024), extend("default" = DEFAULT_MAX_REQUEST_BODY_BYTES))]
    pub max_request_body_bytes: Option<u64>,
    /// The longest a client may take to send a request's headers, and then its body (a slower
    /// one is cut off). Seconds.
    #[schemars(with = "Option<Seconds>", extend("default" = DEFAULT_CLIENT_TIMEOUT.as_secs()))]
    pub client_timeout_seconds: Option<f64>,
    /// At shutdown, and for an upstream a reload removes or replaces: how long calls in flight
    /// may take to finish before they are cut. Seconds.
    #[schemars(with = "Option<Seconds>", extend("default" = DEFAULT_SHUTDOWN_GRACE.as_secs()))]
    pub shutdown_grace_seconds: Option<f64>,
    /// Reload this file when it changes (a failed reload keeps the running configuration).
    #[schemars(extend("default" = true))]
    pub watch_config: Option<bool>,
    /// Where the pass-through routes (`/servers/NAME/mcp`, each streamable-HTTP upstream
    /// proxied as it is) are served, `HOST:PORT` (`--passthrough-listen` overrides it).
    /// Default: not served.
    #[schemars(with = "Option<Expanded>")]
    pub passthrough_listen: Option<String>,
    /// The Unix socket through which a new Switchyard started with `--upgrade` takes the
    /// listening sockets over from this one.
    #[schemars(with = "Option<Expanded>", extend("default" = DEFAULT_UPGRADE_SOCKET))]
    pub upgrade_socket: Option<String>,
    /// Answer a session's request with `application/json` rather than a one-event stream when
    /// its answer comes before anything else.
    #[schemars(extend("default" = false))]
    pub json_response: Option<bool>,
    /// How web pages of allowed origins may call the main endpoint.
    #[schemars(with = "Option<super::cors::MainCors>")]
    pub cors: Option<super::cors::RawCors>,
}

/// `[admin]`: the operators' listener (API, status page, metrics).
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[schemars(rename = "Admin")]
pub struct RawAdmin {
    /// Whether the admin listener runs.
    #[schemars(extend("default" = true))]
    pub enabled: Option<bool>,
    /// Where the admin listener listens, `HOST:PORT` (`--admin-listen` overrides it).
    #[schemars(with = "Option<Expanded>", extend("default" = DEFAULT_ADMIN_LISTEN))]
    pub listen: Option<String>,
    /// `Host` values accepted besides loopback names and the listening address (a guard
    /// against DNS rebinding).
    #[schemars(extend("default" = []))]
    pub allowed_hosts: Option<Vec<String>>,
    /// The bearer token every admin request must carry, at least 16 characters; required when
    /// `listen` is not loopback. Default: one made at the first start and kept in
    /// `{state_dir}/admin.token`.
    #[schemars(with = "Option<Expanded>")]
    pub token: Option<String>,
    /// Whether upstreams added through the admin API may run programs or read the gateway's
    /// files and environment (which makes the admin token shell access).
    #[schemars(extend("default" = false))]
    pub allow_commands: Option<bool>,
    /// Also serve `/metrics` on the MCP listener.
    #[schemars(extend("default" = false))]
    pub metrics_on_main_listener: Option<bool>,
    /// Where upstreams added or removed through the admin API are kept, relative to this
    /// file's directory; merged into the file at every load. Default: `NAME.overlay.toml`
    /// beside `NAME.toml`.
    pub overlay_file: Option<String>,
}

/// The browser origins the MCP endpoint accepts requests from. Requests without an `Origin`
/// header (any client that is not a web page) are not affected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllowedOrigins {
    /// Any origin (`allowed_origins = ["*"]`).
    Any,
    /// These origins only, as `scheme://host[:port|:*]` or `null`; none if empty.
    Only(Vec<String>),
}

/// The downstream MCP endpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerSettings {
    pub listen: SocketAddr,
    pub endpoint_path: String,
    /// `Host` values accepted (DNS-rebinding guard); empty accepts any.
    pub allowed_hosts: Vec<String>,
    /// Which browser origins may send requests (those carrying an `Origin` header).
    pub allowed_origins: AllowedOrigins,
    /// A session with no traffic for this long is closed with its upstream sessions.
    pub session_idle_timeout: Duration,
    pub max_request_body_bytes: usize,
    /// The longest a client may take to send a request's headers, and then its body (slow
    /// clients holding connections open are cut off).
    pub client_timeout: Duration,
    /// How long calls in flight may take to finish at shutdown, and on a removed or replaced
    /// upstream at a reload, before they are cut.
    pub shutdown_grace: Duration,
    /// Whether the configuration file is watched and reloaded when it changes.
    pub watch_config: bool,
    /// A session's request whose answer comes before anything else is answered with JSON
    /// (when the client accepts it) rather than a one-event stream.
    pub json_response: bool,
    /// How browser pages may call the main endpoint (and virtual ones that set none).
    pub cors: super::cors::Cors,
    /// Where the pass-through routes (`/servers/{name}/mcp`) are served, if anywhere.
    pub passthrough_listen: Option<SocketAddr>,
    /// The Unix socket a new Switchyard takes the listening sockets over from this one.
    pub upgrade_socket: std::path::PathBuf,
}

/// `[admin]`: the listener of the admin API, the status page and `/metrics`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminSettings {
    /// `None`: no admin listener.
    pub listen: Option<SocketAddr>,
    /// `Host` values accepted besides loopback names and the listening address (DNS-rebinding
    /// guard).
    pub allowed_hosts: Vec<String>,
    /// The token every admin API request must carry, as configured (it must be when `listen`
    /// is not loopback); `None`: one made at the first start and kept in the state directory.
    pub token: Option<String>,
    /// Whether upstreams added through the admin API may run programs and read the gateway's
    /// files and environment (which makes the admin token shell access).
    pub allow_commands: bool,
    /// Whether `/metrics` is served on the MCP listener too.
    pub metrics_on_main_listener: bool,
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

    pub(super) fn server(&mut self, raw: &RawServer) -> ServerSettings {
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
            allowed_origins: self.origins(
                "server.allowed_origins",
                raw.allowed_origins.as_deref(),
                &allowed_hosts,
            ),
            cors: match &raw.cors {
                Some(cors) => self.cors("server.cors", cors, false),
                None => super::cors::Cors::default(),
            },
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
            json_response: raw.json_response.unwrap_or(false),
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

    pub(super) fn admin(&mut self, raw: &RawAdmin) -> AdminSettings {
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
    pub(super) fn origins(
        &mut self,
        key: &str,
        origins: Option<&[String]>,
        hosts: &[String],
    ) -> AllowedOrigins {
        let Some(origins) = origins else {
            if hosts.is_empty() {
                return AllowedOrigins::Any;
            }
            return AllowedOrigins::Only(hosts.iter().flat_map(|h| origins_of_host(h)).collect());
        };
        if origins.iter().any(|origin| origin == "*") {
            if origins.len() > 1 {
                self.problem(
                    key,
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
                    format!("{key}[{i}]"),
                    format!(
                        "`{origin}` is not an origin like `https://app.example.com`, \
                         `http://localhost:*`, `null` or `*`"
                    ),
                );
            }
        }
        AllowedOrigins::Only(origins.to_vec())
    }
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
