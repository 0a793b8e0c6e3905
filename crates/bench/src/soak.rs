//! `--soak`: the session-churn memory soak. Each round opens `--sessions` sessions
//! (initialize + initialized, `--concurrency` at a time), holds them while the target's RSS is
//! sampled, deletes them all and samples again. A server that frees what a session held ends
//! every round near where it began; one that leaks grows round after round.

use std::collections::BTreeMap;

use tokio::time::Instant;

use super::{
    BenchError,
    args::Plan,
    check::{ErrorKind, Failure},
    churn,
    load::{Tally, Target},
    procfs::rss_kib,
    progress::Progress,
    report::{SoakReport, SoakRound, error_reports},
};

/// Runs the soak against `target`, whose `pid` is set (the plan checked it).
pub async fn run_soak(
    plan: &Plan,
    target: &Target,
    progress: &Progress,
) -> Result<SoakReport, BenchError> {
    let pid = target
        .pid
        .ok_or_else(|| BenchError::usage("--soak", "needs --pid PID"))?;
    let mut errors = BTreeMap::new();
    let mut rounds = Vec::new();
    tokio::time::sleep(plan.settle).await;
    let idle = rss(pid)?;
    let bar = progress.counter(u64::from(plan.rounds), "soak rounds");
    for round in 1..=plan.rounds {
        rounds.push(churn_once(plan, target, pid, round, &mut errors).await?);
        bar.inc(1);
    }
    bar.finish_and_clear();
    let growth_pct = match (rounds.first(), rounds.last()) {
        (Some(first), Some(last)) if first.rss_after_close_kib > 0 => {
            let ratio = last.rss_after_close_kib as f64 / first.rss_after_close_kib as f64;
            Some(round2((ratio - 1.0) * 100.0))
        }
        _ => None,
    };
    Ok(SoakReport {
        url: target.endpoint.url.clone(),
        pid,
        sessions: plan.sessions,
        idle_rss_kib: idle,
        rounds,
        growth_pct,
        errors: error_reports(&errors),
    })
}

/// One round: open the sessions, sample, delete them, sample.
async fn churn_once(
    plan: &Plan,
    target: &Target,
    pid: u32,
    round: u32,
    errors: &mut BTreeMap<ErrorKind, Tally>,
) -> Result<SoakRound, BenchError> {
    let (endpoint, in_flight, timeout) = (&target.endpoint, plan.concurrency, plan.timeout);
    let before = rss(pid)?;
    let started = Instant::now();
    let opened = churn::open_many(endpoint, plan.sessions, in_flight, timeout).await;
    let open_s = started.elapsed().as_secs_f64();
    tokio::time::sleep(plan.settle).await;
    let open = rss(pid)?;
    let count = opened.contexts.len() as u64;
    let started = Instant::now();
    let close_failures = churn::close_many(endpoint, opened.contexts, in_flight, timeout).await;
    let close_s = started.elapsed().as_secs_f64();
    tokio::time::sleep(plan.settle).await;
    let after = rss(pid)?;
    let open_failures = opened.failures.len() as u64;
    let closed_failures = close_failures.len() as u64;
    tally(errors, opened.failures.into_iter().chain(close_failures));
    Ok(SoakRound {
        round,
        rss_before_kib: before,
        rss_open_kib: open,
        rss_after_close_kib: after,
        kib_per_session: (count > 0).then(|| round2((open as f64 - before as f64) / count as f64)),
        opened: count,
        open_failures,
        close_failures: closed_failures,
        open_s: round2(open_s),
        close_s: round2(close_s),
    })
}

fn rss(pid: u32) -> Result<u64, BenchError> {
    rss_kib(pid).map_err(|source| BenchError::Process { pid, source })
}

fn round2(value: f64) -> f64 {
    (value * 100.0).round() / 100.0
}

fn tally(errors: &mut BTreeMap<ErrorKind, Tally>, failures: impl Iterator<Item = Failure>) {
    for failure in failures {
        errors
            .entry(failure.kind)
            .or_insert_with(|| Tally {
                count: 0,
                first: failure.detail.clone(),
            })
            .count += 1;
    }
}
