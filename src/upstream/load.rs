//! What an upstream is asked to carry: its requests in flight (counted for a drain, and timed
//! to tell when it has stopped getting on with them), under its `max_concurrent_requests`
//! limit and queue if it has one.

use std::{
    sync::atomic::{AtomicU64, AtomicUsize, Ordering},
    time::{Duration, Instant},
};

use tokio::sync::Notify;

use super::{Admission, Admitted, Overloaded};

/// An upstream's requests in flight, and its limit.
pub struct Load {
    /// `max_concurrent_requests`, if set.
    admission: Option<Admission>,
    /// Requests in flight (admitted, on the way or waiting for the answer).
    in_flight: AtomicUsize,
    /// Notified when `in_flight` drops to zero, for a drain.
    drained: Notify,
    /// When a request last finished, or the first of those in flight began, in milliseconds
    /// since `born`: with requests in flight, how long the upstream has been stuck.
    progress: AtomicU64,
    born: Instant,
}

/// A request counted in flight (and its place under the limit, if there is one); uncounted
/// when dropped.
pub struct InFlight<'u> {
    load: &'u Load,
    _admitted: Option<Admitted<'u>>,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.load.mark_progress();
        if self.load.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.load.drained.notify_waiters();
        }
    }
}

impl Load {
    pub fn new(admission: Option<Admission>) -> Self {
        Self {
            admission,
            in_flight: AtomicUsize::new(0),
            drained: Notify::new(),
            progress: AtomicU64::new(0),
            born: Instant::now(),
        }
    }

    /// Counts a request in flight at once, if there is no limit to wait for.
    pub fn unlimited(&self) -> Option<InFlight<'_>> {
        self.admission.is_none().then(|| self.count(None))
    }

    /// Counts a request in flight once the limit, if there is one, has a place for it (which
    /// may mean a wait in its queue), or why it has none.
    pub async fn admit(&self) -> Result<InFlight<'_>, Overloaded> {
        let admitted = match &self.admission {
            Some(admission) => Some(admission.admit().await?),
            None => None,
        };
        Ok(self.count(admitted))
    }

    fn count<'u>(&'u self, admitted: Option<Admitted<'u>>) -> InFlight<'u> {
        if self.in_flight.fetch_add(1, Ordering::AcqRel) == 0 {
            self.mark_progress();
        }
        InFlight {
            load: self,
            _admitted: admitted,
        }
    }

    /// Requests in flight now.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Acquire)
    }

    /// Requests waiting for a place under `max_concurrent_requests`.
    pub fn queued(&self) -> usize {
        self.admission.as_ref().map_or(0, Admission::waiting)
    }

    /// Records that the upstream is getting on with its requests (one finished, or it answered
    /// a health check).
    pub fn mark_progress(&self) {
        let now = self.born.elapsed().as_millis() as u64;
        self.progress.store(now, Ordering::Relaxed);
    }

    /// With requests in flight, how long since one finished (or the first began); `None` when
    /// there are none.
    pub fn stuck_for(&self) -> Option<Duration> {
        if self.in_flight() == 0 {
            return None;
        }
        let since = self.progress.load(Ordering::Relaxed);
        let now = self.born.elapsed().as_millis() as u64;
        Some(Duration::from_millis(now.saturating_sub(since)))
    }

    /// Resolves when no request is in flight, or at `deadline`; whether they all ended.
    pub async fn drained_by(&self, deadline: tokio::time::Instant) -> bool {
        loop {
            let drained = self.drained.notified();
            if self.in_flight() == 0 {
                return true;
            }
            if tokio::time::timeout_at(deadline, drained).await.is_err() {
                return false;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_drain_waits_for_the_last_request_and_no_longer() {
        let load = Load::new(Some(Admission::new(1, 1)));
        let first = load.admit().await.unwrap();
        assert_eq!(load.in_flight(), 1);
        assert!(load.stuck_for().is_some());
        let soon = tokio::time::Instant::now() + Duration::from_millis(20);
        assert!(!load.drained_by(soon).await, "one is still in flight");
        let later = tokio::time::Instant::now() + Duration::from_secs(5);
        let (drained, ()) = tokio::join!(load.drained_by(later), async { drop(first) });
        assert!(drained);
        assert_eq!((load.in_flight(), load.stuck_for()), (0, None));
    }
}
