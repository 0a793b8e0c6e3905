//! The table of open client sessions: a sharded map from session id to session, and one sweeper
//! task for the whole table that closes sessions left idle. An idle session is a small record
//! and nothing else: no task, no channel, no upstream session until it makes a request.

use std::{
    sync::{
        Arc, Weak,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use dashmap::DashMap;
use prometheus::{IntCounter, IntGauge};

use crate::metrics::Metrics;
use tokio_util::sync::CancellationToken;

use super::Session;

/// Open sessions by id.
pub struct SessionTable {
    sessions: DashMap<Arc<str>, Arc<Session>>,
    /// When the table was made; sessions note their last request as milliseconds since.
    epoch: Instant,
    /// Milliseconds; a reload may change it.
    idle_timeout_ms: AtomicU64,
    /// Sessions open, and opened so far (metrics).
    active: IntGauge,
    opened: IntCounter,
}

impl SessionTable {
    /// A table whose sessions close after `idle_timeout` without a request; its sweeper runs
    /// until `shutdown`.
    pub fn new(
        idle_timeout: Duration,
        metrics: &Metrics,
        shutdown: CancellationToken,
    ) -> Arc<Self> {
        let table = Arc::new(Self {
            sessions: DashMap::new(),
            epoch: Instant::now(),
            idle_timeout_ms: AtomicU64::new(idle_timeout.as_millis() as u64),
            active: metrics.sessions_active.clone(),
            opened: metrics.sessions_opened.clone(),
        });
        spawn_sweeper(Arc::downgrade(&table), shutdown);
        table
    }

    /// Sessions idle longer than `timeout` close from now on (the sweep keeps its pace).
    pub fn set_idle_timeout(&self, timeout: Duration) {
        self.idle_timeout_ms
            .store(timeout.as_millis() as u64, Ordering::Relaxed);
    }

    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    /// How many sessions `principal` has open (a walk over the table: for `initialize` only).
    pub fn count_for(&self, principal: &crate::principal::Principal) -> usize {
        self.sessions
            .iter()
            .filter(|entry| entry.value().principal() == principal)
            .count()
    }

    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    /// Milliseconds since the table was made: the clock sessions note their activity on.
    pub fn now(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    pub fn insert(&self, session: Arc<Session>) {
        self.active.inc();
        self.opened.inc();
        self.sessions.insert(session.id().clone(), session);
    }

    /// The session `id`, noted as active now.
    pub fn get(&self, id: &str) -> Option<Arc<Session>> {
        let session = self.sessions.get(id)?.value().clone();
        session.touch(self.now());
        Some(session)
    }

    /// Ends session `id`: it is gone from the table at once, and its upstream sessions close
    /// when its last request has finished.
    pub fn remove(&self, id: &str) -> Option<Arc<Session>> {
        let (_, session) = self.sessions.remove(id)?;
        self.active.dec();
        session.close();
        Some(session)
    }

    /// Every open session (for status pages).
    pub fn sessions(&self) -> Vec<Arc<Session>> {
        self.sessions
            .iter()
            .map(|entry| entry.value().clone())
            .collect()
    }

    /// Closes every session idle for longer than the timeout.
    fn sweep(&self) {
        let now = self.now();
        let limit = self.idle_timeout_ms.load(Ordering::Relaxed);
        let idle: Vec<Arc<str>> = self
            .sessions
            .iter()
            .filter(|entry| now.saturating_sub(entry.value().last_active()) > limit)
            .map(|entry| entry.key().clone())
            .collect();
        for id in idle {
            // Removed only if still idle: a request may have come in since.
            let removed = self.sessions.remove_if(&id, |_, session| {
                now.saturating_sub(session.last_active()) > limit
            });
            if let Some((_, session)) = removed {
                self.active.dec();
                tracing::debug!("closing a client session idle for {}s", limit / 1000);
                session.close();
            }
        }
    }
}

/// Sweeps `table` for idle sessions a few times per idle timeout, while it exists.
fn spawn_sweeper(table: Weak<SessionTable>, shutdown: CancellationToken) {
    let Some(interval) = table.upgrade().map(|table| {
        (Duration::from_millis(table.idle_timeout_ms.load(Ordering::Relaxed)) / 4)
            .clamp(Duration::from_millis(50), Duration::from_secs(30))
    }) else {
        return;
    };
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = ticks.tick() => {}
                _ = shutdown.cancelled() => return,
            }
            match table.upgrade() {
                Some(table) => table.sweep(),
                None => return,
            }
        }
    });
}
