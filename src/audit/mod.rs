//! The audit log (`[audit]`): one JSON record per routed call (`tools/call`, `prompts/get`,
//! `resources/read`), refused call, authentication failure, admin change, approval and reload —
//! when, who, where, which upstream and item, how it ended and how long it took, and the call's
//! arguments as a digest, in full or not at all. Records form a hash chain (`chain`) that
//! `switchyard audit verify` checks (`verify`).
//!
//! Recording never waits for the disk: a record goes into a bounded queue, and one thread
//! writes the queue out (`writer`). When the queue is full the record is dropped, counted
//! (`switchyard_audit_records_total{outcome="dropped"}`) and logged — a call is not held up
//! by a slow disk — unless `fail_closed = true`, where calls are refused instead while the
//! queue is full, so that nothing happens that the log does not show.

mod chain;
pub mod head;
mod verify;
mod writer;

pub use chain::sha256_hex;

use std::{
    sync::atomic::{AtomicU64, Ordering},
    time::{Duration, Instant, SystemTime},
};

use serde::Serialize;
use serde_json::{Value, value::RawValue};
use tokio::sync::mpsc;

pub use verify::{Checks, Verified, verify};

use crate::{
    config::{AuditArguments, AuditOutput, AuditSettings},
    metrics::Metrics,
    wire,
};

/// How often a dropped record is logged at most.
const DROP_WARNING_EVERY: Duration = Duration::from_secs(10);
/// How long the writer lets records gather after writing a batch (the most a record waits).
const GATHER: Duration = Duration::from_millis(2);
/// Records written at most before they are handed to the system.
const BATCH: usize = 256;

/// One thing that happened.
#[derive(Debug, Default, Serialize)]
pub struct Record<'a> {
    /// `tools/call`, `prompts/get`, `resources/read`, `auth`, `admin`, `reload`, ….
    pub kind: &'a str,
    /// Who: the principal, or `admin` for the admin API.
    pub principal: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<&'a str>,
    /// The session's short hash.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upstream: Option<&'a str>,
    /// The tool or prompt (the upstream's name for it), or the resource URI.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub item: Option<&'a str>,
    /// `ok`, `tool_error` (the tool said `isError`), `error`, `refused`, …
    pub outcome: &'a str,
    /// The JSON-RPC error code, for an error.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<&'a str>,
    /// For `oauth_grant`: how the upstream's token was had (`authorization_code`,
    /// `token_exchange`, `client_credentials`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grant: Option<&'a str>,
}

/// How an answer saying `outcome` ended, and its JSON-RPC error code if it is an error;
/// `routed`: whether the request reached an upstream (an unrouted one was refused).
pub fn outcome_of(outcome: wire::Outcome, routed: bool) -> (&'static str, Option<i64>) {
    match outcome {
        // A tool's failure, or, unrouted, the arguments Switchyard did not pass on.
        wire::Outcome::ToolError => (if routed { "tool_error" } else { "refused" }, None),
        wire::Outcome::Result => ("ok", None),
        wire::Outcome::Error { code, .. } => {
            // An unknown name (unrouted) and a call beyond a quota are refused; the rest failed.
            let refused = !routed || code == crate::protocol::QUOTA_EXCEEDED;
            (
                if refused { "refused" } else { "error" },
                Some(i64::from(code)),
            )
        }
    }
}

fn now_millis() -> u128 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis()
}

/// `json` with the line breaks JSON leaves raw escaped: U+2028, U+2029 and U+0085 end a line
/// for many readers of logs (and U+2028/9 for JavaScript), so a name holding one could split a
/// record in two where it is read. JSON writes them only inside strings, where `\uXXXX` means
/// the same.
fn one_line(json: String) -> String {
    if !json.contains(['\u{2028}', '\u{2029}', '\u{85}']) {
        return json;
    }
    json.replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029")
        .replace('\u{85}', "\\u0085")
}

/// The audit log, or none.
pub struct Audit {
    queue: Option<mpsc::Sender<String>>,
    arguments: AuditArguments,
    fail_closed: bool,
    metrics: std::sync::Arc<Metrics>,
    started: Instant,
    /// When a dropped record was last logged (milliseconds since `started`, plus one).
    warned: AtomicU64,
}

impl Audit {
    /// The log `settings` describe, its writer started; off if they name no output. A file
    /// that cannot be opened is a start-up error. Its head is kept in `state_dir`.
    pub fn start(
        settings: &AuditSettings,
        state_dir: &std::path::Path,
        metrics: std::sync::Arc<Metrics>,
    ) -> std::io::Result<Self> {
        let mut audit = Self {
            queue: None,
            arguments: settings.arguments,
            fail_closed: settings.fail_closed,
            metrics,
            started: Instant::now(),
            warned: AtomicU64::new(0),
        };
        let Some(output) = &settings.output else {
            return Ok(audit);
        };
        let kept = match output {
            AuditOutput::File { path, .. } => Some(head::path_for(state_dir, path)),
            AuditOutput::Stdout => None,
        };
        let (mut writer, lost) = writer::Writer::open(output, kept.as_deref())?;
        let (sender, mut receiver) = mpsc::channel::<String>(settings.queue);
        if let Some(lost) = lost {
            let _ = sender.try_send(format!("\"at_ms\":{},{lost}", now_millis()));
        }
        let counted = audit.metrics.clone();
        std::thread::Builder::new()
            .name("switchyard-audit".into())
            .spawn(move || {
                while let Some(first) = receiver.blocking_recv() {
                    let mut next = Some(first);
                    let mut written = 0;
                    while let Some(fields) = next.take() {
                        let outcome = match writer.write(&fields) {
                            Ok(()) => "written",
                            Err(error) => {
                                tracing::error!(%error, "an audit record cannot be written");
                                "failed"
                            }
                        };
                        counted.audit.with_label_values(&[outcome]).inc();
                        counted.audit_head.set(writer.seq() as i64);
                        written += 1;
                        if written < BATCH {
                            next = receiver.try_recv().ok();
                        }
                    }
                    // The queue is empty (or a batch is done): out to the file.
                    if let Err(error) = writer.flush() {
                        tracing::error!(%error, "audit records cannot be written");
                    }
                    // Records gather meanwhile, queued without waking this thread for each:
                    // under load, one wake-up per batch rather than per call.
                    std::thread::sleep(GATHER);
                }
                if let Err(error) = writer.sync() {
                    tracing::error!(%error, "the audit log cannot be flushed");
                }
            })?;
        audit.queue = Some(sender);
        Ok(audit)
    }

    /// Whether the log `settings` describe can be opened (before the gateway starts, so that a
    /// file it cannot write is a start-up error rather than a log without records).
    pub fn check(settings: &AuditSettings) -> std::io::Result<()> {
        match &settings.output {
            Some(output) => writer::Writer::open(output, None).map(drop),
            None => Ok(()),
        }
    }

    /// A log that records nothing.
    pub fn off(metrics: std::sync::Arc<Metrics>) -> Self {
        Self::start(&AuditSettings::default(), std::path::Path::new(""), metrics)
            .expect("no output, nothing to open")
    }

    pub fn is_on(&self) -> bool {
        self.queue.is_some()
    }

    /// Whether calls must be refused now: `fail_closed`, and records cannot be queued.
    pub fn refuses(&self) -> bool {
        self.fail_closed
            && self
                .queue
                .as_ref()
                .is_some_and(|queue| queue.capacity() == 0)
    }

    /// How `arguments` (as the client sent them) appear in a record, by `mode` (an upstream's
    /// own) or the log's.
    pub fn arguments(
        &self,
        mode: Option<AuditArguments>,
        arguments: Option<&RawValue>,
    ) -> Option<Value> {
        let arguments = arguments?;
        match mode.unwrap_or(self.arguments) {
            AuditArguments::None => None,
            AuditArguments::Sha256 => Some(serde_json::json!({
                "sha256": chain::sha256_hex(arguments.get().as_bytes())
            })),
            AuditArguments::Full => serde_json::from_str(arguments.get()).ok(),
        }
    }

    /// Queues `record`, stamped now; dropped (counted, logged) if the queue is full.
    pub fn record(&self, record: &Record<'_>) {
        let Some(queue) = &self.queue else {
            return;
        };
        let millis = now_millis();
        let Ok(text) = serde_json::to_string(record) else {
            return;
        };
        let text = one_line(text);
        // `{"kind":…}` → `"at_ms":N,"kind":…` (the writer adds `seq` before and the chain after).
        let fields = format!("\"at_ms\":{millis},{}", &text[1..text.len() - 1]);
        if queue.try_send(fields).is_err() {
            self.metrics.audit.with_label_values(&["dropped"]).inc();
            let now = self.started.elapsed().as_millis() as u64 + 1;
            let last = self.warned.load(Ordering::Relaxed);
            if (last == 0 || now.saturating_sub(last) >= DROP_WARNING_EVERY.as_millis() as u64)
                && self
                    .warned
                    .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok()
            {
                tracing::warn!(
                    "audit records are dropped: the log cannot be written as fast as calls come \
                     (switchyard_audit_records_total{{outcome=\"dropped\"}} counts them)"
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_one_line_whatever_its_names_hold() {
        let record = Record {
            kind: "tools/call",
            principal: "user:a\u{2028}b",
            item: Some("x\u{85}y\u{2029}z\n"),
            outcome: "ok",
            ..Default::default()
        };
        let line = one_line(serde_json::to_string(&record).unwrap());
        for separator in ['\u{2028}', '\u{2029}', '\u{85}', '\n'] {
            assert!(!line.contains(separator), "{line:?}");
        }
        let read: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(read["principal"], "user:a\u{2028}b");
        assert_eq!(read["item"], "x\u{85}y\u{2029}z\n");
    }
}
