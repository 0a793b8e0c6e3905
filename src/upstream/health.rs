//! How an upstream is doing, and the signals between its requests and its supervisor: the
//! status shown to operators, whether it serves, the outage that fails the requests in flight,
//! the suspicion or want that makes the supervisor look now, and counts for metrics.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use arc_swap::ArcSwap;
use tokio::sync::{Notify, futures::Notified, watch};

use super::{UpstreamState, UpstreamStatus};

/// An upstream's health, as its supervisor finds it and its requests see it.
pub struct Health {
    status: ArcSwap<UpstreamStatus>,
    /// Whether the upstream serves: connected and discovered. Its lists are in the catalog and
    /// requests are routed to it only while this is set; the status shown follows it.
    serving: AtomicBool,
    /// Notified (all waiters) when the supervisor finds the upstream gone, so that requests in
    /// flight on any of its connections fail at once rather than at their timeout.
    outage: Notify,
    /// Woken when a request saw the upstream's transport fail: the supervisor checks at once.
    suspect: Notify,
    /// Woken when a request found the upstream down: the supervisor tries again before its
    /// backoff is over (an HTTP server that comes back is used again at once).
    wanted: Notify,
    /// Whether a request's want is heard (not for a process, which is not started sooner).
    eager: bool,
    /// Set once the first connection attempt has ended, either way.
    settled: watch::Sender<bool>,
    /// Times connected again after a failure, and failed health checks (for metrics).
    restarts: AtomicU64,
    failed_checks: AtomicU64,
}

impl Health {
    /// The health of an upstream not connected yet; `eager`: whether a request that finds it
    /// down has the supervisor try again at once.
    pub fn new(eager: bool) -> Self {
        Self {
            status: ArcSwap::from_pointee(UpstreamStatus::new(UpstreamState::Connecting)),
            serving: AtomicBool::new(false),
            outage: Notify::new(),
            suspect: Notify::new(),
            wanted: Notify::new(),
            eager,
            settled: watch::Sender::new(false),
            restarts: AtomicU64::new(0),
            failed_checks: AtomicU64::new(0),
        }
    }

    pub fn status(&self) -> Arc<UpstreamStatus> {
        self.status.load_full()
    }

    /// Stores `status`; whether it differs from the one before in what operators are told
    /// (state, error, retries, authorization link).
    pub(super) fn replace_status(&self, status: Arc<UpstreamStatus>) -> bool {
        let before = self.status.swap(status.clone());
        before.state != status.state
            || before.last_error != status.last_error
            || before.retries != status.retries
            || before.authorization_url != status.authorization_url
    }

    /// Whether the upstream serves requests now (connected and discovered).
    pub fn is_ready(&self) -> bool {
        self.serving.load(Ordering::Acquire)
    }

    pub(super) fn set_serving(&self, serving: bool) {
        self.serving.store(serving, Ordering::Release);
    }

    /// Resolves when the supervisor next finds the upstream gone. Create it before sending a
    /// request: an outage declared after creation and before the first poll still counts.
    pub fn outage(&self) -> Notified<'_> {
        self.outage.notified()
    }

    /// Fails the requests in flight: the upstream is gone.
    pub(super) fn declare_outage(&self) {
        self.outage.notify_waiters();
    }

    /// Tells the supervisor that a request saw the upstream's transport fail, so that it
    /// checks the upstream now rather than at its next routine check.
    pub fn suspect(&self) {
        self.suspect.notify_one();
    }

    /// Resolves when a request suspects the upstream (for the supervisor).
    pub(super) fn suspected(&self) -> Notified<'_> {
        self.suspect.notified()
    }

    /// A request found the upstream down: for an HTTP server, the supervisor tries to connect
    /// again without waiting out its backoff (a process is not started again sooner).
    pub fn want(&self) {
        if self.eager {
            self.wanted.notify_one();
        }
    }

    /// Resolves once a request wanted the upstream, `after` from `since` at the soonest.
    pub(super) async fn wanted_since(&self, since: Instant, after: Duration) {
        loop {
            self.wanted.notified().await;
            if since.elapsed() >= after {
                return;
            }
        }
    }

    /// Resolves once the first connection attempt has ended (ready or failed).
    pub async fn wait_settled(&self) {
        let mut settled = self.settled.subscribe();
        // The sender lives as long as `self`, so this cannot fail while borrowed.
        let _ = settled.wait_for(|settled| *settled).await;
    }

    pub(super) fn mark_settled(&self) {
        self.settled
            .send_if_modified(|settled| !std::mem::replace(settled, true));
    }

    pub(super) fn count_restart(&self) {
        self.restarts.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn count_failed_check(&self) {
        self.failed_checks.fetch_add(1, Ordering::Relaxed);
    }

    /// Times reconnected after a failure, and failed health checks, so far.
    pub fn restart_counts(&self) -> (u64, u64) {
        (
            self.restarts.load(Ordering::Relaxed),
            self.failed_checks.load(Ordering::Relaxed),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_outage_reaches_requests_that_began_before_it() {
        let health = Health::new(true);
        let outage = health.outage();
        health.declare_outage();
        tokio::time::timeout(Duration::from_secs(1), outage)
            .await
            .expect("the outage was heard");
    }

    #[test]
    fn only_a_change_operators_see_is_told() {
        let health = Health::new(false);
        let connecting = health.status();
        assert!(!health.replace_status(Arc::new(connecting.moved_to(UpstreamState::Connecting))));
        assert!(health.replace_status(Arc::new(connecting.moved_to(UpstreamState::Ready))));
    }
}
