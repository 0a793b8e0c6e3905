//! OpenTelemetry traces (`[telemetry]`), and the subscriber the logs share with them (`logs`): a server span for each sampled MCP request, with
//! child spans for its routing, its wait for a connection, its upstream call, OAuth refreshes
//! and store calls, exported over OTLP/HTTP by a batch processor on its own thread.
//!
//! Whether a request is traced is decided once, as it arrives (`Trace::of`): a client's
//! `traceparent` (header, or `params._meta`) decides for its own requests, the others are
//! traced at `sampling_ratio`. A request that is not traced makes no span at all, and with
//! telemetry off nothing is decided: the spans' call sites are never enabled. Spans carry the
//! method, the tool, prompt or resource, the upstream, the era, the outcome and the principal's
//! subject; never arguments, results or credentials.
//!
//! The trace goes on to every upstream (`context`): as a `traceparent` header on HTTP and in
//! `params._meta.traceparent` on every transport, naming the span of the upstream call.

mod context;
pub mod logs;

pub use context::{Arriving, Passed, TRACEPARENT, TRACESTATE, Trace};

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::{Resource, trace::SdkTracerProvider};

use crate::config::TelemetrySettings;

/// The target of Switchyard's trace spans: the only ones the OTLP layer takes, and off for
/// the logs unless `RUST_LOG` asks for them.
pub const TARGET: &str = "switchyard::telemetry";

/// Whether traces are exported: set once, at start.
static ON: AtomicBool = AtomicBool::new(false);
/// `sampling_ratio`, as the bits of an `f64`.
static RATIO: AtomicU64 = AtomicU64::new(0);

fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

fn ratio() -> f64 {
    f64::from_bits(RATIO.load(Ordering::Relaxed))
}

/// The exporter of a process that traces: flushed and stopped by `shutdown`.
pub struct Exporter {
    provider: SdkTracerProvider,
}

impl Exporter {
    /// Sends what is still buffered and stops (at exit; it blocks for up to a few seconds).
    pub fn shutdown(self) {
        if let Err(error) = self.provider.shutdown() {
            eprintln!("switchyard: the last spans could not be exported: {error}");
        }
    }
}

/// The layer that turns Switchyard's trace spans into OpenTelemetry spans sent to the
/// collector `settings` name, and the exporter behind it; `None` when telemetry is off.
/// Call it outside the async runtime (the exporter's HTTP client runs its own).
pub fn layer<S>(
    settings: &TelemetrySettings,
) -> anyhow::Result<Option<(impl tracing_subscriber::Layer<S>, Exporter)>>
where
    S: tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span>,
{
    use tracing_subscriber::Layer as _;
    let Some(url) = &settings.traces_url else {
        return Ok(None);
    };
    let headers = settings
        .headers
        .iter()
        .filter_map(|(name, value)| Some((name.to_string(), value.to_str().ok()?.to_owned())))
        .collect();
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(url.as_str())
        .with_headers(headers)
        .build()
        .map_err(|error| anyhow::anyhow!("cannot set up the OTLP exporter (telemetry): {error}"))?;
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(
            Resource::builder()
                .with_service_name(settings.service_name.clone())
                .build(),
        )
        .build();
    let tracer = provider.tracer("switchyard");
    let layer = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_location(false)
        .with_threads(false)
        .with_level(false)
        .with_target(false)
        .with_tracked_inactivity(false)
        .with_filter(
            tracing_subscriber::filter::Targets::new().with_target(TARGET, tracing::Level::TRACE),
        );
    RATIO.store(settings.sampling_ratio.to_bits(), Ordering::Relaxed);
    ON.store(true, Ordering::Relaxed);
    Ok(Some((layer, Exporter { provider })))
}

/// A child span of the current request's trace named `name` (routing, waiting for a
/// connection, an OAuth refresh, a store call), or a disabled span where the current span is
/// not one of a traced request.
pub fn child(name: &'static str) -> tracing::Span {
    if !on() || !in_trace() {
        return tracing::Span::none();
    }
    tracing::trace_span!(target: TARGET, "switchyard", otel.name = name)
}

/// Whether the current span is one of a traced request.
fn in_trace() -> bool {
    tracing::Span::current()
        .metadata()
        .is_some_and(|metadata| metadata.target() == TARGET)
}
