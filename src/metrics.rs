//! Prometheus metrics, in a registry passed in (no globals).
//!
//! The hot path touches only series resolved beforehand: the per-method request series are an
//! array indexed by method, and each upstream carries the series of its tools (made when it
//! is discovered), so a call increments atomics and looks nothing up under a lock. Gauges of
//! the gateway's state (upstream states, requests in flight and queued per upstream, catalog
//! sizes) and counters kept by the upstreams themselves (restarts, failed health checks, OAuth
//! refreshes) are read at scrape time instead, from the live state (`gateway::scrape`).
//!
//! Label cardinality is bounded: methods outside the known set count as `other`, and at most
//! `TOOLS_PER_UPSTREAM` tools of an upstream get a series of their own (the rest: `other`).
//! Nothing from a request other than these names ever becomes a label.

use foldhash::fast::RandomState;
use std::{collections::HashMap, sync::Arc, time::Instant};

use prometheus::{
    Encoder, Gauge, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    Opts, Registry, TextEncoder, core::Collector, proto::MetricFamily,
};

/// Tools of one upstream with series of their own; the others share `other`.
pub const TOOLS_PER_UPSTREAM: usize = 100;

/// The methods counted under their own name.
const METHODS: [&str; 20] = [
    "initialize",
    "ping",
    "tools/list",
    "tools/call",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "completion/complete",
    "logging/setLevel",
    "server/discover",
    "subscriptions/listen",
    "tasks/get",
    "tasks/list",
    "tasks/result",
    "tasks/cancel",
    "other",
];

/// Latency buckets, in seconds: from 100 µs (a gateway hop) to 2 minutes (a long tool).
const BUCKETS: [f64; 17] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    10.0, 30.0, 120.0,
];

/// How a downstream request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    /// A JSON-RPC error answer.
    Error,
}

/// How a tool call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolOutcome {
    Success,
    /// The tool ran and reported a failure (`isError: true`).
    ToolError,
    /// A JSON-RPC error: from the upstream, a timeout, or the upstream unavailable.
    Error,
}

/// The series of one method.
struct MethodSeries {
    ok: IntCounter,
    error: IntCounter,
    duration: Histogram,
}

/// The series of one tool of one upstream.
#[derive(Clone)]
pub struct ToolSeries {
    success: IntCounter,
    tool_error: IntCounter,
    error: IntCounter,
    duration: Histogram,
}

impl ToolSeries {
    pub fn record(&self, outcome: ToolOutcome, started: Instant) {
        match outcome {
            ToolOutcome::Success => &self.success,
            ToolOutcome::ToolError => &self.tool_error,
            ToolOutcome::Error => &self.error,
        }
        .inc();
        self.duration.observe(started.elapsed().as_secs_f64());
    }
}

/// What happened to a task (one created by a tool call through Switchyard).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskEvent {
    Created,
    Completed,
    Failed,
    Cancelled,
}

impl TaskEvent {
    const ALL: [TaskEvent; 4] = [
        TaskEvent::Created,
        TaskEvent::Completed,
        TaskEvent::Failed,
        TaskEvent::Cancelled,
    ];

    fn label(self) -> &'static str {
        match self {
            TaskEvent::Created => "created",
            TaskEvent::Completed => "completed",
            TaskEvent::Failed => "failed",
            TaskEvent::Cancelled => "cancelled",
        }
    }

    /// The end a task `status` names, if it names one.
    pub fn of_status(status: &str) -> Option<Self> {
        match status {
            "completed" => Some(TaskEvent::Completed),
            "failed" => Some(TaskEvent::Failed),
            "cancelled" => Some(TaskEvent::Cancelled),
            _ => None,
        }
    }
}

/// The tool series of one upstream, by the upstream's own tool names, and its task series.
pub struct ToolTable {
    tools: HashMap<Box<str>, ToolSeries, RandomState>,
    other: ToolSeries,
    tasks: [IntCounter; 4],
}

impl ToolTable {
    pub fn get(&self, tool: &str) -> &ToolSeries {
        self.tools.get(tool).unwrap_or(&self.other)
    }

    pub fn task(&self, event: TaskEvent) {
        self.tasks[event as usize].inc();
    }
}

/// Every series of the gateway.
pub struct Metrics {
    registry: Registry,
    methods: Vec<MethodSeries>,
    in_flight: IntGauge,
    tool_calls: IntCounterVec,
    tool_duration: HistogramVec,
    tasks: IntCounterVec,
    /// Changed definitions of pinned tools, held for approval, by upstream.
    pub tool_changes: IntCounterVec,
    /// Cached calls and reads by upstream and outcome (hit, miss, coalesced).
    pub cache: IntCounterVec,
    /// Audit records by outcome (written, dropped, failed).
    pub audit: IntCounterVec,
    /// The number of the last audit record written (where the chain stands).
    pub audit_head: IntGauge,
    /// Calls checked against a quota or a per-principal limit, by its name and outcome.
    pub quota: IntCounterVec,
    /// What guardrails did, by guardrail, phase and outcome (`guardrail_decided`).
    guardrail: IntCounterVec,
    pub sessions_active: IntGauge,
    pub sessions_opened: IntCounter,
    pub streams_open: IntGauge,
    /// Sessions another replica opened, served here from their ids.
    pub sessions_resumed: IntCounter,
    /// 1 while the shared store answers (always, for the embedded one).
    pub store_up: IntGauge,
    pub store_errors: IntCounter,
    reloads: IntCounterVec,
    last_reload: Gauge,
    /// Pass-through requests by upstream and status class, and their duration.
    passthrough: IntCounterVec,
    passthrough_duration: HistogramVec,
}

impl Metrics {
    /// Registers every series in `registry`.
    pub fn new(registry: Registry) -> prometheus::Result<Self> {
        let requests = IntCounterVec::new(
            Opts::new(
                "switchyard_requests_total",
                "Downstream JSON-RPC requests by method and outcome",
            ),
            &["method", "outcome"],
        )?;
        let request_duration = HistogramVec::new(
            HistogramOpts::new(
                "switchyard_request_duration_seconds",
                "Time to answer a downstream request, by method",
            )
            .buckets(BUCKETS.to_vec()),
            &["method"],
        )?;
        let methods = METHODS
            .iter()
            .map(|method| MethodSeries {
                ok: requests.with_label_values(&[*method, "ok"]),
                error: requests.with_label_values(&[*method, "error"]),
                duration: request_duration.with_label_values(&[*method]),
            })
            .collect();
        let metrics = Self {
            methods,
            in_flight: IntGauge::new(
                "switchyard_requests_in_flight",
                "Downstream requests being answered",
            )?,
            tool_calls: IntCounterVec::new(
                Opts::new(
                    "switchyard_tool_calls_total",
                    "Tool calls by upstream, tool and outcome (success, tool_error, error)",
                ),
                &["upstream", "tool", "outcome"],
            )?,
            tool_duration: HistogramVec::new(
                HistogramOpts::new(
                    "switchyard_tool_call_duration_seconds",
                    "Time to answer a tool call, by upstream and tool",
                )
                .buckets(BUCKETS.to_vec()),
                &["upstream", "tool"],
            )?,
            sessions_active: IntGauge::new("switchyard_sessions_active", "Client sessions open")?,
            sessions_opened: IntCounter::new(
                "switchyard_sessions_opened_total",
                "Client sessions opened",
            )?,
            streams_open: IntGauge::new(
                "switchyard_streams_open",
                "Event streams open to clients",
            )?,
            sessions_resumed: IntCounter::new(
                "switchyard_sessions_resumed_total",
                "Client sessions opened by another replica and served by this one",
            )?,
            store_up: IntGauge::new(
                "switchyard_store_up",
                "Whether the shared store (Redis) answers: 1 or 0 (always 1 when embedded)",
            )?,
            store_errors: IntCounter::new(
                "switchyard_store_errors_total",
                "Operations on the shared store that failed",
            )?,
            tasks: IntCounterVec::new(
                Opts::new(
                    "switchyard_tasks_total",
                    "Tasks created by tool calls through Switchyard, and those seen to end, by \
                     upstream and event (created, completed, failed, cancelled)",
                ),
                &["upstream", "event"],
            )?,
            tool_changes: IntCounterVec::new(
                Opts::new(
                    "switchyard_tool_definition_changes_total",
                    "Definitions of pinned tools that changed and wait for an operator's \
                     approval, by upstream",
                ),
                &["upstream"],
            )?,
            cache: IntCounterVec::new(
                Opts::new(
                    "switchyard_cache_total",
                    "Cacheable tool calls and resource reads by upstream and outcome (hit: \
                     answered from the cache; miss: sent upstream; coalesced: waited for an \
                     identical call in flight)",
                ),
                &["upstream", "outcome"],
            )?,
            audit: IntCounterVec::new(
                Opts::new(
                    "switchyard_audit_records_total",
                    "Audit records by outcome (written; dropped: the queue was full; failed: \
                     the write failed)",
                ),
                &["outcome"],
            )?,
            audit_head: IntGauge::new(
                "switchyard_audit_head_seq",
                "The number of the last audit record written: where the log's hash chain \
                 stands (a log that ends before it lost records)",
            )?,
            quota: IntCounterVec::new(
                Opts::new(
                    "switchyard_quota_checks_total",
                    "Calls checked against a quota (`[[quota]]` by name, or a per-principal \
                     `[limits]` key), by outcome (admitted; refused: beyond it, answered 429; \
                     local: admitted or refused by this process's own count while the shared \
                     store was unreachable)",
                ),
                &["quota", "outcome"],
            )?,
            guardrail: IntCounterVec::new(
                Opts::new(
                    "switchyard_guardrail_decisions_total",
                    "What guardrails did, by guardrail (its configured name), phase (call: \
                     before it is sent; result: before the client has it) and outcome \
                     (detectors: redacted, blocked, flagged, counted when they found something; \
                     policy hooks: allowed, denied, rewritten, failed_open, failed_closed)",
                ),
                &["guardrail", "phase", "outcome"],
            )?,
            reloads: IntCounterVec::new(
                Opts::new(
                    "switchyard_config_reloads_total",
                    "Configuration reloads by outcome (applied, rejected, unchanged)",
                ),
                &["outcome"],
            )?,
            last_reload: Gauge::new(
                "switchyard_config_last_reload_success_timestamp_seconds",
                "When the configuration was last loaded successfully (Unix seconds)",
            )?,
            passthrough: IntCounterVec::new(
                Opts::new(
                    "switchyard_passthrough_requests_total",
                    "Requests on the pass-through routes that found their upstream, by upstream \
                     and the answer's HTTP status class (2xx to 5xx, whether the upstream or \
                     Switchyard answered; `none` when the client left before an answer)",
                ),
                &["upstream", "status"],
            )?,
            passthrough_duration: HistogramVec::new(
                HistogramOpts::new(
                    "switchyard_passthrough_request_duration_seconds",
                    "Time to the end of each pass-through request's answer, by upstream and \
                     HTTP method (a GET's answer is an event stream: it lasts as long as the \
                     stream)",
                )
                .buckets(BUCKETS.to_vec()),
                &["upstream", "method"],
            )?,
            registry,
        };
        let registry = &metrics.registry;
        registry.register(Box::new(requests))?;
        registry.register(Box::new(request_duration))?;
        registry.register(Box::new(metrics.in_flight.clone()))?;
        registry.register(Box::new(metrics.tool_calls.clone()))?;
        registry.register(Box::new(metrics.tool_duration.clone()))?;
        registry.register(Box::new(metrics.tasks.clone()))?;
        registry.register(Box::new(metrics.tool_changes.clone()))?;
        registry.register(Box::new(metrics.cache.clone()))?;
        registry.register(Box::new(metrics.audit.clone()))?;
        registry.register(Box::new(metrics.audit_head.clone()))?;
        registry.register(Box::new(metrics.quota.clone()))?;
        registry.register(Box::new(metrics.guardrail.clone()))?;
        registry.register(Box::new(metrics.sessions_active.clone()))?;
        registry.register(Box::new(metrics.sessions_opened.clone()))?;
        registry.register(Box::new(metrics.streams_open.clone()))?;
        registry.register(Box::new(metrics.sessions_resumed.clone()))?;
        registry.register(Box::new(metrics.store_up.clone()))?;
        registry.register(Box::new(metrics.store_errors.clone()))?;
        registry.register(Box::new(metrics.reloads.clone()))?;
        registry.register(Box::new(metrics.last_reload.clone()))?;
        registry.register(Box::new(metrics.passthrough.clone()))?;
        registry.register(Box::new(metrics.passthrough_duration.clone()))?;
        for outcome in ["applied", "rejected", "unchanged"] {
            metrics.reloads.with_label_values(&[outcome]);
        }
        metrics.last_reload.set(unix_now());
        Ok(metrics)
    }

    /// Counts what guardrail `name` did in `phase` (`call`, `result`): `outcome`. The labels
    /// come from the configuration and fixed sets only.
    pub fn guardrail_decided(&self, name: &str, phase: &str, outcome: &str) {
        self.guardrail
            .with_label_values(&[name, phase, outcome])
            .inc();
    }

    /// Counts a downstream request from now until the returned guard records its outcome.
    pub fn request(&self, method: &str) -> RequestTimer<'_> {
        self.in_flight.inc();
        let index = METHODS
            .iter()
            .position(|m| *m == method)
            .unwrap_or(METHODS.len() - 1);
        RequestTimer {
            series: &self.methods[index],
            in_flight: &self.in_flight,
            started: Instant::now(),
            outcome: Outcome::Error,
        }
    }

    /// The series of an upstream's tools (`TOOLS_PER_UPSTREAM` at most; the rest `other`).
    pub fn tool_table<'a>(
        &self,
        upstream: &str,
        tools: impl IntoIterator<Item = &'a str>,
    ) -> ToolTable {
        let series = |tool: &str| ToolSeries {
            success: self
                .tool_calls
                .with_label_values(&[upstream, tool, "success"]),
            tool_error: self
                .tool_calls
                .with_label_values(&[upstream, tool, "tool_error"]),
            error: self
                .tool_calls
                .with_label_values(&[upstream, tool, "error"]),
            duration: self.tool_duration.with_label_values(&[upstream, tool]),
        };
        ToolTable {
            tools: tools
                .into_iter()
                .take(TOOLS_PER_UPSTREAM)
                .map(|tool| (Box::from(tool), series(tool)))
                .collect(),
            other: series("other"),
            tasks: TaskEvent::ALL
                .map(|event| self.tasks.with_label_values(&[upstream, event.label()])),
        }
    }

    /// Forgets the tool series (`table`'s) of an upstream that a reload removed.
    pub fn forget_upstream(&self, upstream: &str, table: &ToolTable) {
        for tool in table.tools.keys().map(|t| &**t).chain(["other"]) {
            for outcome in ["success", "tool_error", "error"] {
                let _ = self
                    .tool_calls
                    .remove_label_values(&[upstream, tool, outcome]);
            }
            let _ = self.tool_duration.remove_label_values(&[upstream, tool]);
        }
        for event in TaskEvent::ALL {
            let _ = self.tasks.remove_label_values(&[upstream, event.label()]);
        }
    }

    /// Running totals, for the status page.
    pub fn totals(&self) -> Totals {
        let (mut requests, mut errors) = (0, 0);
        for series in &self.methods {
            requests += series.ok.get() + series.error.get();
            errors += series.error.get();
        }
        let tool_calls = self
            .tool_calls
            .collect()
            .iter()
            .flat_map(|family| family.get_metric())
            .map(|metric| metric.get_counter().get_value() as u64)
            .sum();
        Totals {
            requests,
            errors,
            tool_calls,
            in_flight: self.in_flight.get(),
            streams: self.streams_open.get(),
        }
    }

    /// Counts a reload.
    pub fn reloaded(&self, outcome: &str) {
        self.reloads.with_label_values(&[outcome]).inc();
        if outcome != "rejected" {
            self.last_reload.set(unix_now());
        }
    }

    /// The Prometheus text exposition of every series, with `live`: those read from the live
    /// state at scrape time.
    pub fn render(&self, live: Vec<MetricFamily>) -> String {
        let mut families = self.registry.gather();
        families.extend(live);
        families.sort_by(|a, b| a.name().cmp(b.name()));
        let mut out = Vec::new();
        // Encoding into memory fails only on invalid families, which are built above.
        if let Err(error) = TextEncoder::new().encode(&families, &mut out) {
            tracing::error!(%error, "cannot encode the metrics");
        }
        String::from_utf8(out).unwrap_or_default()
    }
}

/// Running totals of the main series.
pub struct Totals {
    pub requests: u64,
    pub errors: u64,
    pub tool_calls: u64,
    pub in_flight: i64,
    pub streams: i64,
}

/// A downstream request being answered; records its outcome and duration when dropped.
pub struct RequestTimer<'a> {
    series: &'a MethodSeries,
    in_flight: &'a IntGauge,
    started: Instant,
    outcome: Outcome,
}

impl RequestTimer<'_> {
    pub fn finish(mut self, outcome: Outcome) {
        self.outcome = outcome;
    }
}

impl Drop for RequestTimer<'_> {
    fn drop(&mut self) {
        self.in_flight.dec();
        match self.outcome {
            Outcome::Ok => self.series.ok.inc(),
            Outcome::Error => self.series.error.inc(),
        }
        self.series
            .duration
            .observe(self.started.elapsed().as_secs_f64());
    }
}

use crate::clock::now_fractional as unix_now;

/// The metrics of a gateway started without a registry of its own.
pub fn standalone() -> Arc<Metrics> {
    Arc::new(Metrics::new(Registry::new()).expect("the series are valid and registered once"))
}

impl Metrics {
    /// The pass-through series of `upstream`, resolved once for all its requests.
    pub fn passthrough_series(&self, upstream: &str) -> PassthroughSeries {
        PassthroughSeries {
            requests: STATUS_CLASSES
                .map(|class| self.passthrough.with_label_values(&[upstream, class])),
            duration: HTTP_METHODS.map(|method| {
                self.passthrough_duration
                    .with_label_values(&[upstream, method])
            }),
        }
    }
}

/// The status classes of `switchyard_passthrough_requests_total`; `none`: no answer written.
const STATUS_CLASSES: [&str; 5] = ["none", "2xx", "3xx", "4xx", "5xx"];
/// The methods of the streamable-HTTP transport, and one label for any other.
const HTTP_METHODS: [&str; 4] = ["POST", "GET", "DELETE", "other"];

/// One upstream's pass-through series.
#[derive(Debug)]
pub struct PassthroughSeries {
    requests: [IntCounter; STATUS_CLASSES.len()],
    duration: [Histogram; HTTP_METHODS.len()],
}

impl PassthroughSeries {
    /// Counts a request with `method` that ended with `status` (`None`: no answer was
    /// written), `started` when it came in.
    pub fn record(&self, method: &http::Method, status: Option<u16>, started: Instant) {
        let class = match status {
            None => 0,
            Some(200..=299) => 1,
            Some(300..=399) => 2,
            Some(400..=499) => 3,
            Some(_) => 4,
        };
        let method = match *method {
            http::Method::POST => 0,
            http::Method::GET => 1,
            http::Method::DELETE => 2,
            _ => 3,
        };
        self.requests[class].inc();
        self.duration[method].observe(started.elapsed().as_secs_f64());
    }
}
