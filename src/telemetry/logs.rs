//! The process's one tracing subscriber: the logs, on stderr (stdout is the protocol channel
//! of `demo-server`), filtered by `RUST_LOG`, as text or JSON lines; and, with `[telemetry]`,
//! the layer that exports trace spans. Each has its own filter.

use tracing_subscriber::{
    EnvFilter, Layer as _, layer::SubscriberExt as _, util::SubscriberInitExt as _,
};

use super::Exporter;
use crate::config::TelemetrySettings;

/// rmcp's HTTP client and transport worker log their failures with the upstream's URL, whose
/// query may hold a secret, and Switchyard reports those failures itself: their lines are off
/// unless `RUST_LOG` names rmcp.
const QUIET: &str = "rmcp::transport::streamable_http_client=off,rmcp::transport::worker=off";

/// Installs the subscriber: logs as JSON lines if `json`, else text; traces if `telemetry`
/// names a collector (its exporter returned, to be shut down at exit). Call it once, outside
/// the async runtime.
pub fn install(
    json: bool,
    telemetry: Option<&TelemetrySettings>,
) -> anyhow::Result<Option<Exporter>> {
    let filter = match std::env::var("RUST_LOG") {
        Ok(asked) if asked.contains("rmcp") => EnvFilter::new(asked),
        Ok(asked) if !asked.trim().is_empty() => EnvFilter::new(format!("{asked},{QUIET}")),
        _ => EnvFilter::new(format!("info,rmcp=warn,{QUIET}")),
    };
    let logs = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let logs = if json {
        logs.json().flatten_event(true).with_filter(filter).boxed()
    } else {
        logs.with_filter(filter).boxed()
    };
    let (traces, exporter) = match telemetry {
        Some(settings) => super::layer(settings)?.unzip(),
        None => (None, None),
    };
    tracing_subscriber::registry()
        .with(logs)
        .with(traces)
        .init();
    Ok(exporter)
}
