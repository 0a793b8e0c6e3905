//! The report as text for people: the settings, one row per target (medians over rounds), each
//! round's throughput, the ratios to the baselines, and the failures with their first quote.

use std::fmt::Write as _;

use super::report::{ErrorReport, Report, SoakReport};

/// The report as printed without `--json`.
pub fn text(report: &Report) -> String {
    let mut out = String::new();
    let s = &report.settings;
    let bound = match s.requests {
        Some(n) => format!("{n} requests (at most {} s)", s.duration_s),
        None => format!("{} s", s.duration_s),
    };
    let sessions = match s.era {
        super::args::Era::Session => format!("{} sessions, ", s.sessions),
        super::args::Era::Stateless => String::new(),
    };
    if let Some(soak) = &report.soak {
        let _ = writeln!(
            out,
            "session churn soak: {} sessions per round, {} rounds, {} in flight",
            soak.sessions, s.rounds, s.concurrency
        );
        soak_text(&mut out, soak);
        return out;
    }
    let _ = writeln!(
        out,
        "{} era, {sessions}{} workers, {bound} after {} s of warm-up, mix {}, payload {} B, {} round{}",
        era_name(s.era),
        s.concurrency,
        s.warmup_s,
        s.mix,
        s.payload_bytes,
        s.rounds,
        if s.rounds == 1 { "" } else { "s (medians)" }
    );
    out.push('\n');
    let _ = writeln!(
        out,
        "{:<10} {:>9} {:>8} {:>8} {:>8} {:>8} {:>8} {:>7} {:>10} {:>10} {:>10}  tool",
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
    for t in &report.targets {
        let m = &t.median;
        let _ = writeln!(
            out,
            "{:<10} {:>9.0} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>7} {:>10} {:>10} {:>10}  {}",
            t.label,
            m.rps,
            m.latency_ms.p50,
            m.latency_ms.p90,
            m.latency_ms.p99,
            m.latency_ms.p999,
            m.latency_ms.max,
            m.failed,
            optional(m.target_cpu_ms_per_request, 4),
            optional(m.bench_cpu_ms_per_request, 4),
            m.target_rss_peak_kib
                .map_or("-".to_owned(), |k| format!("{:.1} MiB", k as f64 / 1024.0)),
            t.tool,
        );
    }
    out.push('\n');
    for t in &report.targets {
        let rounds: Vec<String> = t.rounds.iter().map(|r| format!("{:.0}", r.rps)).collect();
        let cores = match t.median.target_cores {
            Some(c) => format!("; the target used {c:.2} cores"),
            None => String::new(),
        };
        let _ = writeln!(
            out,
            "{}: {} ({}); req/s by round: {}{cores}; the bench used {:.2} cores",
            t.label,
            t.url,
            t.pid.map_or("no pid".to_owned(), |p| format!("pid {p}")),
            rounds.join(", "),
            t.median.bench_cores,
        );
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

fn soak_text(out: &mut String, soak: &SoakReport) {
    let mib = |k: u64| k as f64 / 1024.0;
    let _ = writeln!(out, "idle RSS before: {:.1} MiB\n", mib(soak.idle_rss_kib));
    let _ = writeln!(
        out,
        "{:>5} {:>12} {:>12} {:>14} {:>14} {:>8} {:>8}",
        "round", "open RSS", "KiB/session", "after close", "opened", "open s", "close s"
    );
    for r in &soak.rounds {
        let _ = writeln!(
            out,
            "{:>5} {:>8.1} MiB {:>12} {:>10.1} MiB {:>14} {:>8.2} {:>8.2}",
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

fn era_name(era: super::args::Era) -> &'static str {
    match era {
        super::args::Era::Session => "session (2025-11-25)",
        super::args::Era::Stateless => "stateless (2026-07-28)",
    }
}

fn optional(value: Option<f64>, decimals: usize) -> String {
    value.map_or("-".to_owned(), |v| format!("{v:.decimals$}"))
}
