//! `[upstreams.NAME.sandbox]`: what a stdio server may touch — the paths it may read and
//! write, whether it may open sockets, and its resource limits — as written and as checked.
//! `upstream::sandbox` enforces it when the process starts.

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::Deserialize;

use super::super::{keys::Checker, kinds::Expanded};

/// `[upstreams.NAME.sandbox]` as written.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[schemars(rename = "Sandbox")]
pub struct RawSandbox {
    /// Paths the server may read and run programs from, besides the system's (`/usr`,
    /// `/lib`, `/etc`, `/proc`, …), its own program and its `cwd`. Relative to this file's
    /// directory.
    #[schemars(with = "Option<Vec<Expanded>>")]
    pub read: Option<Vec<String>>,
    /// Paths the server may read, write, create and delete in.
    #[schemars(with = "Option<Vec<Expanded>>")]
    pub write: Option<Vec<String>>,
    /// `false`: the server opens no socket (pipes and socket pairs stay), in a network
    /// namespace of its own where the kernel allows one.
    #[schemars(extend("default" = true))]
    pub network: Option<bool>,
    /// The most memory the server may map for its data (`RLIMIT_DATA`). MiB.
    #[schemars(range(min = 16))]
    pub memory_mb: Option<u64>,
    /// The most processes (and threads) the server may have at once, itself included, where
    /// it runs in a user namespace of its own; else they count with all of the user's.
    /// Processes.
    #[schemars(range(min = 1))]
    pub processes: Option<u64>,
    /// The most files the server may hold open at once. Files.
    #[schemars(range(min = 16))]
    pub open_files: Option<u64>,
    /// `true`: the server is not started where the kernel cannot enforce all of the above
    /// (by default it runs with what the kernel can, and says what is missing).
    #[schemars(extend("default" = false))]
    pub required: Option<bool>,
}

/// A stdio server's sandbox, checked: paths are absolute.
#[derive(Debug, Clone, PartialEq)]
pub struct SandboxConfig {
    pub read: Vec<PathBuf>,
    pub write: Vec<PathBuf>,
    pub network: bool,
    pub memory_bytes: Option<u64>,
    pub processes: Option<u64>,
    pub open_files: Option<u64>,
    pub required: bool,
}

impl Checker<'_> {
    pub(super) fn sandbox(&mut self, key: &str, raw: &RawSandbox) -> SandboxConfig {
        let key = format!("{key}.sandbox");
        let read = self.sandbox_paths(&format!("{key}.read"), raw.read.as_deref());
        let write = self.sandbox_paths(&format!("{key}.write"), raw.write.as_deref());
        let memory_mb = self.at_least(&format!("{key}.memory_mb"), raw.memory_mb, 16);
        SandboxConfig {
            read,
            write,
            network: raw.network.unwrap_or(true),
            memory_bytes: memory_mb.map(|mb| mb.saturating_mul(1 << 20)),
            processes: self.at_least(&format!("{key}.processes"), raw.processes, 1),
            open_files: self.at_least(&format!("{key}.open_files"), raw.open_files, 16),
            required: raw.required.unwrap_or(false),
        }
    }

    fn sandbox_paths(&mut self, key: &str, raw: Option<&[String]>) -> Vec<PathBuf> {
        let mut paths = Vec::new();
        for (i, path) in raw.unwrap_or_default().iter().enumerate() {
            let at = format!("{key}[{i}]");
            let Some(path) = self.expand(&at, path) else {
                continue;
            };
            if path.is_empty() {
                self.problem(at, "is empty");
                continue;
            }
            paths.push(self.base_dir.join(path));
        }
        paths
    }

    fn at_least(&mut self, key: &str, value: Option<u64>, least: u64) -> Option<u64> {
        let value = value?;
        if value < least {
            self.problem(key, format!("must be at least {least}"));
        }
        Some(value.max(least))
    }
}
