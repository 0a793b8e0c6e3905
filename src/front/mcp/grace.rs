//! When a session's reply stream begins if nothing has come: a grace on a grid of steps that
//! every request shares, and a pacer that keeps the runtime's timer due at the grid's next
//! step while requests come.
//!
//! Why: tokio wakes its timer thread whenever a timer is set for earlier than the instant that
//! thread last went to sleep until (an `eventfd` write, and that thread's round trip). A grace of
//! exactly 50 ms from each request's start was the earliest timer at almost every call, and woke
//! it each time: about 7 µs of CPU per call at one call at a time. With the pacer's step always
//! set, a grace (never earlier than the next step) wakes nothing. The pacer itself wakes once a
//! step while requests come, and stops two steps after the last.

use std::{
    sync::{
        LazyLock,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::Duration,
};

use tokio::time::Instant;

/// The grace, and the grid's step.
pub const STEP: Duration = Duration::from_millis(50);

/// Where the grid starts.
static ORIGIN: LazyLock<Instant> = LazyLock::new(Instant::now);
/// The step in which a grace was last asked for.
static LAST_ASKED: AtomicU64 = AtomicU64::new(0);
/// Whether the pacer runs.
static PACING: AtomicBool = AtomicBool::new(false);

/// When the grace of a request beginning now ends: `STEP` from now, rounded up to the grid
/// (so between one and two steps away). Starts the pacer if it is not running.
pub fn ends() -> Instant {
    let origin = *ORIGIN;
    let now = Instant::now();
    // A runtime whose clock is behind the grid's (a paused test clock) gets a plain grace.
    if now < origin {
        return now + STEP;
    }
    let now = step_of(now);
    // Read before written: every request comes here, and a write would move the line between
    // cores each time; it changes once a step, and once per start of the pacer.
    if LAST_ASKED.load(Ordering::Relaxed) < now {
        LAST_ASKED.fetch_max(now, Ordering::Relaxed);
    }
    if !PACING.load(Ordering::Acquire) && !PACING.swap(true, Ordering::AcqRel) {
        tokio::spawn(pace());
    }
    at_step(now + 2)
}

/// Keeps a timer set for the grid's next step, until no grace was asked for in two steps.
async fn pace() {
    /// Says the pacer stopped, also when its runtime drops it.
    struct Pacing;
    impl Drop for Pacing {
        fn drop(&mut self) {
            PACING.store(false, Ordering::Release);
        }
    }
    let _pacing = Pacing;
    loop {
        let step = step_of(Instant::now());
        if step > LAST_ASKED.load(Ordering::Relaxed) + 2 {
            return;
        }
        tokio::time::sleep_until(at_step(step + 1)).await;
    }
}

/// The step `instant` falls in (counted from the grid's origin).
fn step_of(instant: Instant) -> u64 {
    let since = instant.saturating_duration_since(*ORIGIN).as_nanos() / STEP.as_nanos();
    u64::try_from(since).unwrap_or(u64::MAX)
}

/// Where step `step` begins.
fn at_step(step: u64) -> Instant {
    let nanos = u64::try_from(STEP.as_nanos()).unwrap_or(u64::MAX);
    *ORIGIN + Duration::from_nanos(step.saturating_mul(nanos))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn graces_end_on_the_grid_one_to_two_steps_away_and_the_pacer_stops_when_idle() {
        for _ in 0..20 {
            let now = Instant::now();
            let ends = ends();
            assert!(ends >= now + STEP, "{:?} early", now + STEP - ends);
            assert!(ends <= Instant::now() + 2 * STEP);
            let apart = (ends - at_step(0)).as_nanos() % STEP.as_nanos();
            assert_eq!(apart, 0, "off the grid by {apart} ns");
            assert!(PACING.load(Ordering::Acquire));
            tokio::time::sleep(Duration::from_millis(7)).await;
        }
        // Two steps without a grace asked for, and the pacer has stopped.
        let deadline = Instant::now() + 10 * STEP;
        while PACING.load(Ordering::Acquire) {
            assert!(Instant::now() < deadline, "the pacer still runs");
            tokio::time::sleep(STEP).await;
        }
    }
}
