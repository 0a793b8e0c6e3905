//! What every part of the configuration's checking shares, below all of them: the `Checker`
//! that walks the raw form collecting problems by key path, the map that keeps keys in file
//! order (and notes repeated ones), how a key path segment is written, and how a key (32
//! bytes in base64) is read. Each topic file adds its own checks to the `Checker`.

use std::{collections::HashSet, fmt, marker::PhantomData, path::PathBuf, time::Duration};

use base64::{
    Engine,
    engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD},
};
use serde::{
    Deserialize, Deserializer,
    de::{MapAccess, Visitor},
};

use super::{
    Problem,
    expand::{Vars, expand_at},
};

/// Walks the raw config, recording problems and substituting defaults so checking can go on.
pub(super) struct Checker<'a> {
    pub(super) problems: Vec<Problem>,
    pub(super) vars: &'a dyn Vars,
    pub(super) base_dir: PathBuf,
}

impl Checker<'_> {
    pub(super) fn problem(&mut self, key: impl Into<String>, message: impl Into<String>) {
        self.problems.push(Problem {
            key: key.into(),
            message: message.into(),
        });
    }

    pub(super) fn problem_count(&self) -> usize {
        self.problems.len()
    }

    /// Expands placeholders; on failure records the problem and returns `None`.
    pub(super) fn expand(&mut self, key: &str, value: &str) -> Option<String> {
        expand_at(value, self.vars, &self.base_dir)
            .map_err(|reason| self.problem(key, reason))
            .ok()
    }

    pub(super) fn seconds(&mut self, key: &str, value: Option<f64>, default: Duration) -> Duration {
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
}

/// A map that keeps its keys in file order and remembers keys given more than once (JSON allows
/// duplicates syntactically; TOML rejects them while parsing).
#[derive(Debug)]
pub struct Entries<T> {
    pub items: Vec<(String, T)>,
    pub duplicates: Vec<String>,
}

impl<T> Default for Entries<T> {
    fn default() -> Self {
        Self {
            items: Vec::new(),
            duplicates: Vec::new(),
        }
    }
}

impl<T> Entries<T> {
    pub fn iter(&self) -> impl Iterator<Item = (&str, &T)> {
        self.items.iter().map(|(k, v)| (k.as_str(), v))
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Entries<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct EntriesVisitor<T>(PhantomData<T>);

        impl<'de, T: Deserialize<'de>> Visitor<'de> for EntriesVisitor<T> {
            type Value = Entries<T>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a table")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut entries = Entries::default();
                let mut seen = HashSet::new();
                while let Some(key) = map.next_key::<String>()? {
                    let value = map.next_value::<T>()?;
                    if seen.insert(key.clone()) {
                        entries.items.push((key, value));
                    } else {
                        entries.duplicates.push(key);
                    }
                }
                Ok(entries)
            }
        }

        deserializer.deserialize_map(EntriesVisitor(PhantomData))
    }
}

/// A table of entries named by the file (`[upstreams.NAME]`, `env = { NAME = … }`): any key,
/// each value a `T`.
impl<T: schemars::JsonSchema> schemars::JsonSchema for Entries<T> {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> std::borrow::Cow<'static, str> {
        format!("Entries_of_{}", T::schema_name()).into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "object",
            "additionalProperties": generator.subschema_for::<T>(),
        })
    }
}

/// The key path of `name` under `base` (`base.name`; `name` alone at the top, where `base` is
/// empty), `name` quoted where it must be.
pub fn key_under(base: &str, name: &str) -> String {
    match base {
        "" => key_segment(name),
        base => format!("{base}.{}", key_segment(name)),
    }
}

/// A key path segment, quoted when it is not a bare TOML key.
pub fn key_segment(name: &str) -> String {
    if !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        name.to_owned()
    } else {
        format!("{name:?}")
    }
}

/// A 32-byte key in base64 (standard, or URL-safe without padding), spaces around it aside.
pub fn decode_key(text: &str) -> Option<[u8; 32]> {
    let text = text.trim();
    let bytes = STANDARD
        .decode(text)
        .or_else(|_| URL_SAFE_NO_PAD.decode(text.trim_end_matches('=')))
        .ok()?;
    bytes.try_into().ok()
}

/// The paths of Switchyard's own endpoints (served by `front`), which the MCP endpoint cannot
/// take.
pub const RESERVED_PATHS: [&str; 3] = ["/healthz", "/oauth", "/.well-known"];

/// Whether `path` is, or lies under, one of Switchyard's own endpoints.
pub fn is_reserved_path(path: &str) -> bool {
    let path = path.trim_end_matches('/');
    RESERVED_PATHS.iter().any(|own| {
        path == *own
            || path
                .strip_prefix(own)
                .is_some_and(|rest| rest.starts_with('/'))
    })
}
