//! The report as text for people: the settings, one row per target (medians over rounds), each
//! round's throughput, the ratios to the baselines, and the failures with their first quote.

use std::fmt::Write as _;

use super::{
    args::Era,
    curve::CurveReport,
    report::{ErrorReport, Report, Settings, SoakReport, TargetReport},
};

/// The report as printed without `--json`.
pub fn text(report: &Report) -> String {
    let mut out = String::new();
    let s = &report.settings;
    if let Some(soak) = &report.soak {
        let _ = writeln!(
            out,
            "session churn soak: {} sessions per round, {} rounds, {} in flight",
            soak.sessions, s.rounds, s.concurrency
        );
        soak_text(&mut out, soak);
        return out;
    }
    if let Some(curve) = &report.curve {
        let _ = writeln!(out, "{}\n", settings_line(s));
        curve_text(&mut out, curve);
        return out;
    }
    let _ = writeln!(out, "{}\n", settings_line(s));
    targets_table(&mut out, &report.targets);
    out.push('\n');
    for t in &report.targets {
        target_line(&mut out, t);
    }
    for r in &report.ratios {
        let pct = r
            .throughput_pct
            .map_or("-".to_owned(), |p| format!("{p:.1} %"));
        let cpu = match (r.cpu_ms_per_request, r.baseline_cpu_ms_per_request) {
            (Some(t), Some(b)) => format!(", CPU {t:.4} vs {b:.4} ms per request"),
            (Some(t), None) => format!(", CPU {t:.4} ms per request"),
            _ => String::new(),
        };
        let _ = writeln!(
            out,
            "{} vs {}: throughput {pct}, p50 {:+.3} ms, p99 {:+.3} ms{cpu}",
            r.target, r.baseline, r.added_p50_ms, r.added_p99_ms
        );
    }
    for t in &report.targets {
        errors_text(&mut out, &t.label, &t.errors);
    }
    out
}

fn settings_line(s: &Settings) -> String {
    let (era, sessions) = match s.era {
        Era::Session => ("session (2025-11-25)", format!("{} sessions, ", s.sessions)),
        Era::Stateless => ("stateless (2026-07-28)", String::new()),
    };
    let bound = match s.requests {
        Some(n) => format!("{n} requests (at most {} s)", s.duration_s),
        None => format!("{} s", s.duration_s),
    };
    let rounds = match s.rounds {
        1 => "1 round".to_owned(),
        n => format!("{n} rounds (medians)"),
    };
    format!(
        "{era} era, {sessions}{} workers, {bound} after {} s of warm-up, mix {}, payload {} B, \
         {rounds}",
        s.concurrency, s.warmup_s, s.mix, s.payload_bytes
    )
}

fn targets_table(out: &mut String, targets: &[TargetReport]) {
    let width = targets
        .iter()
        .map(|t| t.label.len())
        .max()
        .unwrap_or(0)
        .max(6);
    let _ = writeln!(
        out,
        "{:<width$} {:>9} {:>8} {:>8} {:>8} {:>8} {:>8} {:>7} {:>10} {:>10} {:>10}  tool",
        "target",
        "req/s",
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "p99.9 ms",
        "max ms",
        "failed",
        "cpu ms/req",
        "bench cpu",
        "peak RSS"
    );
    for t in targets {
        let m = &t.median;
        let l = &m.latency_ms;
        let rss = m
            .target_rss_peak_kib
            .map_or("-".to_owned(), |k| format!("{:.1} MiB", mib(k)));
        let _ = writeln!(
            out,
            "{:<width$} {:>9.0} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>7} {:>10} {:>10} {:>10}  {}",
            t.label,
            m.rps,
            l.p50,
            l.p90,
            l.p99,
            l.p999,
            l.max,
            m.failed,
            optional(m.target_cpu_ms_per_request, 4),
            optional(m.bench_cpu_ms_per_request, 4),
            rss,
            t.tool,
        );
    }
}

fn target_line(out: &mut String, t: &TargetReport) {
    let rounds: Vec<String> = t.rounds.iter().map(|r| format!("{:.0}", r.rps)).collect();
    let pid = t.pid.map_or("no pid".to_owned(), |p| format!("pid {p}"));
    let cores = match t.median.target_cores {
        Some(c) => format!("; the target used {c:.2} cores"),
        None => String::new(),
    };
    let machine = match t.median.machine_cores {
        Some(c) => format!("; the machine was busy {c:.2} cores"),
        None => String::new(),
    };
    let _ = writeln!(
        out,
        "{}: {} ({pid}); req/s by round: {}{cores}; the bench used {:.2} cores{machine}",
        t.label,
        t.url,
        rounds.join(", "),
        t.median.bench_cores,
    );
}

fn soak_text(out: &mut String, soak: &SoakReport) {
    let _ = writeln!(out, "idle RSS before: {:.1} MiB\n", mib(soak.idle_rss_kib));
    let _ = writeln!(
        out,
        "{:>5} {:>12} {:>12} {:>14} {:>8} {:>8} {:>8}",
        "round", "open RSS", "KiB/session", "after close", "opened", "open s", "close s"
    );
    for r in &soak.rounds {
        let _ = writeln!(
            out,
            "{:>5} {:>8.1} MiB {:>12} {:>10.1} MiB {:>8} {:>8.2} {:>8.2}",
            r.round,
            mib(r.rss_open_kib),
            optional(r.kib_per_session, 2),
            mib(r.rss_after_close_kib),
            r.opened,
            r.open_s,
            r.close_s
        );
    }
    if let Some(growth) = soak.growth_pct {
        let _ = writeln!(
            out,
            "\nRSS after close grew {growth:+.2} % from round 1 to round {}",
            soak.rounds.len()
        );
    }
    errors_text(out, "soak", &soak.errors);
}

fn curve_text(out: &mut String, curve: &CurveReport) {
    let _ = writeln!(out, "gateway costs by {}\n", curve.x);
    let _ = writeln!(
        out,
        "{:>8} {:>10} {:>9} {:>9} {:>12} {:>10}   tools/list: {:>9} {:>9} {:>12}",
        "x",
        "calls/s",
        "p50 ms",
        "p99 ms",
        "cpu ms/call",
        "RSS MiB",
        "p50 ms",
        "p99 ms",
        "cpu ms/list"
    );
    for p in &curve.points {
        let list = match &p.list {
            Some(l) => format!(
                "{:>9.3} {:>9.3} {:>12}",
                l.p50_ms,
                l.p99_ms,
                optional(l.cpu_ms_per_request, 4)
            ),
            None => format!("{:>9} {:>9} {:>12}", "-", "-", "-"),
        };
        let _ = writeln!(
            out,
            "{:>8} {:>10.0} {:>9.3} {:>9.3} {:>12} {:>10.1}               {list}",
            p.x,
            p.call.rps,
            p.call.p50_ms,
            p.call.p99_ms,
            optional(p.call.cpu_ms_per_request, 4),
            mib(p.rss_kib)
        );
    }
    let failed: u64 = curve
        .points
        .iter()
        .map(|p| p.call.failed + p.list.map_or(0, |l| l.failed))
        .sum();
    if failed > 0 {
        let _ = writeln!(out, "\n{failed} requests failed");
    }
}

fn errors_text(out: &mut String, label: &str, errors: &[ErrorReport]) {
    for e in errors {
        let code = e.code.map_or(String::new(), |c| format!(" {c}"));
        let _ = writeln!(
            out,
            "{label}: {} × {}{code}; first: {}",
            e.count, e.kind, e.first
        );
    }
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn optional(value: Option<f64>, decimals: usize) -> String {
    value.map_or("-".to_owned(), |v| format!("{v:.decimals$}"))
}
