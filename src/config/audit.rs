//! `[audit]`: the audit log, as written and as checked — where records go (a file, rotated by
//! size, or standard output), how tool arguments are kept (`none`, a `sha256` digest, or
//! `full`; per upstream with `audit_arguments`), how many records may wait to be written, and
//! what happens when they cannot (`fail_closed`).

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::Deserialize;

use super::{keys::Checker, kinds::Expanded};

const DEFAULT_MAX_FILE_BYTES: u64 = 100 * 1024 * 1024;
const DEFAULT_MAX_FILES: u32 = 10;
const DEFAULT_QUEUE: u32 = 10_000;

/// `[audit]` as written: one output, `file` or `stdout = true`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[schemars(rename = "Audit")]
pub struct RawAudit {
    /// `false` turns the audit log off, the table kept.
    #[schemars(extend("default" = true))]
    pub enabled: Option<bool>,
    /// The log file (JSON lines, hash-chained), relative to this file's directory; renamed
    /// `FILE.1` (older ones `.2`, …) when it outgrows `max_file_bytes`.
    #[schemars(with = "Option<Expanded>")]
    pub file: Option<String>,
    /// Write records to standard output instead of a file.
    #[schemars(extend("default" = false))]
    pub stdout: Option<bool>,
    /// A file's size at which it is rotated. Bytes, at least 4096.
    #[schemars(range(min = 4096), extend("default" = DEFAULT_MAX_FILE_BYTES))]
    pub max_file_bytes: Option<u64>,
    /// Rotated files kept besides the current one. Files.
    #[schemars(extend("default" = DEFAULT_MAX_FILES))]
    pub max_files: Option<u32>,
    /// How a call's arguments appear in its record: `none`, `sha256` (a digest of the JSON
    /// text) or `full`. An upstream's `audit_arguments` overrides it.
    #[schemars(extend("enum" = ["none", "sha256", "full"], "default" = "sha256"))]
    pub arguments: Option<String>,
    /// Records that may wait for the writer. Records.
    #[schemars(range(min = 1), extend("default" = DEFAULT_QUEUE))]
    pub queue: Option<u32>,
    /// Refuse calls while records cannot be written (the queue is full), rather than drop
    /// records.
    #[schemars(extend("default" = false))]
    pub fail_closed: Option<bool>,
}

/// Where audit records go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuditOutput {
    Stdout,
    /// A file, renamed to `FILE.1` (and older ones to `.2`, …) when it outgrows its size.
    File {
        path: PathBuf,
        max_bytes: u64,
        /// Rotated files kept besides the current one.
        keep: u32,
    },
}

/// How a call's arguments appear in its audit record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AuditArguments {
    None,
    /// Their SHA-256, of the JSON text as the client sent it.
    #[default]
    Sha256,
    Full,
}

/// `[audit]`, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditSettings {
    /// `None`: no audit log (the default).
    pub output: Option<AuditOutput>,
    pub arguments: AuditArguments,
    /// Records that may wait for the writer.
    pub queue: usize,
    /// Refuse calls while records cannot be written (the queue is full), instead of dropping
    /// records.
    pub fail_closed: bool,
}

impl Default for AuditSettings {
    fn default() -> Self {
        Self {
            output: None,
            arguments: AuditArguments::Sha256,
            queue: DEFAULT_QUEUE as usize,
            fail_closed: false,
        }
    }
}

impl Checker<'_> {
    pub(super) fn audit(&mut self, raw: Option<&RawAudit>) -> AuditSettings {
        let Some(raw) = raw else {
            return AuditSettings::default();
        };
        let arguments = raw
            .arguments
            .as_deref()
            .map_or(Some(AuditArguments::Sha256), |text| {
                self.audit_arguments("audit.arguments", text)
            })
            .unwrap_or_default();
        let queue = raw.queue.unwrap_or(DEFAULT_QUEUE);
        if queue == 0 {
            self.problem("audit.queue", "must be at least 1");
        }
        let enabled = raw.enabled.unwrap_or(true);
        let output = match (&raw.file, raw.stdout.unwrap_or(false)) {
            _ if !enabled => None,
            (Some(_), true) => {
                self.problem("audit.stdout", "give `file` or `stdout = true`, not both");
                None
            }
            (Some(file), false) => {
                let max_bytes = raw.max_file_bytes.unwrap_or(DEFAULT_MAX_FILE_BYTES);
                if max_bytes < 4096 {
                    self.problem("audit.max_file_bytes", "must be at least 4096");
                }
                let path = self.expand("audit.file", file).map(|file| {
                    let path = PathBuf::from(file);
                    if path.is_absolute() {
                        path
                    } else {
                        self.base_dir.join(path)
                    }
                });
                path.map(|path| AuditOutput::File {
                    path,
                    max_bytes,
                    keep: raw.max_files.unwrap_or(DEFAULT_MAX_FILES),
                })
            }
            (None, true) => Some(AuditOutput::Stdout),
            (None, false) => {
                self.problem(
                    "audit",
                    "names no output: give `file = \"PATH\"` or `stdout = true` (or `enabled = false`)",
                );
                None
            }
        };
        AuditSettings {
            output,
            arguments,
            queue: queue.max(1) as usize,
            fail_closed: raw.fail_closed.unwrap_or(false),
        }
    }

    /// An `arguments` value at `key`.
    pub(super) fn audit_arguments(&mut self, key: &str, text: &str) -> Option<AuditArguments> {
        match text {
            "none" => Some(AuditArguments::None),
            "sha256" => Some(AuditArguments::Sha256),
            "full" => Some(AuditArguments::Full),
            other => {
                self.problem(
                    key,
                    format!("`{other}` is not one of `none`, `sha256`, `full`"),
                );
                None
            }
        }
    }
}
