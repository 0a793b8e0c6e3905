//! `switchyard bench`: a load generator for any streamable-HTTP MCP endpoint, speaking only the
//! protocol on the wire, so the same run measures a gateway, the server behind it, and a bare
//! HTTP hop (`bare_hop`) in turns. Also the session-churn memory soak (`--soak`), and the cost
//! curves of a gateway the bench starts itself (`--curve`).
//!
//! # Layout
//!
//! | module     | owns                                                                        |
//! |------------|-----------------------------------------------------------------------------|
//! | `args`     | the options, validated into a `Plan`                                         |
//! | `mix`      | the era, the workload mix and its even schedule, the echo check              |
//! | `wire`     | the HTTP/1.1 client: a hyper connection per worker, JSON and SSE replies     |
//! | `sse`      | the incremental SSE parser                                                   |
//! | `mcp`      | requests of both eras built once (only the id changes)                       |
//! | `setup`    | a target's setup: handshake, tool and resource resolution, DELETE             |
//! | `check`    | every answer checked; failures by kind with a quote                          |
//! | `churn`    | opening and closing many sessions with bounded concurrency                    |
//! | `load`     | one phase: workers, warm-up, deadline, histograms                             |
//! | `soak`     | the session-churn memory soak                                                |
//! | `curve`    | the cost curves: fixtures started per step, a load measured at each          |
//! | `procfs`   | CPU time and RSS of a process from `/proc`                                    |
//! | `report`   | the report (the JSON below), medians over rounds, ratios                      |
//! | `render`, `plot`, `progress` | the text table, the SVG plots (percentiles, curves), the progress bar |
//! | `bare_hop` | `switchyard bare-hop`, the baseline proxy                                     |
//!
//! # A run
//!
//! Each target is set up once: in the session era one session is opened to read `tools/list`
//! (the tool name is resolved per target: `echo` is called as `demo__echo` through a gateway)
//! and, if the mix reads resources, `resources/list`. Then `--rounds` rounds, the targets taking
//! turns within each (gateway, direct, hop, gateway, direct, hop, …), each phase opening its
//! own sessions, warming up, measuring, and deleting its sessions.
//!
//! # The JSON report (`--json`)
//!
//! ```text
//! { "tool": "switchyard bench", "version", "mode": "load" | "soak",
//!   "settings": { "era": "session"|"stateless", "sessions", "concurrency", "duration_s",
//!                 "requests", "warmup_s", "timeout_ms", "mix": {"call","list","read"},
//!                 "payload_bytes", "rounds" },
//!   "targets": [ { "label", "url", "pid", "tool" (resolved name), "resource",
//!       "rounds": [ { "round", "requests", "ok", "failed", "elapsed_s", "rps",
//!                     "latency_ms": {"p50","p90","p99","p999","max","mean"},
//!                     "by_method": {"tools/call","tools/list","resources/read"},
//!                     "target_cpu_ms_per_request", "target_cores",
//!                     "target_rss_kib": {"start","end","peak"},
//!                     "bench_cpu_ms_per_request", "bench_cores", "machine_cores",
//!                     "streams_left_open", "sessions_not_deleted" } ],
//!       "median": { "rps", "latency_ms": {…}, "target_cpu_ms_per_request", "target_cores",
//!                   "bench_cpu_ms_per_request", "bench_cores", "machine_cores", "requests",
//!                   "failed", "target_rss_peak_kib" },
//!       "errors": [ { "kind": "connection"|"timeout"|"http_status"|"jsonrpc"|"tool_error"|"invalid",
//!                     "code", "count", "first" } ] } ],
//!   "ratios": [ { "target", "baseline", "throughput_pct", "added_p50_ms", "added_p99_ms",
//!                 "cpu_ms_per_request", "baseline_cpu_ms_per_request",
//!                 "added_cpu_ms_per_request" } ],
//!   "soak": null | { "url", "pid", "sessions", "idle_rss_kib", "growth_pct", "errors",
//!       "rounds": [ { "round", "rss_before_kib", "rss_open_kib", "rss_after_close_kib",
//!                     "kib_per_session", "opened", "open_failures", "close_failures",
//!                     "open_s", "close_s" } ] },
//!   "curve": null | { "kind": "sessions"|"upstreams"|"catalog", "x" (what it counts),
//!       "points": [ { "x", "rss_kib",
//!                     "call": { "rps", "p50_ms", "p99_ms", "cpu_ms_per_request", "failed" },
//!                     "list": null | { … the same, for tools/list's first page } } ] } }
//! ```
//!
//! Latencies are in milliseconds, of successful requests, measured from the request's start
//! (including a reconnect) to its answer. CPU figures are `utime + stime` over the measured
//! window divided by the requests in it; absent (`null`) without `--pid`. `*_cores` are CPU
//! seconds per second of the window; `machine_cores` counts every process on the machine, so
//! it shows when something else competed for the CPU during a round.

pub mod args;
pub mod bare_hop;
mod check;
mod churn;
mod curve;
mod error;
mod load;
mod mcp;
mod mix;
mod plot;
mod procfs;
mod progress;
mod render;
pub mod report;
mod setup;
mod soak;
mod sse;
mod wire;

pub use args::BenchArgs;
pub use error::BenchError;
pub use render::text;
pub use report::Report;

use args::{Era, Plan};
use load::{Counts, Target};
use progress::Progress;
use report::{RoundReport, Settings, TargetReport};

/// Runs the bench `args` describe and returns its report (failed requests are in the report;
/// an error means no report could be made).
/// `switchyard bench`: runs the bench and prints its report, JSON on stdout with `--json`,
/// else a table. Fails when it could not run, or when requests failed (after the report).
pub async fn main(args: &BenchArgs) -> std::process::ExitCode {
    use std::process::ExitCode;
    let report = match run(args).await {
        Ok(report) => report,
        Err(error) => {
            eprintln!("switchyard bench: {error}");
            return ExitCode::FAILURE;
        }
    };
    if args.json {
        match serde_json::to_string_pretty(&report) {
            Ok(json) => println!("{json}"),
            Err(error) => {
                eprintln!("switchyard bench: cannot encode the report: {error}");
                return ExitCode::FAILURE;
            }
        }
    } else {
        print!("{}", text(&report));
    }
    match report.failures() {
        0 => ExitCode::SUCCESS,
        failed => {
            eprintln!("switchyard bench: {failed} requests failed (see the report)");
            ExitCode::FAILURE
        }
    }
}

pub async fn run(args: &BenchArgs) -> Result<Report, BenchError> {
    if let Some(kind) = args.curve {
        return run_curve(kind, args).await;
    }
    let plan = args.plan()?;
    let progress = Progress::new(plan.progress);
    let mut targets = Vec::with_capacity(plan.targets.len());
    for spec in &plan.targets {
        targets.push(setup::prepare(&plan, spec, &progress).await?);
    }
    let mut report = Report {
        tool: "switchyard bench",
        version: env!("CARGO_PKG_VERSION"),
        mode: if plan.soak { "soak" } else { "load" },
        settings: Settings::of(&plan),
        targets: Vec::new(),
        ratios: Vec::new(),
        soak: None,
        curve: None,
    };
    if plan.soak {
        report.soak = Some(soak::run_soak(&plan, &targets[0], &progress).await?);
        return Ok(report);
    }
    report.targets = run_rounds(&plan, &targets, &progress).await?;
    if let Some((main, baselines)) = report.targets.split_first() {
        report.ratios = baselines.iter().map(|b| report::ratio(main, b)).collect();
    }
    if let Some(path) = &args.plot {
        let curves: Vec<_> = report
            .targets
            .iter()
            .map(|t| (t.label.as_str(), &t.histogram))
            .collect();
        let title = format!(
            "MCP request latency ({} era, {} workers)",
            era_name(plan.era),
            plan.concurrency
        );
        plot::draw(path, &title, &curves)?;
    }
    Ok(report)
}

impl Report {
    /// Requests that failed (load), or sessions that did not open or close (soak).
    pub fn failures(&self) -> u64 {
        let load: u64 = self.targets.iter().map(|t| t.median.failed).sum();
        let soak: u64 = self
            .soak
            .iter()
            .flat_map(|s| &s.errors)
            .map(|e| e.count)
            .sum();
        let curve: u64 = self
            .curve
            .iter()
            .flat_map(|c| &c.points)
            .map(|p| p.call.failed + p.list.map_or(0, |l| l.failed))
            .sum();
        load + soak + curve
    }
}

fn era_name(era: Era) -> &'static str {
    match era {
        Era::Session => "session",
        Era::Stateless => "stateless",
    }
}

/// The targets take turns within each round.
/// `--curve`: the fixtures are the bench's own, so there is no target to plan first.
async fn run_curve(kind: args::CurveKind, args: &BenchArgs) -> Result<Report, BenchError> {
    let progress =
        Progress::new(!args.quiet && std::io::IsTerminal::is_terminal(&std::io::stderr()));
    let curve = curve::run(kind, args, &progress).await?;
    if let Some(path) = &args.plot {
        plot::draw_curve(path, &curve)?;
    }
    let mut settings_of = args.clone();
    settings_of.url = Some("http://127.0.0.1/mcp".into());
    settings_of.curve = None;
    Ok(Report {
        tool: "switchyard bench",
        version: env!("CARGO_PKG_VERSION"),
        mode: "curve",
        settings: Settings::of(&settings_of.plan()?),
        targets: Vec::new(),
        ratios: Vec::new(),
        soak: None,
        curve: Some(curve),
    })
}

async fn run_rounds(
    plan: &Plan,
    targets: &[Target],
    progress: &Progress,
) -> Result<Vec<TargetReport>, BenchError> {
    let mut rounds: Vec<Vec<RoundReport>> = vec![Vec::new(); targets.len()];
    // Each target's requests over all its rounds.
    let mut totals: Vec<Option<Counts>> = targets.iter().map(|_| None).collect();
    for round in 1..=plan.rounds {
        for (i, target) in targets.iter().enumerate() {
            let title = Progress::phase_title(&target.label, round, plan.rounds);
            let phase = load::run_phase(plan, target, &title, progress).await?;
            rounds[i].push(RoundReport::of(round, &phase));
            match &mut totals[i] {
                Some(total) => total.merge(phase.counts),
                empty => *empty = Some(phase.counts),
            }
        }
    }
    let reports = targets
        .iter()
        .zip(rounds)
        .zip(totals)
        .filter_map(|((target, rounds), total)| {
            let total = total?;
            Some(TargetReport {
                label: target.label.clone(),
                url: target.endpoint.url.clone(),
                pid: target.pid,
                tool: target.tool.clone(),
                resource: target.resource.clone(),
                median: report::summarize(&rounds),
                rounds,
                errors: report::error_reports(&total.errors),
                histogram: total.histogram,
            })
        })
        .collect();
    Ok(reports)
}
