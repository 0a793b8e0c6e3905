//! Quotas (`[[quota]]`) and the per-principal `[limits]`, counted: what a call asks of each
//! counter that applies to it (`Ask`), and whether it gets it (`Quotas::take`).
//!
//! With Redis (`[store] kind = "redis"`) the counters are shared by every replica: one Lua
//! script per call checks and takes them all, atomically, on Redis's clock. Otherwise, and
//! while Redis cannot be reached, this process counts alone (`local`); in the second case
//! each limit is divided by the replicas that were beating, so that together they stay
//! about within it. A call beyond a limit is refused with the quota's name and when to try
//! again; a concurrent call keeps its place until its `Granted` is dropped.

mod local;

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, SystemTime},
};

use smallvec::SmallVec;

use crate::{
    config::{Limits, QuotaRule},
    metrics::Metrics,
    policy::Kind,
    principal::Principal,
    store::{Count, Counted, Counter, Store, record_hash},
};

pub use crate::protocol::QUOTA_EXCEEDED;

/// How long a concurrent call keeps its place at most, should its replica die with it.
const LEASE: Duration = Duration::from_secs(15 * 60);
const DAY: u64 = 86_400;

/// The names of the `[limits]` counters (made once, not per request).
static LIMITS_RATE: std::sync::LazyLock<Arc<str>> =
    std::sync::LazyLock::new(|| Arc::from("limits.requests_per_second_per_principal"));
static LIMITS_CONCURRENT: std::sync::LazyLock<Arc<str>> =
    std::sync::LazyLock::new(|| Arc::from("limits.max_concurrent_requests_per_principal"));

/// The counters of the gateway: Redis's, or this process's.
pub struct Quotas {
    store: Arc<Store>,
    local: local::Counters,
    metrics: Arc<Metrics>,
    /// Numbers the calls holding a concurrent place.
    tokens: AtomicU64,
}

/// What one call asks of the counters that apply to it, each with the name of its quota.
#[derive(Default)]
pub struct Ask {
    counters: SmallVec<[(Arc<str>, Counter); 2]>,
}

/// A call beyond a quota.
#[derive(Debug, Clone, PartialEq)]
pub struct Exceeded {
    /// The quota's name (`[[quota]] name`, or the `[limits]` key).
    pub quota: Arc<str>,
    /// Which of its limits: `rate`, `daily`, `monthly` or `concurrent`.
    pub limit: &'static str,
    /// When the call may succeed.
    pub retry_after: Duration,
}

impl Exceeded {
    /// The JSON-RPC error answering request `id`: the quota, which of its limits, and when
    /// to try again (seconds, and the Unix time in milliseconds).
    pub fn answer(&self, id: &str) -> crate::wire::Answer {
        let seconds = self.retry_after.as_secs_f64().ceil().max(1.0) as u64;
        let resets_at = crate::clock::now_millis() + self.retry_after.as_millis() as u64;
        let data = serde_json::json!({
            "quota": &*self.quota,
            "limit": self.limit,
            "retryAfterSeconds": seconds,
            "resetsAt": resets_at,
        });
        let message = format!(
            "quota `{}` exceeded ({} limit); try again in {seconds} s",
            self.quota, self.limit
        );
        crate::wire::Answer {
            message: crate::wire::write::error(Some(id), QUOTA_EXCEEDED, &message, Some(&data)),
            outcome: crate::wire::Outcome::Error {
                code: QUOTA_EXCEEDED,
                retry_after: Some(Duration::from_secs(seconds)),
            },
        }
    }
}

/// A call admitted: its concurrent places are given back when dropped.
#[must_use]
pub struct Granted {
    held: Option<Held>,
}

struct Held {
    quotas: Arc<Quotas>,
    token: String,
    counters: Vec<Counter>,
    /// Counted in this process (not in Redis).
    local: bool,
}

impl Ask {
    /// The counters `rules` put on a call of `principal` to `item` (of `kind`) of
    /// `upstream`, the upstream's own name for it.
    pub fn of_quotas(
        rules: &[QuotaRule],
        principal: &Principal,
        kind: Kind,
        upstream: &str,
        item: &str,
    ) -> Self {
        let mut ask = Self::default();
        let mut whose = None;
        for rule in rules {
            if !rule.who.matches(principal) || !rule.covers.covers(kind, upstream, item) {
                continue;
            }
            let who = if rule.shared {
                "*"
            } else {
                whose.get_or_insert_with(|| record_hash(principal.as_str()))
            };
            let key = |limit: &str| format!("q:{}:{who}:{limit}", rule.name);
            if let Some((limit, period)) = rule.rate {
                ask.push(&rule.name, key("rate"), Count::Rate { limit, period });
            }
            let now = crate::clock::unix_seconds(SystemTime::now());
            if let Some(limit) = rule.daily {
                let (window, ends_in) = day(now);
                ask.push(
                    &rule.name,
                    key("daily"),
                    Count::Window {
                        limit,
                        window,
                        ends_in,
                    },
                );
            }
            if let Some(limit) = rule.monthly {
                let (window, ends_in) = month(now);
                ask.push(
                    &rule.name,
                    key("monthly"),
                    Count::Window {
                        limit,
                        window,
                        ends_in,
                    },
                );
            }
            if let Some(limit) = rule.concurrent {
                ask.push(
                    &rule.name,
                    key("concurrent"),
                    Count::Concurrent {
                        limit,
                        lease: LEASE,
                    },
                );
            }
        }
        ask
    }

    /// The counters of `[limits]` on a request of `principal`: its rate, and (if it will
    /// be `held` while answered) its concurrency.
    pub fn of_limits(limits: &Limits, principal: &Principal, held: bool) -> Self {
        let mut ask = Self::default();
        if limits.rate_per_principal.is_none()
            && (!held || limits.max_concurrent_per_principal.is_none())
        {
            return ask;
        }
        let who = record_hash(principal.as_str());
        if let Some(rate) = limits.rate_per_principal {
            // A bucket of `burst` refilled at `per_second`: `burst` calls per burst/rate.
            let period = Duration::from_secs_f64(f64::from(rate.burst) / rate.per_second);
            ask.push(
                &LIMITS_RATE,
                format!("l:{who}:rate"),
                Count::Rate {
                    limit: rate.burst,
                    period,
                },
            );
        }
        if held && let Some(limit) = limits.max_concurrent_per_principal {
            ask.push(
                &LIMITS_CONCURRENT,
                format!("l:{who}:concurrent"),
                Count::Concurrent {
                    limit,
                    lease: LEASE,
                },
            );
        }
        ask
    }

    pub fn is_empty(&self) -> bool {
        self.counters.is_empty()
    }

    fn push(&mut self, quota: &Arc<str>, key: String, count: Count) {
        self.counters.push((quota.clone(), Counter { key, count }));
    }
}

impl Quotas {
    pub fn new(store: Arc<Store>, metrics: Arc<Metrics>) -> Arc<Self> {
        Arc::new(Self {
            store,
            local: local::Counters::default(),
            metrics,
            tokens: AtomicU64::new(0),
        })
    }

    /// Takes what `ask` asks of every counter, or nothing if one of them has no room.
    pub async fn take(self: &Arc<Self>, ask: Ask) -> Result<Granted, Exceeded> {
        if ask.is_empty() {
            return Ok(Granted { held: None });
        }
        let concurrent = ask
            .counters
            .iter()
            .any(|(_, counter)| matches!(counter.count, Count::Concurrent { .. }));
        let token = if concurrent {
            let n = self.tokens.fetch_add(1, Ordering::Relaxed);
            format!("{}:{n}", self.store.replica())
        } else {
            String::new()
        };
        let counters: Vec<Counter> = ask.counters.iter().map(|(_, c)| c.clone()).collect();
        let span = crate::telemetry::child("store quota");
        let counted =
            tracing::Instrument::instrument(self.store.count(&token, &counters), span).await;
        let (counted, local) = match counted {
            Ok(Some(counted)) => (counted, false),
            Ok(None) => (self.local.take(&token, &counters, 1), true),
            Err(_) => {
                // Redis is down: this process counts its share of each limit.
                let share = self.store.replicas();
                (self.local.take(&token, &counters, share), true)
            }
        };
        let outcome = |refused: bool| match (refused, local && self.store.is_shared()) {
            (_, true) => "local",
            (true, false) => "refused",
            (false, false) => "admitted",
        };
        match counted {
            Counted::Admitted => {
                // Once per quota (its counters are next to each other).
                let mut last: Option<&str> = None;
                for (quota, _) in &ask.counters {
                    if last != Some(&**quota) {
                        self.count(quota, outcome(false));
                        last = Some(quota);
                    }
                }
                let held: Vec<Counter> = counters
                    .into_iter()
                    .filter(|counter| matches!(counter.count, Count::Concurrent { .. }))
                    .collect();
                Ok(Granted {
                    held: (!held.is_empty()).then(|| Held {
                        quotas: self.clone(),
                        token,
                        counters: held,
                        local,
                    }),
                })
            }
            Counted::Refused { index, retry_after } => {
                let (quota, counter) = &ask.counters[index.min(ask.counters.len() - 1)];
                self.count(quota, outcome(true));
                Err(Exceeded {
                    quota: quota.clone(),
                    limit: limit_name(counter),
                    retry_after,
                })
            }
        }
    }

    fn count(&self, quota: &str, outcome: &str) {
        self.metrics
            .quota
            .with_label_values(&[quota, outcome])
            .inc();
    }
}

impl Granted {
    /// Whether it holds a concurrent place (to be kept while the answer is sent).
    pub fn holds(&self) -> bool {
        self.held.is_some()
    }
}

impl Drop for Granted {
    fn drop(&mut self) {
        let Some(held) = self.held.take() else {
            return;
        };
        if held.local {
            held.quotas.local.give_back(&held.token, &held.counters);
            return;
        }
        // Given back in Redis off the call's path; its lease would end it anyway.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                held.quotas.store.uncount(&held.token, &held.counters).await;
            });
        }
    }
}

fn limit_name(counter: &Counter) -> &'static str {
    match counter.count {
        Count::Rate { .. } => "rate",
        Count::Window { .. } if counter.key.ends_with(":daily") => "daily",
        Count::Window { .. } => "monthly",
        Count::Concurrent { .. } => "concurrent",
    }
}

/// Today's number (UTC) and the time until it ends.
fn day(now: u64) -> (u64, Duration) {
    (now / DAY, Duration::from_secs(DAY - now % DAY))
}

/// This month's number (UTC: months since 1970) and the time until it ends.
fn month(now: u64) -> (u64, Duration) {
    let (year, month) = civil_month(now / DAY);
    let (next_year, next_month) = if month == 12 {
        (year + 1, 1)
    } else {
        (year, month + 1)
    };
    let ends = days_from_civil(next_year, next_month) * DAY;
    (
        (year - 1970) * 12 + month - 1,
        Duration::from_secs(ends.saturating_sub(now)),
    )
}

/// The (year, month) of day `days` since 1970-01-01 (proleptic Gregorian).
fn civil_month(days: u64) -> (u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month)
}

/// Days since 1970-01-01 of the first of `month` of `year`.
fn days_from_civil(year: u64, month: u64) -> u64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year / 400;
    let yoe = year - era * 400;
    let mp = if month > 2 { month - 3 } else { month + 9 };
    let doy = (153 * mp + 2) / 5;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::{day, month};

    #[test]
    fn windows_are_utc_days_and_calendar_months() {
        // 2026-11-26T12:00:00Z.
        let now = 1_795_694_400;
        assert_eq!(day(now).1.as_secs(), 12 * 3600);
        let (window, ends_in) = month(now);
        assert_eq!(window, (2026 - 1970) * 12 + 10);
        // 2026-12-01T00:00:00Z is 4 days and 12 hours later.
        assert_eq!(ends_in.as_secs(), 4 * 86_400 + 12 * 3600);
        // December rolls over to January.
        let december = 1_796_169_600; // 2026-12-02T00:00:00Z
        let (window, ends_in) = month(december);
        assert_eq!(window, (2026 - 1970) * 12 + 11);
        assert_eq!(ends_in.as_secs(), 30 * 86_400);
    }
}
