//! The configuration as written: serde structures for the TOML file, before validation.
//!
//! Everything is optional and loosely typed (strings for enums, floats for seconds) so that
//! `validate` can report every problem at once with its key path, instead of stopping at the
//! first one. Unknown keys are collected by `serde_ignored` in `load`, not rejected here.

use serde::Deserialize;

pub use super::keys::Entries;
use super::oauth::RawOAuth;

/// The whole file.
#[derive(Debug, Default, Deserialize)]
pub struct RawConfig {
    #[serde(default)]
    pub server: super::server::RawServer,
    #[serde(default)]
    pub catalog: super::catalog::RawCatalog,
    #[serde(default)]
    pub upstream_defaults: super::upstream::RawUpstreamDefaults,
    #[serde(default)]
    pub upstreams: Entries<super::upstream::RawUpstream>,
    #[serde(default)]
    pub oauth: RawOAuth,
    #[serde(default)]
    pub admin: super::server::RawAdmin,
    pub auth: Option<super::auth::RawAuth>,
    pub limits: Option<super::limits::RawLimits>,
    pub policy: Option<Vec<super::access::RawRule>>,
    pub endpoints: Option<Entries<super::access::RawEndpoint>>,
    pub store: Option<super::store::RawStore>,
    pub audit: Option<super::audit::RawAudit>,
    pub telemetry: Option<super::telemetry::RawTelemetry>,
    pub quota: Option<Vec<super::quota::RawQuota>>,
}
