//! The report of a run, as printed with `--json` (the field names are stable; see the module
//! docs of `bench`), and its arithmetic: percentiles from the histograms, medians over rounds,
//! and the ratios of the main target to each baseline.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::Serialize;

use super::{
    args::{Era, Mix, Plan},
    check::ErrorKind,
    load::{Phase, Tally},
};

/// A whole run.
#[derive(Serialize)]
pub struct Report {
    pub tool: &'static str,
    pub version: &'static str,
    /// `load`, `soak` or `curve`.
    pub mode: &'static str,
    pub settings: Settings,
    pub targets: Vec<TargetReport>,
    pub ratios: Vec<Ratio>,
    pub soak: Option<SoakReport>,
    pub curve: Option<super::curve::CurveReport>,
}

#[derive(Serialize)]
pub struct Settings {
    pub era: Era,
    pub sessions: usize,
    pub concurrency: usize,
    pub duration_s: f64,
    pub requests: Option<u64>,
    pub warmup_s: f64,
    pub timeout_ms: u64,
    pub mix: Mix,
    pub payload_bytes: usize,
    pub rounds: u32,
}

impl Settings {
    pub fn of(plan: &Plan) -> Self {
        Self {
            era: plan.era,
            sessions: plan.sessions,
            concurrency: plan.concurrency,
            duration_s: plan.duration.as_secs_f64(),
            requests: plan.requests,
            warmup_s: plan.warmup.as_secs_f64(),
            timeout_ms: plan.timeout.as_millis() as u64,
            mix: plan.mix,
            payload_bytes: plan.payload.len(),
            rounds: plan.rounds,
        }
    }
}

/// One target over all rounds.
#[derive(Serialize)]
pub struct TargetReport {
    pub label: String,
    pub url: String,
    pub pid: Option<u32>,
    /// The tool name actually called (resolved against this target's tools/list).
    pub tool: String,
    pub resource: Option<String>,
    pub rounds: Vec<RoundReport>,
    /// The median of each figure over the rounds.
    pub median: Summary,
    /// Failures over all rounds, by kind, with the first of each quoted.
    pub errors: Vec<ErrorReport>,
    /// All rounds' latencies together (for the plot).
    #[serde(skip)]
    pub histogram: Histogram<u64>,
}

#[derive(Serialize, Clone)]
pub struct RoundReport {
    pub round: u32,
    pub requests: u64,
    pub ok: u64,
    pub failed: u64,
    pub elapsed_s: f64,
    pub rps: f64,
    pub latency_ms: Latency,
    pub by_method: ByMethod,
    pub target_cpu_ms_per_request: Option<f64>,
    /// The watched process's CPU in cores (CPU seconds per second).
    pub target_cores: Option<f64>,
    pub target_rss_kib: Option<RssKib>,
    pub bench_cpu_ms_per_request: Option<f64>,
    pub bench_cores: f64,
    /// All processes together, in cores: a figure well above `target_cores + bench_cores`
    /// means other work shared the machine during the round.
    pub machine_cores: Option<f64>,
    /// SSE streams still open 250 ms after their response (their connections were dropped).
    pub streams_left_open: u64,
    pub sessions_not_deleted: u64,
}

#[derive(Serialize, Clone, Copy, Default, Debug, PartialEq)]
pub struct Latency {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
    pub mean: f64,
}

#[derive(Serialize, Clone, Copy)]
pub struct ByMethod {
    #[serde(rename = "tools/call")]
    pub call: u64,
    #[serde(rename = "tools/list")]
    pub list: u64,
    #[serde(rename = "resources/read")]
    pub read: u64,
}

#[derive(Serialize, Clone, Copy)]
pub struct RssKib {
    pub start: u64,
    pub end: u64,
    pub peak: u64,
}

/// Medians over rounds (sums for the counts, the highest peak for memory).
#[derive(Serialize, Clone, Copy, Default, Debug)]
pub struct Summary {
    pub rps: f64,
    pub latency_ms: Latency,
    pub target_cpu_ms_per_request: Option<f64>,
    pub target_cores: Option<f64>,
    pub bench_cpu_ms_per_request: Option<f64>,
    pub bench_cores: f64,
    pub machine_cores: Option<f64>,
    pub requests: u64,
    pub failed: u64,
    pub target_rss_peak_kib: Option<u64>,
}

/// The main target against one baseline, from the medians.
#[derive(Serialize, Debug, PartialEq)]
pub struct Ratio {
    pub target: String,
    pub baseline: String,
    /// The target's throughput as a percentage of the baseline's.
    pub throughput_pct: Option<f64>,
    pub added_p50_ms: f64,
    pub added_p99_ms: f64,
    pub cpu_ms_per_request: Option<f64>,
    pub baseline_cpu_ms_per_request: Option<f64>,
    pub added_cpu_ms_per_request: Option<f64>,
}

#[derive(Serialize, Clone, Debug)]
pub struct ErrorReport {
    /// `connection`, `timeout`, `http_status`, `jsonrpc`, `tool_error` or `invalid`.
    pub kind: &'static str,
    /// The HTTP status or JSON-RPC error code.
    pub code: Option<i64>,
    pub count: u64,
    /// The first failure of this kind, quoted (at most ~300 characters of the answer).
    pub first: String,
}

/// The session-churn soak.
#[derive(Serialize)]
pub struct SoakReport {
    pub url: String,
    pub pid: u32,
    pub sessions: usize,
    pub idle_rss_kib: u64,
    pub rounds: Vec<SoakRound>,
    /// Growth of the RSS after closing, from the first round to the last, in %.
    pub growth_pct: Option<f64>,
    pub errors: Vec<ErrorReport>,
}

#[derive(Serialize, Clone)]
pub struct SoakRound {
    pub round: u32,
    pub rss_before_kib: u64,
    pub rss_open_kib: u64,
    pub rss_after_close_kib: u64,
    /// (RSS with the sessions open − RSS before) / sessions opened.
    pub kib_per_session: Option<f64>,
    pub opened: u64,
    pub open_failures: u64,
    pub close_failures: u64,
    pub open_s: f64,
    pub close_s: f64,
}

// === Arithmetic ===

fn round3(value: f64) -> f64 {
    (value * 1000.0).round() / 1000.0
}

/// Percentiles of a histogram recorded in microseconds, in milliseconds.
pub fn latency(histogram: &Histogram<u64>) -> Latency {
    if histogram.is_empty() {
        return Latency::default();
    }
    let ms = |micros: u64| round3(micros as f64 / 1000.0);
    Latency {
        p50: ms(histogram.value_at_quantile(0.5)),
        p90: ms(histogram.value_at_quantile(0.9)),
        p99: ms(histogram.value_at_quantile(0.99)),
        p999: ms(histogram.value_at_quantile(0.999)),
        max: ms(histogram.max()),
        mean: round3(histogram.mean() / 1000.0),
    }
}

/// The median (the mean of the middle two for an even count); None when empty.
pub fn median(values: impl IntoIterator<Item = f64>) -> Option<f64> {
    let mut values: Vec<f64> = values.into_iter().filter(|v| v.is_finite()).collect();
    values.sort_by(f64::total_cmp);
    let n = values.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(values[n / 2]),
        _ => Some((values[n / 2 - 1] + values[n / 2]) / 2.0),
    }
}

fn per_request_ms(cpu: std::time::Duration, requests: u64) -> Option<f64> {
    (requests > 0).then(|| round3(cpu.as_secs_f64() * 1000.0 / requests as f64 * 1000.0) / 1000.0)
}

impl RoundReport {
    pub fn of(round: u32, phase: &Phase) -> Self {
        let counts = &phase.counts;
        let seconds = phase.elapsed.as_secs_f64().max(1e-9);
        let target = phase.window.target;
        Self {
            round,
            requests: counts.requests,
            ok: counts.ok,
            failed: counts.requests - counts.ok,
            elapsed_s: round3(seconds),
            rps: round3(counts.requests as f64 / seconds),
            latency_ms: latency(&counts.histogram),
            by_method: ByMethod {
                call: counts.by_kind[0],
                list: counts.by_kind[1],
                read: counts.by_kind[2],
            },
            target_cpu_ms_per_request: target.and_then(|t| per_request_ms(t.cpu, counts.requests)),
            target_cores: target.map(|t| round3(t.cpu.as_secs_f64() / seconds)),
            target_rss_kib: target.map(|t| RssKib {
                start: t.rss_start_kib,
                end: t.rss_end_kib,
                peak: t.rss_peak_kib,
            }),
            bench_cpu_ms_per_request: per_request_ms(phase.window.bench_cpu, counts.requests),
            bench_cores: round3(phase.window.bench_cpu.as_secs_f64() / seconds),
            machine_cores: phase
                .window
                .machine_busy
                .map(|busy| round3(busy.as_secs_f64() / seconds)),
            streams_left_open: counts.left_open,
            sessions_not_deleted: phase.not_deleted,
        }
    }
}

/// The medians of `rounds`.
pub fn summarize(rounds: &[RoundReport]) -> Summary {
    let of = |f: fn(&RoundReport) -> f64| median(rounds.iter().map(f)).unwrap_or(0.0);
    let of_some = |f: fn(&RoundReport) -> Option<f64>| median(rounds.iter().filter_map(f));
    Summary {
        rps: of(|r| r.rps),
        latency_ms: Latency {
            p50: of(|r| r.latency_ms.p50),
            p90: of(|r| r.latency_ms.p90),
            p99: of(|r| r.latency_ms.p99),
            p999: of(|r| r.latency_ms.p999),
            max: of(|r| r.latency_ms.max),
            mean: of(|r| r.latency_ms.mean),
        },
        target_cpu_ms_per_request: of_some(|r| r.target_cpu_ms_per_request),
        target_cores: of_some(|r| r.target_cores),
        bench_cpu_ms_per_request: of_some(|r| r.bench_cpu_ms_per_request),
        bench_cores: of(|r| r.bench_cores),
        machine_cores: of_some(|r| r.machine_cores),
        requests: rounds.iter().map(|r| r.requests).sum(),
        failed: rounds.iter().map(|r| r.failed).sum(),
        target_rss_peak_kib: rounds
            .iter()
            .filter_map(|r| r.target_rss_kib.map(|k| k.peak))
            .max(),
    }
}

/// `target` against `baseline`.
pub fn ratio(target: &TargetReport, baseline: &TargetReport) -> Ratio {
    let (t, b) = (&target.median, &baseline.median);
    let cpu = t.target_cpu_ms_per_request;
    let baseline_cpu = b.target_cpu_ms_per_request;
    Ratio {
        target: target.label.clone(),
        baseline: baseline.label.clone(),
        throughput_pct: (b.rps > 0.0).then(|| round3(t.rps / b.rps * 100.0)),
        added_p50_ms: round3(t.latency_ms.p50 - b.latency_ms.p50),
        added_p99_ms: round3(t.latency_ms.p99 - b.latency_ms.p99),
        cpu_ms_per_request: cpu,
        baseline_cpu_ms_per_request: baseline_cpu,
        added_cpu_ms_per_request: cpu
            .zip(baseline_cpu)
            .map(|(t, b)| round3((t - b) * 1000.0) / 1000.0),
    }
}

/// Failures by kind, merged over rounds.
pub fn error_reports(tallies: &BTreeMap<ErrorKind, Tally>) -> Vec<ErrorReport> {
    tallies
        .iter()
        .map(|(kind, tally)| ErrorReport {
            kind: kind.name(),
            code: kind.code(),
            count: tally.count,
            first: tally.first.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(label: &str, rps: f64, p50: f64, p99: f64, cpu: Option<f64>) -> TargetReport {
        TargetReport {
            label: label.to_owned(),
            url: String::new(),
            pid: None,
            tool: "echo".to_owned(),
            resource: None,
            rounds: Vec::new(),
            median: Summary {
                rps,
                latency_ms: Latency {
                    p50,
                    p99,
                    ..Latency::default()
                },
                target_cpu_ms_per_request: cpu,
                ..Summary::default()
            },
            errors: Vec::new(),
            histogram: Histogram::new(3).unwrap(),
        }
    }

    #[test]
    fn medians_of_odd_and_even_counts() {
        assert_eq!(median([3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median([4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median([]), None);
        assert_eq!(median([f64::NAN, 5.0]), Some(5.0));
    }

    #[test]
    fn ratios_compare_the_medians() {
        let gateway = target("gateway", 8000.0, 3.5, 9.0, Some(0.12));
        let direct = target("direct", 20000.0, 1.25, 4.0, Some(0.04));
        let r = ratio(&gateway, &direct);
        assert_eq!(r.throughput_pct, Some(40.0));
        assert_eq!((r.added_p50_ms, r.added_p99_ms), (2.25, 5.0));
        assert_eq!(r.added_cpu_ms_per_request, Some(0.08));
        let unwatched = target("hop", 1.0, 1.0, 1.0, None);
        let stalled = target("dead", 0.0, 0.0, 0.0, None);
        let r = ratio(&unwatched, &stalled);
        assert_eq!((r.throughput_pct, r.added_cpu_ms_per_request), (None, None));
    }

    #[test]
    fn latencies_are_milliseconds_from_microseconds() {
        let mut histogram = Histogram::<u64>::new_with_bounds(1, 10_000_000, 3).unwrap();
        for micros in 1..=1000 {
            histogram.record(micros * 10).unwrap();
        }
        let l = latency(&histogram);
        assert!((l.p50 - 5.0).abs() < 0.01, "{l:?}");
        assert!((l.p99 - 9.9).abs() < 0.01, "{l:?}");
        assert!((l.max - 10.0).abs() < 0.01, "{l:?}");
        assert_eq!(latency(&Histogram::new(3).unwrap()), Latency::default());
    }

    #[test]
    fn cpu_per_request_keeps_microseconds() {
        let cpu = std::time::Duration::from_millis(430);
        assert_eq!(per_request_ms(cpu, 10_000), Some(0.043));
        assert_eq!(per_request_ms(cpu, 0), None);
    }
}
