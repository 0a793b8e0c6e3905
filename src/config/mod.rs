//! Configuration: parse (TOML, or an MCP client's `mcpServers` JSON) → validate → runtime types.
//!
//! `load` is the only entry point. It never returns a half-valid config: every problem found is
//! reported at once, each with the file and the key path, and the caller keeps what it had.

mod access;
mod auth;
mod expand;
mod headers;
mod keys;
mod limits;
mod load;
mod mcp_json;
mod oauth;
mod overlay;
mod overrides;
mod parse;
mod raw;
mod store;
mod upstream;
mod validate;

use std::{collections::HashMap, fmt, net::SocketAddr, path::PathBuf, time::Duration};

use http::{HeaderName, HeaderValue};
use url::Url;

pub use auth::{
    ApiKey, AuthSettings, JwtKeys, JwtSettings, SignInClient, hash_api_key, pem_public_key,
};
pub use expand::{ProcessVars, Vars};
pub use headers::UserHeader;
pub use limits::{DEFAULT_BURST, DEFAULT_RATE, DEFAULT_SESSIONS, Limits, Rate};
pub use load::{ConfigError, Problem, load, load_overlaid, load_overridden, load_with, parse_str};
pub use store::{StoreKind, StoreSettings};

pub use crate::names::PrefixMode;
pub use keys::decode_key;
pub use keys::{RESERVED_PATHS, is_reserved_path};
pub use overlay::{Overlay, overlay_path, privileged_key};
pub use overrides::Overrides;
pub use validate::check_separator;

use crate::names::UpstreamName;

/// A validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// The file it was loaded from.
    pub source: PathBuf,
    pub server: ServerSettings,
    pub catalog: CatalogSettings,
    /// Enabled upstreams, in file order (which is also the catalog order).
    pub upstreams: Vec<UpstreamConfig>,
    pub oauth: OAuthSettings,
    pub admin: AdminSettings,
    /// `[auth]`: who may use the MCP endpoint.
    pub auth: AuthSettings,
    /// `[limits]`: what one client may ask.
    pub limits: Limits,
    /// `[[policy]]`: who may see what, in file order.
    pub policy: Vec<crate::policy::Rule>,
    /// `[endpoints.NAME]`: more endpoint paths, in file order.
    pub endpoints: Vec<crate::policy::EndpointSettings>,
    /// `[store]`: where state shared beyond one request lives.
    pub store: StoreSettings,
    /// Upstreams added and removed through the admin API, merged into the file's.
    pub overlay: OverlayInfo,
}

/// The overlay merged into a configuration (see `Overlay`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverlayInfo {
    /// Where it is kept (it may not exist yet).
    pub path: PathBuf,
    /// The upstreams it adds, enabled or not, in the order added.
    pub added: Vec<String>,
    /// The upstreams of the configuration file it removes.
    pub removed: Vec<String>,
}

impl Config {
    /// What in this configuration works otherwise than it may seem to, each with its key
    /// (logged at every load; `switchyard check` prints them).
    pub fn warnings(&self) -> Vec<String> {
        let mut warnings = Vec::new();
        if self.server.passthrough_listen.is_some() {
            let itemized: Vec<&str> = self
                .policy
                .iter()
                .filter(|rule| rule.gate.names_items())
                .map(|rule| rule.name.as_str())
                .collect();
            if !itemized.is_empty() {
                warnings.push(format!(
                    "server.passthrough_listen: the pass-through routes proxy each upstream as \
                     it is, so the rules on single tools, prompts or resources of {} do not \
                     apply there (rules on whole upstreams do); serve such users through the \
                     MCP endpoint only",
                    itemized.join(", ")
                ));
            }
        }
        warnings
    }
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

/// `[oauth]`: Switchyard as the OAuth client of the upstreams that require authorization.
#[derive(Debug, Clone, PartialEq)]
pub struct OAuthSettings {
    /// Where browsers and authorization servers reach Switchyard (the redirect URI is
    /// `{public_url}/oauth/callback`); `None`: `http://{server.listen}`, with the loopback
    /// address for an unspecified one (see `public_url_or`).
    pub public_url: Option<Url>,
    /// Where tokens and client registrations are kept, encrypted.
    pub state_dir: PathBuf,
    pub key: OAuthKey,
    /// How Switchyard names itself to authorization servers.
    pub client_name: String,
    /// The client ID metadata document URL to use as `client_id` where authorization servers
    /// accept one; `None`: `{public_url}/oauth/client-metadata.json` when that is https.
    pub client_metadata_url: Option<Url>,
    /// Where the browser goes after an authorization; `None`: Switchyard's own page.
    pub success_redirect: Option<Url>,
    pub error_redirect: Option<Url>,
    /// How long a user has to complete an authorization (its link and `state` then expire).
    pub authorization_lifetime: Duration,
}

/// The key that encrypts the token store.
#[derive(Clone, PartialEq, Eq)]
pub enum OAuthKey {
    /// 32 bytes, given in the configuration (from the environment, normally).
    Inline([u8; 32]),
    /// A file holding the key in base64; created, readable only by its owner, if missing.
    File(PathBuf),
}

impl fmt::Debug for OAuthKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OAuthKey::Inline(_) => f.write_str("Inline(…)"),
            OAuthKey::File(path) => f.debug_tuple("File").field(path).finish(),
        }
    }
}

/// `[upstreams.NAME.oauth]`: how Switchyard authorizes itself to one HTTP upstream. Its
/// `Debug` shows whether there is a client secret, never the secret.
#[derive(Clone, PartialEq)]
pub struct UpstreamOAuth {
    /// False: a 401 from the upstream is a plain failure.
    pub enabled: bool,
    pub grant: GrantKind,
    /// A client registered beforehand with the upstream's authorization server.
    pub client_id: Option<String>,
    pub client_secret: Option<String>,
    /// How the client authenticates at the token endpoint; `None`: as the server supports.
    pub auth_method: Option<AuthMethod>,
    /// For `private_key_jwt`: the PEM key and algorithm that sign client assertions.
    pub private_key: Option<PrivateKey>,
    /// The scopes to ask for; `None`: those the upstream's challenge or metadata name.
    pub scopes: Option<Vec<String>>,
}

impl fmt::Debug for UpstreamOAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UpstreamOAuth")
            .field("enabled", &self.enabled)
            .field("grant", &self.grant)
            .field("client_id", &self.client_id)
            .field("client_secret", &self.client_secret.as_ref().map(|_| "…"))
            .field("auth_method", &self.auth_method)
            .field("private_key", &self.private_key)
            .field("scopes", &self.scopes)
            .finish()
    }
}

impl Default for UpstreamOAuth {
    fn default() -> Self {
        Self {
            enabled: true,
            grant: GrantKind::AuthorizationCode,
            client_id: None,
            client_secret: None,
            auth_method: None,
            private_key: None,
            scopes: None,
        }
    }
}

/// The OAuth grant used with an upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrantKind {
    /// A user authorizes in a browser (authorization code with PKCE).
    AuthorizationCode,
    /// Machine to machine, with the client's own credentials.
    ClientCredentials,
}

/// Token endpoint client authentication (RFC 6749 §2.3, RFC 7523).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthMethod {
    ClientSecretBasic,
    ClientSecretPost,
    PrivateKeyJwt,
    None,
}

impl AuthMethod {
    pub fn as_str(self) -> &'static str {
        match self {
            AuthMethod::ClientSecretBasic => "client_secret_basic",
            AuthMethod::ClientSecretPost => "client_secret_post",
            AuthMethod::PrivateKeyJwt => "private_key_jwt",
            AuthMethod::None => "none",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "client_secret_basic" => AuthMethod::ClientSecretBasic,
            "client_secret_post" => AuthMethod::ClientSecretPost,
            "private_key_jwt" => AuthMethod::PrivateKeyJwt,
            "none" => AuthMethod::None,
            _ => return None,
        })
    }
}

/// A private key that signs client assertions.
#[derive(Clone, PartialEq)]
pub struct PrivateKey {
    pub pem: String,
    pub algorithm: jsonwebtoken::Algorithm,
}

impl fmt::Debug for PrivateKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PrivateKey")
            .field("algorithm", &self.algorithm)
            .finish_non_exhaustive()
    }
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
    /// Where the pass-through routes (`/servers/{name}/mcp`) are served, if anywhere.
    pub passthrough_listen: Option<SocketAddr>,
    /// The Unix socket a new Switchyard takes the listening sockets over from this one.
    pub upgrade_socket: std::path::PathBuf,
}

/// How upstream catalogs are merged into one.
#[derive(Debug, Clone, PartialEq)]
pub struct CatalogSettings {
    pub prefix_mode: PrefixMode,
    /// Between the upstream name and the tool or prompt name; never empty, and always holds a
    /// character that upstream names cannot contain, so the first occurrence splits a name.
    pub separator: String,
    /// Most entries in one page of a merged list.
    pub page_size: usize,
}

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
    pub policy: UpstreamPolicy,
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

#[cfg(test)]
mod tests;
