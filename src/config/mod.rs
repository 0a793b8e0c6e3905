//! Configuration: parse (TOML, or an MCP client's `mcpServers` JSON) → validate → runtime types.
//!
//! `load` is the only entry point. It never returns a half-valid config: every problem found is
//! reported at once, each with the file and the key path, and the caller keeps what it had.

mod access;
mod approval;
mod audit;
mod auth;
mod catalog;
pub mod command;
mod cors;
mod exchange;
mod expand;
mod guardrail;
mod headers;
mod items;
mod keys;
mod kinds;
mod langchain;
mod limits;
mod load;
mod mcp_json;
mod oauth;
mod overlay;
mod overrides;
mod parse;
mod quota;
mod raw;
#[cfg(test)]
pub use raw::file_sections;
mod schema;
pub use schema::schema;
mod server;
mod store;
mod telemetry;
mod upstream;
mod upstream_oauth;
mod validate;

use std::path::PathBuf;

pub use audit::{AuditArguments, AuditOutput, AuditSettings};
pub use auth::{
    ApiKey, AuthSettings, JwtKeys, JwtSettings, SignInClient, hash_api_key, pem_public_key,
};
pub use cors::{Cors, REQUEST_HEADERS};
pub use expand::{ProcessVars, Vars};
pub use headers::UserHeader;
pub use items::{CacheRule, INLINE_BYTES, ItemRules};
pub use limits::{DEFAULT_BURST, DEFAULT_RATE, DEFAULT_SESSIONS, Limits, Rate};
pub use load::{ConfigError, Problem, load, load_overlaid, load_overridden, load_with, parse_str};
pub use quota::QuotaRule;
pub use store::{StoreKind, StoreSettings};
pub use telemetry::TelemetrySettings;

pub use crate::names::PrefixMode;
pub use catalog::{CatalogSettings, DEFAULT_SEPARATOR, PinChanged, PinNew, check_separator};
pub use exchange::{ExchangeServer, TokenExchangeSettings};
pub use keys::decode_key;
pub use keys::{RESERVED_PATHS, is_reserved_path};
pub use oauth::{OAuthKey, OAuthSettings, default_state_dir};
pub use overlay::{Overlay, overlay_path, privileged_key};
pub use overrides::Overrides;
pub use server::{
    AdminSettings, AllowedOrigins, DEFAULT_ADMIN_LISTEN, DEFAULT_ENDPOINT_PATH, DEFAULT_LISTEN,
    DEFAULT_UPGRADE_SOCKET, ServerSettings,
};
pub use upstream::{
    Discovery, FailureMode, HttpConfig, HttpProtocol, RestartPolicy, SandboxConfig, SessionMode,
    StdioConfig, TransportConfig, UpstreamConfig, UpstreamPolicy,
};
pub use upstream_oauth::{AuthMethod, GrantKind, PrivateKey, UpstreamOAuth};

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
    /// `[endpoints.NAME.cors]`, by endpoint name (the others follow `[server.cors]`).
    pub endpoint_cors: Vec<(String, Cors)>,
    /// `[store]`: where state shared beyond one request lives.
    pub store: StoreSettings,
    /// `[audit]`: the audit log.
    pub audit: AuditSettings,
    /// `[[quota]]`: how much of the upstreams principals may use, in file order.
    pub quotas: Vec<QuotaRule>,
    /// `[[guardrail]]`: what tool calls and results are screened for, and the policy hooks
    /// asked about them, in file order.
    pub guardrails: Vec<crate::guardrail::Guardrail>,
    /// `[telemetry]`: OpenTelemetry traces (applied at start).
    pub telemetry: TelemetrySettings,
    /// Upstreams added and removed through the admin API, merged into the file's.
    pub overlay: OverlayInfo,
    /// Upstreams configured but switched off (`enabled = false`, or through the admin API),
    /// in file order.
    pub disabled: Vec<String>,
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
    /// The upstreams it switches off.
    pub disabled: Vec<String>,
}

impl Config {
    /// What in this configuration works otherwise than it may seem to, each with its key
    /// (logged at every load; `switchyard check` prints them).
    pub fn warnings(&self) -> Vec<String> {
        let mut warnings = Vec::new();
        if self.server.passthrough_listen.is_some() {
            // The names of the rules that `concerns`, if any.
            let named = |concerns: fn(&crate::policy::Rule) -> bool| {
                let names: Vec<&str> = (self.policy.iter())
                    .filter(|rule| concerns(rule))
                    .map(|rule| rule.name.as_str())
                    .collect();
                (!names.is_empty()).then(|| names.join(", "))
            };
            if let Some(itemized) = named(|rule| rule.gate.names_items()) {
                warnings.push(format!(
                    "server.passthrough_listen: the pass-through routes proxy each upstream as \
                     it is, so the rules on single tools, prompts or resources of {itemized} do \
                     not apply there (rules on whole upstreams do); serve such users through \
                     the MCP endpoint only"
                ));
            }
            if let Some(approving) = named(|rule| rule.approval.is_some()) {
                warnings.push(format!(
                    "server.passthrough_listen: the pass-through routes proxy each upstream as \
                     it is, so the calls that {approving} make wait for approval are not held \
                     there; deny such users those upstreams there, or serve them through the \
                     MCP endpoint only"
                ));
            }
            let guardrails: Vec<&str> = (self.guardrails.iter())
                .map(|rule| rule.name.as_str())
                .collect();
            if !guardrails.is_empty() {
                warnings.push(format!(
                    "server.passthrough_listen: the pass-through routes proxy each upstream as \
                     it is, so the guardrails {} (their detectors and policy hooks) do not look \
                     at the calls made there; serve the users they must apply to through the \
                     MCP endpoint only",
                    guardrails.join(", ")
                ));
            }
        }
        warnings
    }
}

#[cfg(test)]
mod tests;
