//! This process's own counters: the same limits as the shared ones, for a gateway without
//! Redis or while it cannot be reached. Each counter is checked and taken in turn; if one has
//! no room, those already taken for the call are given back.

use std::time::{Duration, Instant};

use dashmap::DashMap;

use crate::store::{Count, Counted, Counter};

#[derive(Default)]
pub(super) struct Counters {
    states: DashMap<String, State>,
}

enum State {
    /// A rate's theoretical arrival time (GCRA).
    Rate(Instant),
    Window {
        window: u64,
        used: u64,
    },
    /// The calls in flight, by token, with when their lease ends.
    Concurrent(Vec<(String, Instant)>),
}

impl Counters {
    /// Takes `counters` for the call `token`, each limit divided by `share` (the replicas
    /// that count apart).
    pub(super) fn take(&self, token: &str, counters: &[Counter], share: usize) -> Counted {
        let share = share.max(1);
        let now = Instant::now();
        for (index, counter) in counters.iter().enumerate() {
            if let Err(retry_after) = self.take_one(token, counter, share, now) {
                self.undo(token, &counters[..index]);
                return Counted::Refused { index, retry_after };
            }
        }
        Counted::Admitted
    }

    /// Gives back the concurrent places of `token` among `counters`.
    pub(super) fn give_back(&self, token: &str, counters: &[Counter]) {
        for counter in counters {
            if let Some(mut state) = self.states.get_mut(&counter.key)
                && let State::Concurrent(calls) = &mut *state
            {
                calls.retain(|(held, _)| held != token);
            }
        }
    }

    fn take_one(
        &self,
        token: &str,
        counter: &Counter,
        share: usize,
        now: Instant,
    ) -> Result<(), Duration> {
        let divided = |limit: u64| (limit / share as u64).max(1);
        let mut state =
            self.states
                .entry(counter.key.clone())
                .or_insert_with(|| match counter.count {
                    Count::Rate { .. } => State::Rate(now),
                    Count::Window { window, .. } => State::Window { window, used: 0 },
                    Count::Concurrent { .. } => State::Concurrent(Vec::new()),
                });
        match (counter.count, &mut *state) {
            (Count::Rate { limit, period }, State::Rate(tat)) => {
                let limit = divided(u64::from(limit));
                let interval = period / u32::try_from(limit).unwrap_or(u32::MAX);
                let next = (*tat).max(now) + interval;
                let ahead = next - now;
                if ahead > period {
                    return Err(ahead - period);
                }
                *tat = next;
            }
            (
                Count::Window {
                    limit,
                    window,
                    ends_in,
                },
                State::Window {
                    window: current,
                    used,
                },
            ) => {
                if *current != window {
                    (*current, *used) = (window, 0);
                }
                if *used >= divided(limit) {
                    return Err(ends_in);
                }
                *used += 1;
            }
            (Count::Concurrent { limit, lease }, State::Concurrent(calls)) => {
                calls.retain(|(_, until)| *until > now);
                if calls.len() as u64 >= divided(u64::from(limit)) {
                    return Err(Duration::from_secs(1));
                }
                calls.push((token.to_owned(), now + lease));
            }
            // The key's kind changed with the configuration: it starts again.
            (count, state) => {
                *state = match count {
                    Count::Rate { .. } => State::Rate(now),
                    Count::Window { window, .. } => State::Window { window, used: 1 },
                    Count::Concurrent { lease, .. } => {
                        State::Concurrent(vec![(token.to_owned(), now + lease)])
                    }
                };
            }
        }
        Ok(())
    }

    /// Gives back what `counters` took for `token` (a later counter refused the call).
    fn undo(&self, token: &str, counters: &[Counter]) {
        for counter in counters {
            let Some(mut state) = self.states.get_mut(&counter.key) else {
                continue;
            };
            match (counter.count, &mut *state) {
                (Count::Rate { limit, period }, State::Rate(tat)) => {
                    *tat -= period / limit.max(1);
                }
                (Count::Window { .. }, State::Window { used, .. }) => {
                    *used = used.saturating_sub(1);
                }
                (Count::Concurrent { .. }, State::Concurrent(calls)) => {
                    calls.retain(|(held, _)| held != token);
                }
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::Counters;
    use crate::store::{Count, Counted, Counter};

    fn rate(limit: u32) -> Counter {
        Counter {
            key: "q:r".into(),
            count: Count::Rate {
                limit,
                period: Duration::from_secs(60),
            },
        }
    }

    #[test]
    fn a_rate_admits_its_burst_then_one_per_interval() {
        let counters = Counters::default();
        for _ in 0..30 {
            assert_eq!(counters.take("", &[rate(30)], 1), Counted::Admitted);
        }
        let Counted::Refused { index, retry_after } = counters.take("", &[rate(30)], 1) else {
            panic!("the 31st call in a minute is refused");
        };
        assert_eq!(index, 0);
        assert!(retry_after <= Duration::from_secs(2), "{retry_after:?}");
    }

    #[test]
    fn a_refused_call_spends_nothing_and_a_share_divides_the_limit() {
        let counters = Counters::default();
        let cap = Counter {
            key: "q:c".into(),
            count: Count::Concurrent {
                limit: 1,
                lease: Duration::from_secs(60),
            },
        };
        let daily = Counter {
            key: "q:d".into(),
            count: Count::Window {
                limit: 10,
                window: 1,
                ends_in: Duration::from_secs(5),
            },
        };
        let both = [daily.clone(), cap.clone()];
        assert_eq!(counters.take("a", &both, 1), Counted::Admitted);
        assert!(matches!(
            counters.take("b", &both, 1),
            Counted::Refused { index: 1, .. }
        ));
        counters.give_back("a", &[cap]);
        assert_eq!(counters.take("c", &both, 1), Counted::Admitted);
        // Two taken of the daily ten: "b" gave its place back. With five replicas sharing the
        // limit, this one's share is two, now spent.
        assert_eq!(
            counters.take("d", std::slice::from_ref(&daily), 5),
            Counted::Refused {
                index: 0,
                retry_after: Duration::from_secs(5)
            }
        );
    }
}
