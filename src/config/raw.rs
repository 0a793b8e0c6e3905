//! The configuration as written: serde structures for the TOML file, before validation.
//!
//! Everything is optional and loosely typed (strings for enums, floats for seconds) so that
//! `validate` can report every problem at once with its key path, instead of stopping at the
//! first one. Unknown keys are collected by `serde_ignored` in `load`, not rejected here.

use schemars::JsonSchema;
use serde::Deserialize;

pub use super::keys::Entries;
use super::oauth::RawOAuth;

/// A Switchyard configuration file (TOML). Every table and key is optional; unknown keys are
/// refused.
#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct RawConfig {
    /// The MCP endpoint's listener: address, path, accepted hosts and origins, request limits.
    #[serde(default)]
    pub server: super::server::RawServer,
    /// How the upstreams' tools, prompts and resources are merged into one catalog.
    #[serde(default)]
    pub catalog: super::catalog::RawCatalog,
    /// Timeouts, failure handling and limits every upstream inherits unless it sets its own.
    #[serde(default)]
    pub upstream_defaults: super::upstream::RawUpstreamDefaults,
    /// The upstream MCP servers, one table each: `[upstreams.NAME]`, NAME 1 to 32 characters
    /// of `[a-z0-9-]` starting with a letter. They appear in the catalog in file order.
    #[serde(default)]
    #[schemars(extend("propertyNames" = { "pattern": "^[a-z][a-z0-9-]{0,31}$" }))]
    pub upstreams: Entries<super::upstream::RawUpstream>,
    /// Switchyard as the OAuth client of the upstreams that require authorization.
    #[serde(default)]
    pub oauth: RawOAuth,
    /// The operators' listener: the admin API, the status page and `/metrics`.
    #[serde(default)]
    pub admin: super::server::RawAdmin,
    /// Who may use the MCP endpoint. Without it every request is the anonymous user and the
    /// gateway listens on loopback only.
    pub auth: Option<super::auth::RawAuth>,
    /// What one client may ask: JSON depth, requests in flight, sessions and rate per user.
    pub limits: Option<super::limits::RawLimits>,
    /// Who sees what: rules applied in file order, deny winning over allow.
    pub policy: Option<Vec<super::access::RawRule>>,
    /// More endpoint paths, `[endpoints.NAME]`, each serving a part of the catalog.
    pub endpoints: Option<Entries<super::access::RawEndpoint>>,
    /// Where state that outlives one request lives: `embedded` (default), `memory` or `redis`.
    pub store: Option<super::store::RawStore>,
    /// The audit log of tool calls and other requests. Off unless the table is given.
    pub audit: Option<super::audit::RawAudit>,
    /// OpenTelemetry traces, exported over OTLP/HTTP. Off unless `otlp_endpoint` is given.
    pub telemetry: Option<super::telemetry::RawTelemetry>,
    /// How much of the upstreams principals may use: a rate, a daily or monthly count, calls
    /// at once.
    pub quota: Option<Vec<super::quota::RawQuota>>,
    /// Secrets and personal data looked for in tool results or call arguments (redacted,
    /// blocked or flagged), or a policy hook asked about each call.
    pub guardrail: Option<Vec<super::guardrail::RawGuardrail>>,
}

/// The top-level sections of the file, as `RawConfig` accepts them (the field names serde's
/// derive hands its deserializer): what a reload must have a rule for.
#[cfg(test)]
pub fn file_sections() -> Vec<&'static str> {
    use serde::de::{self, Deserializer, Visitor};

    /// Takes the field names and deserializes nothing.
    struct FieldNames(&'static [&'static str]);

    impl<'de> Deserializer<'de> for &mut FieldNames {
        type Error = de::value::Error;

        fn deserialize_any<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value, Self::Error> {
            Err(de::Error::custom("only a struct's fields are read"))
        }

        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _name: &'static str,
            fields: &'static [&'static str],
            _visitor: V,
        ) -> Result<V::Value, Self::Error> {
            self.0 = fields;
            Err(de::Error::custom("the fields are read"))
        }

        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
            byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map enum
            identifier ignored_any
        }
    }

    let mut names = FieldNames(&[]);
    let _ = RawConfig::deserialize(&mut names);
    names.0.to_vec()
}
