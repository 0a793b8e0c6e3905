//! State that outlives one request and that replicas share: which sessions are alive (the
//! rest of a session travels in its id), the events of their standalone streams (sealed), the
//! news that one ended or has a new event, the upstream sessions of each (`upstreams`), the
//! resource subscriptions of each and which replica holds them (`subscriptions`), which
//! replicas are alive (`replicas`), who created the tasks of upstreams without sessions
//! (`tasks`), and sealed records, sets and leases for whoever keeps more (`records`: the OAuth
//! vault).
//!
//! `embedded` (the default) keeps the sessions' part of it in a file (`file`), for the next
//! process on this machine: after a restart or an upgrade, sessions, their stream events,
//! upstream sessions and subscriptions go on as they would on another replica. `memory`
//! keeps nothing: a session lives in its process's table alone. `redis` keeps all of it in
//! Redis, every key under the configured prefix, so that any replica serves any session. A
//! store being unreachable (Redis down, the file held by another process) is reported (log,
//! `/healthz`, `switchyard_store_up`) and survived: what needs no shared state goes on being
//! served, and what the process holds is written again once the store answers (liveness is
//! renewed from the session table, not kept only in the store).

/// A Lua script that starts with `now`, Redis's clock in milliseconds.
macro_rules! on_redis_clock {
    ($body:literal) => {
        concat!(
            "local t = redis.call('TIME')\n",
            "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n",
            $body
        )
    };
}

mod counters;
mod file;
mod found;
mod pins;
pub mod private;
mod records;
mod redis;
mod replicas;
mod seal;
mod subscriptions;
mod tasks;
mod upstreams;

pub use counters::{Count, Counted, Counter};
pub use pins::PIN_KIND;
pub use records::{Lease, record_hash};
pub use replicas::{BEAT, STALE};
pub use seal::Sealer;
pub use subscriptions::SubscriptionRecord;

use std::{
    path::{Path, PathBuf},
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, SystemTime},
};

use prometheus::{IntCounter, IntGauge};
use tokio_util::sync::CancellationToken;

use crate::{
    config::{StoreKind, StoreSettings},
    metrics::Metrics,
};

/// Why the shared store could not be used.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    #[error("the store is unreachable: {0}")]
    Unreachable(String),
    /// The store answered, but not with what a key of this kind holds.
    #[error("the shared store's {kind} record cannot be read: {reason}")]
    Unreadable { kind: &'static str, reason: String },
}

/// The store: Redis, the embedded file, or neither (in memory).
pub struct Store {
    redis: Option<redis::Redis>,
    file: Option<file::StoreFile>,
    health: Health,
    /// Seals what must not be readable in the store, and session ids.
    sealer: Arc<Sealer>,
    /// Who is told what replicas publish.
    hearers: std::sync::RwLock<Vec<Arc<dyn Heard>>>,
    /// This replica's id among those sharing the store (see `replicas`).
    replica: String,
    /// The replicas that beat recently, this one included, as of the last beat.
    alive: std::sync::atomic::AtomicUsize,
    /// Who created the tasks of upstreams without sessions (`tasks`).
    task_owners: crate::expiring::Expiring<String>,
}

/// What the store is and whether it answers, for `/healthz` and the admin API.
#[derive(Debug, Clone, serde::Serialize)]
pub struct StoreStatus {
    pub kind: &'static str,
    pub up: bool,
    /// This replica's id among those sharing the store (Redis only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replica: Option<String>,
    /// The last failure, while it lasts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Since when it has failed (Unix seconds).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub down_since: Option<u64>,
}

impl Store {
    /// The store `settings` describe (an embedded file in `state_dir` unless they name one).
    /// Redis, or the file, is connected to on first use, and again after any failure: a
    /// gateway starts whether or not it can be reached.
    pub fn new(settings: &StoreSettings, state_dir: &Path, metrics: &Metrics) -> Arc<Self> {
        let (redis, file, name) = match &settings.kind {
            StoreKind::Embedded { .. } => {
                let path = settings
                    .file(state_dir)
                    .expect("an embedded store has a file");
                (None, Some(file::StoreFile::new(path)), "file")
            }
            StoreKind::Memory => (None, None, "memory"),
            StoreKind::Redis { url, prefix } => {
                (Some(redis::Redis::new(url, prefix)), None, "Redis")
            }
        };
        let health = Health {
            name,
            down: Mutex::new(None),
            recoveries: AtomicU64::new(0),
            up_gauge: metrics.store_up.clone(),
            errors: metrics.store_errors.clone(),
        };
        health.up_gauge.set(1);
        let sealer = match &file {
            Some(file) if settings.session_keys.is_empty() => {
                let path = key_path(file.path());
                match private::read_or_create_key(&path, "the key that seals session ids") {
                    Ok(key) => Sealer::new(&[key]),
                    Err(error) => {
                        tracing::error!(key = %path.display(), %error, "cannot read or make the key that seals session ids: sessions will end with this process");
                        Sealer::new(&[])
                    }
                }
            }
            _ => Sealer::new(&settings.session_keys),
        };
        Arc::new(Self {
            redis,
            file,
            health,
            sealer: Arc::new(sealer),
            hearers: Default::default(),
            alive: std::sync::atomic::AtomicUsize::new(1),
            replica: replicas::new_replica_id(),
            task_owners: tasks::owners(),
        })
    }

    /// Whether the store can be used now (the embedded file opened, if it is one): for the
    /// start-up check that no other process holds it.
    pub async fn check(&self) -> Result<(), StoreError> {
        match &self.file {
            Some(file) => self.health.of(file.open().await),
            None => Ok(()),
        }
    }

    /// Lets another process open the embedded file: flushed and closed, and (`for_good`,
    /// once an upgrade's successor has the sockets) not opened again by this one.
    pub async fn release_file(&self, for_good: bool) {
        if let Some(file) = &self.file
            && let Err(error) = file.release(for_good).await
        {
            tracing::warn!(%error, "the store file was not flushed before it was released");
        }
    }

    /// The sealer of the keys replicas share (`[store] session_keys`).
    pub fn sealer(&self) -> &Arc<Sealer> {
        &self.sealer
    }

    /// Whether replicas share this store (Redis): then it also keeps tokens and
    /// authorizations, and replicas beat to know of each other.
    pub fn is_shared(&self) -> bool {
        self.redis.is_some()
    }

    /// Whether sessions outlive the process's table: kept in Redis or in the embedded file.
    pub fn keeps_sessions(&self) -> bool {
        self.redis.is_some() || self.file.is_some()
    }

    pub fn status(&self) -> StoreStatus {
        let down = self.health.lock().clone();
        StoreStatus {
            kind: match (&self.redis, &self.file) {
                (Some(_), _) => "redis",
                (None, Some(_)) => "embedded",
                (None, None) => "memory",
            },
            up: down.is_none(),
            replica: self.is_shared().then(|| self.replica.clone()),
            down_since: down
                .as_ref()
                .map(|(since, _)| crate::clock::unix_seconds(*since)),
            error: down.map(|(_, error)| error),
        }
    }

    /// How many times the store answered again after failing: what it held may be gone (a
    /// Redis restarted empty), so whoever keeps state in it writes it again.
    pub fn recoveries(&self) -> u64 {
        self.health.recoveries.load(Ordering::Relaxed)
    }

    /// Whether session `hash` is alive anywhere: never, in memory, where a session lives only
    /// in its table.
    pub async fn session_alive(&self, hash: &str) -> Result<bool, StoreError> {
        let alive = self.sessions_alive(&[hash]).await?;
        Ok(alive.first().copied().unwrap_or(false))
    }

    /// Of the sessions `hashes`, which are alive (in the same order).
    pub async fn sessions_alive(&self, hashes: &[&str]) -> Result<Vec<bool>, StoreError> {
        if hashes.is_empty() {
            return Ok(Vec::new());
        }
        if let Some(file) = &self.file {
            return self.health.of(file.alive(owned(hashes)).await);
        }
        let Some(redis) = &self.redis else {
            return Ok(vec![false; hashes.len()]);
        };
        self.health.of(redis.alive_many(hashes).await)
    }

    /// Notes that the sessions `hashes` are alive for `ttl` from now.
    pub async fn renew_sessions(&self, hashes: &[&str], ttl: Duration) -> Result<(), StoreError> {
        if hashes.is_empty() {
            return Ok(());
        }
        if let Some(file) = &self.file {
            return self.health.of(file.renew(owned(hashes), ttl).await);
        }
        let Some(redis) = &self.redis else {
            return Ok(());
        };
        self.health.of(redis.renew(hashes, ttl).await)
    }

    /// Ends session `hash` everywhere: it is no longer alive, and every replica hears so.
    pub async fn session_ended(&self, hash: &str) -> Result<(), StoreError> {
        if let Some(file) = &self.file {
            self.health.of(file.end(hash.to_owned()).await)?;
            Heard::session_ended(self, hash);
            return Ok(());
        }
        let Some(redis) = &self.redis else {
            return Ok(());
        };
        self.health.of(redis.end(hash).await)
    }

    /// Tells `heard`, from now on, what replicas publish.
    pub fn hear(&self, heard: Arc<dyn Heard>) {
        self.hearers
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push(heard);
    }

    /// Listens to what replicas publish, telling those who `hear`, until `shutdown`; for the
    /// embedded file, flushes and sweeps it until then. Called once.
    pub fn listen(self: &Arc<Self>, shutdown: CancellationToken) {
        if self.file.is_some() {
            tokio::spawn(file_upkeep(self.clone(), shutdown));
            return;
        }
        if self.redis.is_none() {
            return;
        }
        let store = self.clone();
        tokio::spawn(async move {
            let Some(redis) = &store.redis else { return };
            redis.listen(&store.health, &*store, shutdown).await;
        });
    }

    /// Passes a message of session `hash`'s client to the replicas holding the session,
    /// sealed: one that this replica could not act on (an answer to a request another replica
    /// sent, an unsubscribe from what another replica subscribed).
    pub async fn relay_message(&self, hash: &str, message: &[u8]) -> Result<(), StoreError> {
        // The embedded file has no other process to pass it to.
        let Some(redis) = &self.redis else {
            return Ok(());
        };
        let sealed = self.sealer.seal(&relay_purpose(hash), message);
        self.health.of(redis.relay(hash, &sealed).await)
    }

    /// Adds `message` to the events of session `hash`'s standalone stream (sealed), kept
    /// for `ttl`; every replica hears of it.
    pub async fn append_event(
        &self,
        hash: &str,
        message: &[u8],
        ttl: Duration,
    ) -> Result<(), StoreError> {
        let sealed = self.sealer.seal(&event_purpose(hash), message);
        if let Some(file) = &self.file {
            self.health.of(file.append(hash.to_owned(), sealed).await)?;
            Heard::session_event(self, hash);
            return Ok(());
        }
        let Some(redis) = &self.redis else {
            return Ok(());
        };
        self.health.of(redis.append(hash, &sealed, ttl).await)
    }

    /// The events of session `hash` after event `after` (or all kept), oldest first.
    pub async fn events_after(
        &self,
        hash: &str,
        after: Option<&str>,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        let sealed = if let Some(file) = &self.file {
            let after = after.map(str::to_owned);
            self.health
                .of(file.events_after(hash.to_owned(), after).await)?
        } else if let Some(redis) = &self.redis {
            self.health.of(redis.events_after(hash, after).await)?
        } else {
            return Ok(Vec::new());
        };
        let purpose = event_purpose(hash);
        sealed
            .into_iter()
            .map(|(id, sealed)| match self.sealer.open(&purpose, &sealed) {
                Some(message) => Ok(StoredEvent {
                    id,
                    message: message.into(),
                }),
                None => Err(StoreError::Unreadable {
                    kind: "stream event",
                    reason: format!(
                        "event {id} does not open with this replica's session keys (another \
                         key, or altered)"
                    ),
                }),
            })
            .collect()
    }

    /// The last event of session `hash` a stream was sent, if any.
    pub async fn events_seen(&self, hash: &str) -> Result<Option<String>, StoreError> {
        if let Some(file) = &self.file {
            return self.health.of(file.seen(hash.to_owned()).await);
        }
        let Some(redis) = &self.redis else {
            return Ok(None);
        };
        self.health.of(redis.seen(hash).await)
    }

    /// Notes that a stream of session `hash` was sent its events up to `id`.
    pub async fn set_events_seen(
        &self,
        hash: &str,
        id: &str,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        if let Some(file) = &self.file {
            return self
                .health
                .of(file.set_seen(hash.to_owned(), id.to_owned()).await);
        }
        let Some(redis) = &self.redis else {
            return Ok(());
        };
        self.health.of(redis.set_seen(hash, id, ttl).await)
    }
}

/// What replicas publish, as one replica hears it.
pub trait Heard: Send + Sync {
    /// Session `hash` was ended (by its client, on some replica).
    fn session_ended(&self, _hash: &str) {}
    /// Session `hash`'s standalone stream has a new event.
    fn session_event(&self, _hash: &str) {}
    /// The record of `kind` whose key has `record_hash` `hash` changed.
    fn record_changed(&self, _kind: &str, _hash: &str) {}
    /// Another replica relayed `message`, from the client of session `hash` (see
    /// `Store::relay_message`).
    fn session_message(&self, _hash: &str, _message: &[u8]) {}
    /// Listening (again): what was published meanwhile was missed.
    fn reconnected(&self) {}
}

/// The store tells each of its hearers.
impl Heard for Store {
    fn session_ended(&self, hash: &str) {
        self.each_hearer(|heard| heard.session_ended(hash));
    }

    fn session_event(&self, hash: &str) {
        self.each_hearer(|heard| heard.session_event(hash));
    }

    fn record_changed(&self, kind: &str, hash: &str) {
        self.each_hearer(|heard| heard.record_changed(kind, hash));
    }

    /// `sealed`, as the relaying replica sealed it, is opened here.
    fn session_message(&self, hash: &str, sealed: &[u8]) {
        let Some(message) = self.sealer.open(&relay_purpose(hash), sealed) else {
            tracing::warn!(
                "a relayed message that does not open with the session keys was ignored"
            );
            return;
        };
        self.each_hearer(|heard| heard.session_message(hash, &message));
    }

    fn reconnected(&self) {
        self.each_hearer(|heard| heard.reconnected());
    }
}

impl Store {
    fn each_hearer(&self, tell: impl Fn(&dyn Heard)) {
        let hearers = self
            .hearers
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        for heard in hearers.iter() {
            tell(&**heard);
        }
    }
}

/// One event of a session's standalone stream: its id in the store, and the message.
#[derive(Debug, Clone)]
pub struct StoredEvent {
    pub id: String,
    pub message: bytes::Bytes,
}

/// Whether a client's `Last-Event-ID` is an id the store gives events (`MILLIS-SEQ`).
pub fn is_event_id(id: &str) -> bool {
    let Some((millis, seq)) = id.split_once('-') else {
        return false;
    };
    let digits = |s: &str| !s.is_empty() && s.len() <= 20 && s.bytes().all(|b| b.is_ascii_digit());
    digits(millis) && digits(seq)
}

/// Events kept per session stream.
const EVENTS_KEPT: usize = 1000;

/// The key that seals session ids, kept beside the embedded store's file.
fn key_path(file: &Path) -> PathBuf {
    file.with_extension("key")
}

fn owned(hashes: &[&str]) -> Vec<String> {
    hashes.iter().map(|hash| (*hash).to_owned()).collect()
}

/// Flushes the embedded file every `FLUSH_EVERY` and sweeps it every `SWEEP_EVERY` (and at
/// once), until `shutdown`.
async fn file_upkeep(store: Arc<Store>, shutdown: CancellationToken) {
    let Some(file) = &store.file else { return };
    let mut flushes = tokio::time::interval(file::FLUSH_EVERY);
    let mut sweeps = tokio::time::interval(file::SWEEP_EVERY);
    for ticks in [&mut flushes, &mut sweeps] {
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    }
    loop {
        tokio::select! {
            _ = flushes.tick() => {
                let _ = store.health.of(file.flush().await);
            }
            _ = sweeps.tick() => {
                match store.health.of(file.sweep().await) {
                    Ok(0) | Err(_) => {}
                    Ok(gone) => tracing::debug!(gone, "sessions no longer alive removed from the store file"),
                }
            }
            () = shutdown.cancelled() => return,
        }
    }
}

fn relay_purpose(hash: &str) -> Vec<u8> {
    [b"switchyard relayed ".as_slice(), hash.as_bytes()].concat()
}

fn event_purpose(hash: &str) -> Vec<u8> {
    [b"switchyard stream event ".as_slice(), hash.as_bytes()].concat()
}

/// Whether the store answers, noted from every use of it.
struct Health {
    /// What the store is, for the log: `Redis`, `file`.
    name: &'static str,
    /// Since when, and why, it has been failing.
    down: Mutex<Option<(SystemTime, String)>>,
    recoveries: AtomicU64,
    up_gauge: IntGauge,
    errors: IntCounter,
}

impl Health {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<(SystemTime, String)>> {
        self.down
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Notes how a use of the store went, and passes its result on.
    fn of<T>(&self, result: Result<T, StoreError>) -> Result<T, StoreError> {
        match &result {
            Ok(_) => self.up(),
            Err(error) => self.failed(error),
        }
        result
    }

    fn up(&self) {
        // Read without the lock first: this runs on every use.
        if self.up_gauge.get() == 1 {
            return;
        }
        if self.lock().take().is_some() {
            tracing::info!(store = self.name, "the store answers again");
            self.recoveries.fetch_add(1, Ordering::Relaxed);
        }
        self.up_gauge.set(1);
    }

    fn failed(&self, error: &StoreError) {
        self.errors.inc();
        let mut down = self.lock();
        if down.is_none() {
            tracing::error!(store = self.name, %error, "the store failed; sessions kept there (opened on other replicas, or before a restart) cannot be served here until it answers");
        }
        *down = Some((
            down.as_ref()
                .map_or_else(SystemTime::now, |(since, _)| *since),
            error.to_string(),
        ));
        self.up_gauge.set(0);
    }
}

/// The hex SHA-256 of a session id, first 128 bits: what the store knows a session by (an id
/// itself never leaves the process).
pub fn session_hash(id: &str) -> String {
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, id.as_bytes());
    digest.as_ref()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
