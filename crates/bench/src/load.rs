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
    args::{EchoCheck, Era, Kind, Plan},
    check::{ErrorKind, Expect, Failure, check},
    churn,
    mcp::{Context, Template},
    procfs::{Window, spawn_watch},
    progress::Progress,
    wire::{Endpoint, Reply, send},
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

/// Measured requests: one worker's, or a whole phase's once merged.
pub struct Counts {
    /// Latency of the successful requests, in microseconds.
    pub histogram: Histogram<u64>,
    pub requests: u64,
    pub ok: u64,
    /// Requests by kind, in `Kind::ALL` order.
    pub by_kind: [u64; 3],
    pub errors: BTreeMap<ErrorKind, Tally>,
    /// SSE streams still open after their response (their connections were given up).
    pub left_open: u64,
    /// When the last request ended.
    pub last: Option<Instant>,
}

impl Counts {
    fn new(histogram: Histogram<u64>) -> Self {
        Self {
            histogram,
            requests: 0,
            ok: 0,
            by_kind: [0; 3],
            errors: BTreeMap::new(),
            left_open: 0,
            last: None,
        }
    }

    /// Counts a request of `kind` started at `start`.
    fn record(&mut self, kind: Kind, start: Instant, result: Result<Reply, Failure>) {
        self.requests += 1;
        self.by_kind[kind.index()] += 1;
        match result {
            Ok(reply) => {
                let micros = reply.answered.saturating_duration_since(start).as_micros();
                let micros = u64::try_from(micros).unwrap_or(u64::MAX).max(1);
                self.histogram.saturating_record(micros);
                self.ok += 1;
                self.left_open += u64::from(reply.left_open);
                self.last = Some(reply.answered);
            }
            Err(failure) => {
                self.last = Some(Instant::now());
                let tally = self.errors.entry(failure.kind).or_insert_with(|| Tally {
                    count: 0,
                    first: failure.detail.clone(),
                });
                tally.count += 1;
            }
        }
    }

    /// Adds `other`'s requests to these.
    pub fn merge(&mut self, other: Counts) {
        let _ = self.histogram.add(&other.histogram);
        self.requests += other.requests;
        self.ok += other.ok;
        for (total, n) in self.by_kind.iter_mut().zip(other.by_kind) {
            *total += n;
        }
        for (kind, tally) in other.errors {
            self.errors
                .entry(kind)
                .and_modify(|t| t.count += tally.count)
                .or_insert(tally);
        }
        self.left_open += other.left_open;
        self.last = self.last.max(other.last);
    }
}

/// What one phase measured.
pub struct Phase {
    pub counts: Counts,
    /// From the end of the warm-up to the last measured answer.
    pub elapsed: Duration,
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
    echo_check: EchoCheck,
    /// An empty histogram with the phase's bounds, cloned by each worker.
    histogram: Histogram<u64>,
    /// Measured requests answered and failed so far, for the progress bar.
    done: AtomicU64,
    failed: AtomicU64,
}

impl Shared {
    fn new(plan: &Plan, target: &Target, contexts: &[Context]) -> Result<Self, BenchError> {
        let resource = target.resource.as_deref().unwrap_or("");
        let templates = contexts
            .iter()
            .map(|c| {
                Kind::ALL
                    .iter()
                    .map(|&k| {
                        let call = (target.tool.as_str(), plan.argument.as_str());
                        Template::for_kind(c, k, call, &plan.payload, resource)
                    })
                    .collect()
            })
            .collect();
        // Latencies cannot exceed the timeout by much; beyond it they saturate.
        let highest = (plan.timeout.as_micros() as u64).max(1000) * 2;
        let histogram = Histogram::new_with_bounds(1, highest, 3)
            .map_err(|e| BenchError::usage("--timeout-ms", format!("no histogram for it: {e}")))?;
        let measure_start = Instant::now() + plan.warmup;
        Ok(Self {
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
        })
    }

    fn expect(&self, kind: Kind) -> Expect<'_> {
        match kind {
            Kind::Call => Expect::Echo {
                text: &self.payload,
                check: self.echo_check,
            },
            Kind::List => Expect::Tools,
            Kind::Read => Expect::Contents,
        }
    }

    /// Takes one measured request from the budget; false when it is spent.
    fn take_budget(&self) -> bool {
        self.budget
            .as_ref()
            .is_none_or(|b| b.fetch_sub(1, Ordering::Relaxed) > 0)
    }
}

/// Runs one phase of `plan` against `target`, its progress bar titled `title`.
pub async fn run_phase(
    plan: &Plan,
    target: &Target,
    title: &str,
    progress: &Progress,
) -> Result<Phase, BenchError> {
    let contexts = open_contexts(plan, target).await?;
    let shared = Arc::new(Shared::new(plan, target, &contexts)?);
    let measure_start = shared.measure_start;
    let watch = spawn_watch(target.pid, measure_start);
    let workers: Vec<_> = (0..plan.concurrency)
        .map(|i| tokio::spawn(worker(i, shared.clone())))
        .collect();
    let ticker = progress.follow(title, measure_start, plan.duration, plan.requests, {
        let shared = shared.clone();
        move || {
            let done = shared.done.load(Ordering::Relaxed);
            (done, shared.failed.load(Ordering::Relaxed))
        }
    });
    let mut counts = Counts::new(shared.histogram.clone());
    for handle in workers {
        if let Ok(done) = handle.await {
            counts.merge(done);
        }
    }
    ticker.abort();
    let window = watch.finish().await?;
    let elapsed = counts.last.map_or(plan.duration, |last| {
        last.saturating_duration_since(measure_start)
    });
    let not_deleted = match plan.era {
        Era::Session => {
            churn::close_many(&target.endpoint, contexts, plan.concurrency, plan.timeout)
                .await
                .len() as u64
        }
        Era::Stateless => 0,
    };
    Ok(Phase {
        counts,
        elapsed,
        window,
        not_deleted,
    })
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

/// Sends requests, one at a time, until the deadline or the budget runs out; counts those
/// started after the warm-up.
async fn worker(index: usize, shared: Arc<Shared>) -> Counts {
    let templates = &shared.templates[index % shared.templates.len()];
    let mut counts = Counts::new(shared.histogram.clone());
    let mut conn = None;
    // Ids are unique across workers (sessions are shared): worker i uses i·10⁹ + n.
    let mut next_id = index as u64 * 1_000_000_000;
    let mut id = String::with_capacity(20);
    // Workers start at different places in the mix's cycle.
    let mut turn = index;
    loop {
        let start = Instant::now();
        let measured = start >= shared.measure_start;
        if start >= shared.deadline || (measured && !shared.take_budget()) {
            break;
        }
        let kind = shared.schedule[turn % shared.schedule.len()];
        turn += 1;
        next_id += 1;
        id.clear();
        let _ = write!(id, "{next_id}");
        let template = &templates[kind.index()];
        let body = Some(template.body(&id));
        let sent = send(
            &mut conn,
            &shared.endpoint,
            &template.headers,
            body,
            Some(&id),
            shared.timeout,
        )
        .await;
        let result = sent.and_then(|reply| {
            check(&reply, &id, shared.expect(kind))?;
            Ok(reply)
        });
        let refused = result
            .as_ref()
            .is_err_and(|f| f.kind == ErrorKind::Connection);
        if measured {
            shared.done.fetch_add(1, Ordering::Relaxed);
            if result.is_err() {
                shared.failed.fetch_add(1, Ordering::Relaxed);
            }
            counts.record(kind, start, result);
        }
        if refused {
            tokio::time::sleep(RECONNECT_PAUSE).await;
        }
    }
    counts
}
