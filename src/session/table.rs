//! The table of open client sessions: a sharded map from session id to session, and one sweeper
//! task for the whole table that closes sessions left idle. An idle session is a small record
//! and nothing else: no task, no channel, no upstream session until it makes a request.
//!
//! With a shared store, the table holds this replica's copies of sessions that live in the
//! store: the sweeper renews there those its requests used, and forgets copies left idle
//! here (the session goes on elsewhere) unless a stream of theirs is open here, in which case
//! it asks the store whether the session still lives.

use std::{
    sync::{
        Arc, Weak,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use dashmap::DashMap;
use foldhash::fast::RandomState;
use prometheus::{IntCounter, IntGauge};

use crate::{
    metrics::Metrics,
    store::{Heard, Store},
};
use tokio_util::sync::CancellationToken;

use super::Session;

/// Open sessions by id.
pub struct SessionTable {
    sessions: DashMap<Arc<str>, Arc<Session>, RandomState>,
    /// With a shared store: the ids of the sessions here by their hash (what the store names
    /// them by), and when the sweeper last renewed them there (table clock).
    by_hash: DashMap<Box<str>, Arc<str>, RandomState>,
    renewed_at: AtomicU64,
    /// The store's recoveries as of the last renewal: after one, every session is written
    /// again, as the store may have lost them.
    recoveries: AtomicU64,
    store: Arc<Store>,
    /// When the table was made; sessions note their last request as milliseconds since.
    epoch: Instant,
    /// Milliseconds; a reload may change it.
    idle_timeout_ms: AtomicU64,
    /// Sessions open, and opened so far (metrics).
    active: IntGauge,
    opened: IntCounter,
    resumed: IntCounter,
    /// Calls of clients without sessions (2026-07-28) waiting for their answers.
    parked: Arc<super::Parked>,
}

impl SessionTable {
    /// Where calls of clients without sessions wait for their answers.
    pub fn parked(&self) -> &Arc<super::Parked> {
        &self.parked
    }

    /// A table whose sessions close after `idle_timeout` without a request; its sweeper runs
    /// until `shutdown`.
    pub fn new(
        idle_timeout: Duration,
        metrics: &Metrics,
        store: Arc<Store>,
        shutdown: CancellationToken,
    ) -> Arc<Self> {
        let table = Arc::new(Self {
            sessions: DashMap::default(),
            by_hash: DashMap::default(),
            parked: Arc::default(),
            renewed_at: AtomicU64::new(0),
            recoveries: AtomicU64::new(0),
            store,
            epoch: Instant::now(),
            idle_timeout_ms: AtomicU64::new(idle_timeout.as_millis() as u64),
            active: metrics.sessions_active.clone(),
            opened: metrics.sessions_opened.clone(),
            resumed: metrics.sessions_resumed.clone(),
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

    /// How long a session lives without a request.
    pub fn idle_timeout(&self) -> Duration {
        Duration::from_millis(self.idle_timeout_ms.load(Ordering::Relaxed))
    }

    /// A session a client just opened here.
    pub fn insert(&self, session: Arc<Session>) {
        self.opened.inc();
        self.add(session);
    }

    /// A session another replica opened, served here from now on; if a concurrent request
    /// adopted it first, that copy.
    pub fn adopt(&self, session: Arc<Session>) -> Arc<Session> {
        let adopted = match self.sessions.entry(session.id().clone()) {
            dashmap::Entry::Occupied(entry) => return entry.get().clone(),
            dashmap::Entry::Vacant(entry) => entry.insert(session).clone(),
        };
        self.resumed.inc();
        self.counted_in(&adopted);
        adopted
    }

    fn add(&self, session: Arc<Session>) {
        self.counted_in(&session);
        self.sessions.insert(session.id().clone(), session);
    }

    /// Counts a session just put in the map, and finds it by its hash from now on.
    fn counted_in(&self, session: &Session) {
        self.active.inc();
        if let Some(hash) = session.shared_hash() {
            self.by_hash.insert(hash.into(), session.id().clone());
        }
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
        session.upstreams().release();
        self.forget(&session);
        Some(session)
    }

    /// This replica's copy of the session the store names `hash`, if it holds one.
    pub(super) fn hashed(&self, hash: &str) -> Option<Arc<Session>> {
        let id = self.by_hash.get(hash)?.value().clone();
        self.sessions
            .get(&id)
            .map(|session| session.value().clone())
    }

    /// Ends this replica's copy of the session the store names `hash` (another replica ended
    /// it).
    pub fn remove_hashed(&self, hash: &str) {
        if let Some((_, id)) = self.by_hash.remove(hash) {
            self.remove(&id);
        }
    }

    /// Closes a session gone from the map.
    fn forget(&self, session: &Session) {
        self.active.dec();
        if let Some(hash) = session.shared_hash() {
            self.by_hash.remove(hash);
        }
        session.close();
    }

    /// Every open session (for status pages).
    pub fn sessions(&self) -> Vec<Arc<Session>> {
        self.sessions
            .iter()
            .map(|entry| entry.value().clone())
            .collect()
    }

    /// Closes every session idle for longer than the timeout; with a shared store, first
    /// renews there the sessions used since the last sweep.
    async fn sweep(&self) {
        let now = self.now();
        let limit = self.idle_timeout_ms.load(Ordering::Relaxed);
        if self.store.keeps_sessions() {
            self.renew(now).await;
        }
        let mut idle: Vec<Arc<Session>> = self
            .sessions
            .iter()
            .filter(|entry| now.saturating_sub(entry.value().last_active()) > limit)
            .map(|entry| entry.value().clone())
            .collect();
        let alive = if self.store.keeps_sessions() {
            self.alive_elsewhere(&mut idle).await
        } else {
            vec![false; idle.len()]
        };
        for (session, alive) in idle.into_iter().zip(alive) {
            // Removed only if still idle: a request may have come in since.
            let removed = self.sessions.remove_if(session.id(), |_, session| {
                now.saturating_sub(session.last_active()) > limit
            });
            if let Some((_, session)) = removed {
                tracing::debug!("closing a client session idle for {}s", limit / 1000);
                if !alive {
                    // Ended everywhere: so are its upstream sessions.
                    session.upstreams().release();
                }
                self.forget(&session);
            }
        }
    }

    /// Notes in the store that the sessions with requests since the last renewal are alive
    /// for another idle timeout (and, after the store was unreachable, writes them again).
    async fn renew(&self, now: u64) {
        let mut since = self.renewed_at.swap(now, Ordering::Relaxed);
        let recoveries = self.store.recoveries();
        if self.recoveries.swap(recoveries, Ordering::Relaxed) != recoveries {
            since = 0;
        }
        let sessions: Vec<Arc<Session>> = self
            .sessions
            .iter()
            .filter(|entry| entry.value().last_active() >= since)
            .map(|entry| entry.value().clone())
            .collect();
        let hashes: Vec<&str> = sessions.iter().filter_map(|s| s.shared_hash()).collect();
        if let Err(error) = self
            .store
            .renew_sessions(&hashes, self.idle_timeout())
            .await
        {
            tracing::debug!(%error, "sessions not renewed in the shared store");
            // Try them all again next time.
            self.renewed_at.store(since, Ordering::Relaxed);
        }
    }

    /// Of the idle copies, which sessions live on with other replicas (in `idle`'s order).
    /// Copies with a stream open here or resource subscriptions made here are taken out of
    /// `idle` if their session lives (its requests go to other replicas). If the store cannot
    /// say, every session counts as living: its copies with listeners stay, and the others
    /// leave its upstream sessions to the replicas that may still use them.
    async fn alive_elsewhere(&self, idle: &mut Vec<Arc<Session>>) -> Vec<bool> {
        let hashes: Vec<&str> = idle.iter().filter_map(|s| s.shared_hash()).collect();
        let mut alive = self
            .store
            .sessions_alive(&hashes)
            .await
            .unwrap_or_else(|_| vec![true; hashes.len()])
            .into_iter();
        let mut lives = Vec::with_capacity(idle.len());
        for session in std::mem::take(idle) {
            // In `hashes`' order: a session without a hash took no answer.
            let alive = session.shared_hash().is_some() && alive.next().unwrap_or(true);
            let listened = session.standalone().is_open() || session.has_subscriptions();
            if !(alive && listened) {
                idle.push(session);
                lives.push(alive);
            }
        }
        lives
    }
}

/// What replicas publish, for a table: sessions ended elsewhere end here; news of an event
/// makes the stream open here (if any) read it.
pub struct TableEars(pub Weak<SessionTable>);

impl Heard for TableEars {
    fn session_ended(&self, hash: &str) {
        if let Some(table) = self.0.upgrade() {
            table.remove_hashed(hash);
        }
    }

    fn session_event(&self, hash: &str) {
        let session = self.0.upgrade().and_then(|table| table.hashed(hash));
        if let Some(shared) = session.as_ref().and_then(|s| s.standalone().shared()) {
            shared.pull();
        }
    }

    fn session_message(&self, hash: &str, message: &[u8]) {
        if let Some(session) = self.0.upgrade().and_then(|table| table.hashed(hash)) {
            session.relayed(message);
        }
    }

    fn reconnected(&self) {
        let Some(table) = self.0.upgrade() else {
            return;
        };
        for entry in table.sessions.iter() {
            if let Some(shared) = entry.value().standalone().shared() {
                shared.pull();
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
                Some(table) => table.sweep().await,
                None => return,
            }
        }
    });
}
