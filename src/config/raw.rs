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
