//! Checking `[store]`: where the state that outlives one request is kept. `embedded` (the
//! default) keeps it in a file under the state directory, so that a restart loses no session;
//! `memory` keeps it in the process alone; `redis` shares it between replicas, which must then
//! also share the keys that seal session ids.

use std::{fmt, path::PathBuf};

use schemars::JsonSchema;
use serde::Deserialize;

use super::{
    keys::{Checker, decode_key},
    kinds::Expanded,
};

const DEFAULT_PREFIX: &str = "switchyard";
/// The embedded store's file in the state directory.
const DEFAULT_FILE: &str = "sessions.redb";

/// `[store]` as written. Changes take a restart.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[schemars(rename = "Store")]
pub struct RawStore {
    /// `embedded`: a file of this machine, kept across restarts; `memory`: this process
    /// alone; `redis`: shared by replicas.
    #[schemars(extend("enum" = ["embedded", "memory", "redis"], "default" = "embedded"))]
    pub kind: Option<String>,
    /// `embedded`: the store's file, relative to this file's directory. Default:
    /// `{state_dir}/sessions.redb`.
    #[schemars(with = "Option<Expanded>")]
    pub path: Option<String>,
    /// `redis`: the server, `redis://HOST:PORT/DB` (`rediss://` for TLS). Required there.
    #[schemars(with = "Option<Expanded>")]
    pub url: Option<String>,
    /// `redis`: every key starts with `PREFIX:` (gateways may share one Redis).
    #[schemars(extend("default" = DEFAULT_PREFIX, "pattern" = "^\\S+$"))]
    pub prefix: Option<String>,
    /// Keys that seal session ids, each 32 bytes in base64: the first seals new ones, all
    /// open them. Required with `redis`, the same on every replica. Default: the embedded
    /// store's own key, or the process's.
    #[schemars(with = "Option<Vec<Expanded>>")]
    pub session_keys: Option<Vec<String>>,
}

/// Where shared state lives.
#[derive(Clone, PartialEq, Eq)]
pub enum StoreKind {
    /// In a file of this machine (`path`; none: `sessions.redb` in `[oauth] state_dir`), kept
    /// across restarts and upgrades; tokens stay in the state directory's own files.
    Embedded { path: Option<PathBuf> },
    /// In this process alone: sessions end with it.
    Memory,
    /// In Redis at `url`, every key under `prefix:` (several gateways may share one Redis).
    Redis { url: String, prefix: String },
}

impl fmt::Debug for StoreKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreKind::Embedded { path } => f.debug_struct("Embedded").field("path", path).finish(),
            StoreKind::Memory => f.write_str("Memory"),
            // The URL may carry a password.
            StoreKind::Redis { prefix, .. } => write!(f, "Redis {{ prefix: {prefix:?}, .. }}"),
        }
    }
}

/// `[store]`, checked.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct StoreSettings {
    pub kind: StoreKind,
    /// The keys session ids are sealed with: the first seals new ones, every one opens. Empty:
    /// the embedded store's own key (kept beside its file), or, in memory, the process's own.
    pub session_keys: Vec<[u8; 32]>,
}

impl fmt::Debug for StoreSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoreSettings")
            .field("kind", &self.kind)
            .field("session_keys", &self.session_keys.len())
            .finish()
    }
}

impl Default for StoreKind {
    fn default() -> Self {
        StoreKind::Embedded { path: None }
    }
}

impl StoreSettings {
    pub fn is_shared(&self) -> bool {
        matches!(self.kind, StoreKind::Redis { .. })
    }

    /// The embedded store's file, if the store is that: as configured, else
    /// `sessions.redb` in `state_dir`.
    pub fn file(&self, state_dir: &std::path::Path) -> Option<PathBuf> {
        match &self.kind {
            StoreKind::Embedded { path } => {
                Some(path.clone().unwrap_or_else(|| state_dir.join(DEFAULT_FILE)))
            }
            StoreKind::Memory | StoreKind::Redis { .. } => None,
        }
    }
}

impl Checker<'_> {
    pub(super) fn store(&mut self, raw: Option<&RawStore>) -> StoreSettings {
        let Some(raw) = raw else {
            return StoreSettings::default();
        };
        let mut session_keys = Vec::new();
        for (n, text) in raw.session_keys.iter().flatten().enumerate() {
            let key = format!("store.session_keys[{n}]");
            let Some(text) = self.expand(&key, text) else {
                continue;
            };
            match decode_key(&text) {
                Some(bytes) if session_keys.contains(&bytes) => {
                    self.problem(key, "repeats an earlier key");
                }
                Some(bytes) => session_keys.push(bytes),
                None => self.problem(
                    key,
                    "must be 32 bytes in base64 (e.g. the output of `openssl rand -base64 32`)",
                ),
            }
        }
        let kind = raw.kind.as_deref().unwrap_or("embedded");
        if kind != "redis" {
            let only_redis = "applies to kind = \"redis\" only";
            if raw.url.is_some() {
                self.problem("store.url", only_redis);
            }
            if raw.prefix.is_some() {
                self.problem("store.prefix", only_redis);
            }
        }
        if kind != "embedded" && raw.path.is_some() {
            self.problem("store.path", "applies to kind = \"embedded\" only");
        }
        let kind = match kind {
            "embedded" => StoreKind::Embedded {
                path: raw
                    .path
                    .as_deref()
                    .map(|path| self.path("store.path", path)),
            },
            "memory" => StoreKind::Memory,
            "redis" => self.redis(raw, session_keys.is_empty()),
            other => {
                self.problem(
                    "store.kind",
                    format!("must be \"embedded\", \"memory\" or \"redis\", not {other:?}"),
                );
                StoreKind::default()
            }
        };
        StoreSettings { kind, session_keys }
    }

    fn redis(&mut self, raw: &RawStore, no_keys: bool) -> StoreKind {
        if no_keys {
            self.problem(
                "store.session_keys",
                "replicas must share the key that seals session ids: give at least one (32 \
                 random bytes in base64, e.g. `openssl rand -base64 32`), the same on every \
                 replica",
            );
        }
        let url = match raw.url.as_deref() {
            None => {
                self.problem("store.url", "is required with kind = \"redis\"");
                String::new()
            }
            Some(text) => match self.expand("store.url", text) {
                Some(url) => {
                    if let Err(error) = redis::Client::open(url.as_str()) {
                        self.problem(
                            "store.url",
                            format!("is not a Redis URL (redis://HOST:PORT/DB): {error}"),
                        );
                    }
                    url
                }
                None => String::new(),
            },
        };
        let prefix = raw.prefix.as_deref().unwrap_or(DEFAULT_PREFIX);
        if prefix.is_empty() || prefix.chars().any(|c| c.is_whitespace() || c.is_control()) {
            self.problem(
                "store.prefix",
                "must be a non-empty name without spaces (every key starts with it)",
            );
        }
        StoreKind::Redis {
            url,
            prefix: prefix.to_owned(),
        }
    }
}
