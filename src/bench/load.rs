//! One load phase against one target: open the sessions, run `concurrency` workers over them
//! (warm-up first, not counted), stop at the deadline or the request budget, watch the
//! processes over the measured window, then delete the sessions. Each worker keeps its own
//! histogram and tallies, merged at the end: nothing is shared on the per-request path but two
//! relaxed counters for the progress bar and the request budget.

use std::{
    collections::BTreeMap,
    fmt::Write as _,
    sync::{
        Arc,
        atomic::{AtomicI64, AtomicU64, Ordering},
    },
    time::Duration,
};

use hdrhistogram::Histogram;
use tokio::time::Instant;

use super::{
    BenchError,
    args::{Era, Kind, Plan},
    check::{ErrorKind, Expect, Failure, check},
    churn,
    mcp::{Context, Template},
    procfs::{Window, spawn_watch},
    progress::Progress,
    wire::{Endpoint, send},
};

/// A connection failure is retried after this pause, so a dead target is not spun on.
const RECONNECT_PAUSE: Duration = Duration::from_millis(10);

/// A target after setup: where, what to call, what to read, whom to watch.
pub struct Target {
    pub label: String,
    pub endpoint: Arc<Endpoint>,
    pub tool: String,
    pub resource: Option<String>,
    pub pid: Option<u32>,
}

/// Failures of one kind: how many, and the first one's quote.
#[derive(Clone, Debug)]
pub struct Tally {
    pub count: u64,
    pub first: String,
}

/// What one phase measured.
pub struct Phase {
    /// Latency of the successful measured requests, in microseconds.
    pub histogram: Histogram<u64>,
    pub requests: u64,
    pub ok: u64,
    /// Measured requests by kind, in `Kind::ALL` order.
    pub by_kind: [u64; 3],
    /// From the end of the warm-up to the last measured answer.
    pub elapsed: Duration,
    pub errors: BTreeMap<ErrorKind, Tally>,
    pub left_open: u64,
    pub window: Window,
    pub not_deleted: u64,
}

/// What every worker of a phase reads.
struct Shared {
    endpoint: Arc<Endpoint>,
    /// Per context, the requests by kind (`Kind::ALL` order).
    templates: Vec<Vec<Template>>,
    schedule: Vec<Kind>,
    measure_start: Instant,
    deadline: Instant,
    /// Measured requests still to send, if the run is counted.
    budget: Option<AtomicI64>,
    timeout: Duration,
    payload: String,
    echo_check: super::args::EchoCheck,
    histogram: Histogram<u64>,
    done: AtomicU64,
    failed: AtomicU64,
}

/// Runs one phase of `plan` against `target`.
pub async fn run_phase(
    plan: &Plan,
    target: &Target,
    title: &str,
    progress: &Progress,
) -> Result<Phase, BenchError> {
    let contexts = open_contexts(plan, target).await?;
    let resource = target.resource.as_deref().unwrap_or("");
    let templates = contexts
        .iter()
        .map(|c| {
            Kind::ALL
                .iter()
                .map(|&k| Template::for_kind(c, k, &target.tool, &plan.payload, resource))
                .collect()
        })
        .collect();
    let histogram =
        Histogram::new_with_bounds(1, (plan.timeout.as_micros() as u64).max(1000) * 2, 3)
            .map_err(|e| BenchError::usage("--timeout-ms", format!("no histogram for it: {e}")))?;
    let measure_start = Instant::now() + plan.warmup;
    let shared = Arc::new(Shared {
        endpoint: target.endpoint.clone(),
        templates,
        schedule: plan.mix.schedule(),
        measure_start,
        deadline: measure_start + plan.duration,
        budget: plan
            .requests
            .map(|n| AtomicI64::new(i64::try_from(n).unwrap_or(i64::MAX))),
        timeout: plan.timeout,
        payload: plan.payload.clone(),
        echo_check: plan.echo_check,
        histogram,
        done: AtomicU64::new(0),
        failed: AtomicU64::new(0),
    });
    let watch = spawn_watch(target.pid, measure_start);
    let workers: Vec<_> = (0..plan.concurrency)
        .map(|i| tokio::spawn(worker(i, shared.clone())))
        .collect();
    let ticker = progress.follow(title, measure_start, plan.duration, plan.requests, {
        let shared = shared.clone();
        move || {
            (
                shared.done.load(Ordering::Relaxed),
                shared.failed.load(Ordering::Relaxed),
            )
        }
    });
    let mut phase = Phase {
        histogram: shared.histogram.clone(),
        requests: 0,
        ok: 0,
        by_kind: [0; 3],
        elapsed: Duration::ZERO,
        errors: BTreeMap::new(),
        left_open: 0,
        window: Window::default(),
        not_deleted: 0,
    };
    let mut last = None;
    for handle in workers {
        let Ok(done) = handle.await else { continue };
        merge(&mut phase, done.outcome);
        last = last.max(done.last);
    }
    ticker.abort();
    phase.window = watch.finish().await?;
    phase.elapsed = last.map_or(plan.duration, |last: Instant| {
        last.saturating_duration_since(measure_start)
    });
    if plan.era == Era::Session {
        phase.not_deleted =
            churn::close_many(&target.endpoint, contexts, plan.concurrency, plan.timeout)
                .await
                .len() as u64;
    }
    Ok(phase)
}

/// The phase's client contexts: its sessions, or the one stateless context.
async fn open_contexts(plan: &Plan, target: &Target) -> Result<Vec<Context>, BenchError> {
    if plan.era == Era::Stateless {
        return Ok(vec![Context::stateless()]);
    }
    let opened = churn::open_many(
        &target.endpoint,
        plan.sessions,
        plan.concurrency,
        plan.timeout,
    )
    .await;
    if let Some(failure) = opened.failures.first() {
        let failed = opened.failures.len();
        churn::close_many(
            &target.endpoint,
            opened.contexts,
            plan.concurrency,
            plan.timeout,
        )
        .await;
        return Err(super::setup::setup_error(
            &target.endpoint.url,
            "initialize",
            Failure {
                kind: failure.kind,
                detail: format!(
                    "{failed} of {} sessions did not open; the first: {}",
                    plan.sessions, failure.detail
                ),
            },
            plan.timeout,
        ));
    }
    Ok(opened.contexts)
}

/// One worker's results.
struct Outcome {
    histogram: Histogram<u64>,
    requests: u64,
    ok: u64,
    by_kind: [u64; 3],
    errors: BTreeMap<ErrorKind, Tally>,
    left_open: u64,
}

struct Done {
    outcome: Outcome,
    last: Option<Instant>,
}

fn merge(phase: &mut Phase, outcome: Outcome) {
    let _ = phase.histogram.add(&outcome.histogram);
    phase.requests += outcome.requests;
    phase.ok += outcome.ok;
    for (total, n) in phase.by_kind.iter_mut().zip(outcome.by_kind) {
        *total += n;
    }
    for (kind, tally) in outcome.errors {
        phase
            .errors
            .entry(kind)
            .and_modify(|t| t.count += tally.count)
            .or_insert(tally);
    }
    phase.left_open += outcome.left_open;
}

/// Sends requests until the deadline or the budget runs out, one at a time.
async fn worker(index: usize, shared: Arc<Shared>) -> Done {
    let templates = &shared.templates[index % shared.templates.len()];
    let mut outcome = Outcome {
        histogram: shared.histogram.clone(),
        requests: 0,
        ok: 0,
        by_kind: [0; 3],
        errors: BTreeMap::new(),
        left_open: 0,
    };
    let mut last = None;
    let mut conn = None;
    // Ids are unique across workers (sessions are shared): worker i uses i·10⁹ + n.
    let mut next_id = index as u64 * 1_000_000_000;
    let mut id = String::with_capacity(20);
    let mut turn = index;
    loop {
        let start = Instant::now();
        if start >= shared.deadline {
            break;
        }
        let measured = start >= shared.measure_start;
        if measured
            && shared
                .budget
                .as_ref()
                .is_some_and(|b| b.fetch_sub(1, Ordering::Relaxed) <= 0)
        {
            break;
        }
        let kind = shared.schedule[turn % shared.schedule.len()];
        turn += 1;
        next_id += 1;
        id.clear();
        let _ = write!(id, "{next_id}");
        let template = &templates[kind.index()];
        let sent = send(
            &mut conn,
            &shared.endpoint,
            &template.headers,
            Some(template.body(&id)),
            Some(&id),
            shared.timeout,
        )
        .await;
        let expect = match kind {
            Kind::Call => Expect::Echo {
                text: &shared.payload,
                check: shared.echo_check,
            },
            Kind::List => Expect::Tools,
            Kind::Read => Expect::Contents,
        };
        let result = sent.and_then(|reply| {
            check(&reply, &id, expect)?;
            Ok(reply)
        });
        let finished = Instant::now();
        if result
            .as_ref()
            .is_err_and(|f| f.kind == ErrorKind::Connection)
        {
            tokio::time::sleep(RECONNECT_PAUSE).await;
        }
        if !measured {
            continue;
        }
        outcome.requests += 1;
        outcome.by_kind[kind.index()] += 1;
        match result {
            Ok(reply) => {
                let micros = reply.answered.saturating_duration_since(start).as_micros();
                outcome
                    .histogram
                    .saturating_record(u64::try_from(micros).unwrap_or(u64::MAX).max(1));
                outcome.ok += 1;
                outcome.left_open += u64::from(reply.left_open);
                last = Some(reply.answered);
                shared.done.fetch_add(1, Ordering::Relaxed);
            }
            Err(failure) => {
                last = Some(finished);
                shared.done.fetch_add(1, Ordering::Relaxed);
                shared.failed.fetch_add(1, Ordering::Relaxed);
                let tally = outcome.errors.entry(failure.kind).or_insert_with(|| Tally {
                    count: 0,
                    first: failure.detail.clone(),
                });
                tally.count += 1;
            }
        }
    }
    Done { outcome, last }
}
