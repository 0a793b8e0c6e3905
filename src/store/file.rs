//! The embedded store's file: what the Redis store keeps for replicas, kept for the next
//! process on this machine instead (a restart, an `--upgrade`), in a redb database.
//!
//! Tables: `sessions` (a session's hash → until when it is alive, Unix milliseconds),
//! `events` ((hash, sequence) → the event's sealed message; the last `EVENTS_KEPT` of each
//! session, counted in `event_counts`), `seen` (hash → the last event a stream was sent),
//! `upstreams` and `subscriptions` ((hash, the record's hash) → sealed record), and `meta`
//! (the next event's sequence). What a session keeps lives as long as it does: a sweep
//! removes it once the session is no longer alive.
//!
//! Writes commit without waiting for the disk; `flush` (every `FLUSH_EVERY`, and when the
//! gateway stops or hands over) makes them durable. A crash loses at most the writes since
//! the last flush, and the file opens as of that flush: redb never leaves it half-written.
//!
//! One process at a time holds the file (redb locks it). Until it can be opened, the store is
//! unreachable, as Redis would be: a process being upgraded releases it for its successor
//! before handing over its sockets.

use std::{
    path::{Path, PathBuf},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use redb::{
    Database, Durability, ReadableDatabase, ReadableTable, TableDefinition, WriteTransaction,
};

use super::{EVENTS_KEPT, StoreError};
use crate::clock::now_millis;

/// How often written state is made durable.
pub(super) const FLUSH_EVERY: Duration = Duration::from_secs(1);
/// How often sessions no longer alive are removed with what they kept.
pub(super) const SWEEP_EVERY: Duration = Duration::from_secs(60);
/// The least time between two attempts to open the file.
const REOPEN_AFTER: Duration = Duration::from_millis(100);
/// How long `release` waits for operations in flight to finish with the file.
const RELEASE_WAIT: Duration = Duration::from_secs(2);

const SESSIONS: TableDefinition<&str, u64> = TableDefinition::new("sessions");
const EVENTS: TableDefinition<(&str, u64), &[u8]> = TableDefinition::new("events");
const EVENT_COUNTS: TableDefinition<&str, u64> = TableDefinition::new("event_counts");
const SEEN: TableDefinition<&str, &str> = TableDefinition::new("seen");
const UPSTREAMS: TableDefinition<(&str, &str), &[u8]> = TableDefinition::new("upstreams");
const SUBSCRIPTIONS: TableDefinition<(&str, &str), &[u8]> = TableDefinition::new("subscriptions");
const FOUND: TableDefinition<(&str, &str), &[u8]> = TableDefinition::new("found");
const PINS: TableDefinition<(&str, &str), &[u8]> = TableDefinition::new("pins");
const TASK_OWNERS: TableDefinition<(&str, &str), &[u8]> = TableDefinition::new("task_owners");
const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
const NEXT_EVENT: &str = "next_event";

/// Event ids are `A-B`, the sequence's high and low bits: a new file starts its sequence at
/// the clock (`A` is then Unix milliseconds), so that its ids follow those of a file that was
/// deleted.
const LOW_BITS: u32 = 20;

pub(super) struct StoreFile {
    path: PathBuf,
    slot: Mutex<Slot>,
    /// Written since the last flush.
    dirty: AtomicBool,
}

enum Slot {
    /// Not open: when it was last tried, and why that failed.
    Closed {
        tried: Option<(Instant, StoreError)>,
    },
    Open(Arc<Database>),
    /// Given up for good: another process has it now.
    Released,
}

impl StoreFile {
    /// The store kept at `path`, opened on first use.
    pub(super) fn new(path: PathBuf) -> Self {
        Self {
            path,
            slot: Mutex::new(Slot::Closed { tried: None }),
            dirty: AtomicBool::new(false),
        }
    }

    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// Opens the file now, if it is not open: whether it can be used.
    pub(super) async fn open(&self) -> Result<(), StoreError> {
        self.run(|_| Ok(())).await
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Slot> {
        self.slot.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn database(&self) -> Result<Arc<Database>, StoreError> {
        let mut slot = self.lock();
        match &*slot {
            Slot::Open(db) => return Ok(db.clone()),
            Slot::Released => {
                return Err(StoreError::Unreachable(
                    "the store file was handed over to the new Switchyard process".into(),
                ));
            }
            Slot::Closed {
                tried: Some((at, why)),
            } if at.elapsed() < REOPEN_AFTER => {
                return Err(why.clone());
            }
            Slot::Closed { .. } => {}
        }
        match open_file(&self.path) {
            Ok(db) => {
                let db = Arc::new(db);
                *slot = Slot::Open(db.clone());
                Ok(db)
            }
            Err(error) => {
                *slot = Slot::Closed {
                    tried: Some((Instant::now(), error.clone())),
                };
                Err(error)
            }
        }
    }

    /// Runs `op` on the file (a read, or a write that commits itself) in a blocking thread.
    async fn run<T: Send + 'static>(
        &self,
        op: impl FnOnce(&Database) -> Result<T, redb::Error> + Send + 'static,
    ) -> Result<T, StoreError> {
        let db = self.database()?;
        let path = self.path.clone();
        tokio::task::spawn_blocking(move || op(&db))
            .await
            .map_err(|error| StoreError::Unreachable(error.to_string()))?
            .map_err(|error| failure(&path, error))
    }

    /// Runs `op` in a write transaction, committed without waiting for the disk.
    async fn write<T: Send + 'static>(
        &self,
        op: impl FnOnce(&WriteTransaction) -> Result<T, redb::Error> + Send + 'static,
    ) -> Result<T, StoreError> {
        let written = self
            .run(move |db| {
                let mut txn = db.begin_write()?;
                txn.set_durability(Durability::None)?;
                let out = op(&txn)?;
                txn.commit()?;
                Ok(out)
            })
            .await;
        if written.is_ok() {
            self.dirty.store(true, Ordering::Release);
        }
        written
    }

    /// Makes what was written so far durable.
    pub(super) async fn flush(&self) -> Result<(), StoreError> {
        if !self.dirty.swap(false, Ordering::AcqRel) {
            return Ok(());
        }
        let flushed = self
            .run(|db| {
                let txn = db.begin_write()?;
                txn.commit()?;
                Ok(())
            })
            .await;
        if flushed.is_err() {
            self.dirty.store(true, Ordering::Release);
        }
        flushed
    }

    /// Flushes and closes the file, for another process to open: for good (`for_good`, after
    /// an upgrade's handover), or until the next use.
    pub(super) async fn release(&self, for_good: bool) -> Result<(), StoreError> {
        let flushed = self.flush().await;
        let taken = {
            let mut slot = self.lock();
            let next = if for_good {
                Slot::Released
            } else {
                Slot::Closed { tried: None }
            };
            std::mem::replace(&mut *slot, next)
        };
        if let Slot::Open(db) = taken {
            // Operations in flight hold the database; it closes when the last lets go.
            let deadline = Instant::now() + RELEASE_WAIT;
            while Arc::strong_count(&db) > 1 && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            drop(db);
        }
        flushed
    }

    /// Of the sessions `hashes`, which are alive (in the same order).
    pub(super) async fn alive(&self, hashes: Vec<String>) -> Result<Vec<bool>, StoreError> {
        let now = now_millis();
        self.run(move |db| {
            let txn = db.begin_read()?;
            let sessions = match txn.open_table(SESSIONS) {
                Ok(table) => table,
                Err(redb::TableError::TableDoesNotExist(_)) => {
                    return Ok(vec![false; hashes.len()]);
                }
                Err(error) => return Err(error.into()),
            };
            hashes
                .iter()
                .map(|hash| {
                    Ok(sessions
                        .get(hash.as_str())?
                        .is_some_and(|until| until.value() > now))
                })
                .collect()
        })
        .await
    }

    /// Notes the sessions `hashes` alive for `ttl` from now.
    pub(super) async fn renew(&self, hashes: Vec<String>, ttl: Duration) -> Result<(), StoreError> {
        let until = now_millis() + millis(ttl);
        self.write(move |txn| {
            let mut sessions = txn.open_table(SESSIONS)?;
            for hash in &hashes {
                sessions.insert(hash.as_str(), until)?;
            }
            Ok(())
        })
        .await
    }

    /// Forgets session `hash` and all it kept.
    pub(super) async fn end(&self, hash: String) -> Result<(), StoreError> {
        self.write(move |txn| forget(txn, &hash)).await
    }

    /// Adds `sealed` to session `hash`'s events, keeping the last `EVENTS_KEPT`.
    pub(super) async fn append(&self, hash: String, sealed: Vec<u8>) -> Result<(), StoreError> {
        self.write(move |txn| {
            let mut meta = txn.open_table(META)?;
            let sequence = match meta.get(NEXT_EVENT)? {
                Some(next) => next.value(),
                None => now_millis() << LOW_BITS,
            };
            meta.insert(NEXT_EVENT, sequence + 1)?;
            let mut events = txn.open_table(EVENTS)?;
            events.insert((hash.as_str(), sequence), sealed.as_slice())?;
            let mut counts = txn.open_table(EVENT_COUNTS)?;
            let count = counts.get(hash.as_str())?.map_or(0, |n| n.value()) + 1;
            let mut kept = count;
            while kept > EVENTS_KEPT as u64 {
                let first = events
                    .range((hash.as_str(), 0)..=(hash.as_str(), u64::MAX))?
                    .next()
                    .transpose()?
                    .map(|(key, _)| key.value().1);
                let Some(first) = first else { break };
                events.remove((hash.as_str(), first))?;
                kept -= 1;
            }
            counts.insert(hash.as_str(), kept)?;
            Ok(())
        })
        .await
    }

    /// Session `hash`'s events after event `after` (or all kept), oldest first.
    pub(super) async fn events_after(
        &self,
        hash: String,
        after: Option<String>,
    ) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        let start = match after.as_deref().map(parse_event_id) {
            None => 0,
            Some(Some(sequence)) => sequence.saturating_add(1),
            // Not an id of this store: everything kept.
            Some(None) => 0,
        };
        self.run(move |db| {
            let txn = db.begin_read()?;
            let events = match txn.open_table(EVENTS) {
                Ok(table) => table,
                Err(redb::TableError::TableDoesNotExist(_)) => return Ok(Vec::new()),
                Err(error) => return Err(error.into()),
            };
            events
                .range((hash.as_str(), start)..=(hash.as_str(), u64::MAX))?
                .map(|entry| {
                    let (key, value) = entry?;
                    Ok((event_id(key.value().1), value.value().to_vec()))
                })
                .collect()
        })
        .await
    }

    pub(super) async fn seen(&self, hash: String) -> Result<Option<String>, StoreError> {
        self.run(move |db| {
            let txn = db.begin_read()?;
            match txn.open_table(SEEN) {
                Ok(seen) => Ok(seen.get(hash.as_str())?.map(|id| id.value().to_owned())),
                Err(redb::TableError::TableDoesNotExist(_)) => Ok(None),
                Err(error) => Err(error.into()),
            }
        })
        .await
    }

    pub(super) async fn set_seen(&self, hash: String, id: String) -> Result<(), StoreError> {
        self.write(move |txn| {
            txn.open_table(SEEN)?.insert(hash.as_str(), id.as_str())?;
            Ok(())
        })
        .await
    }

    /// Removes the sessions no longer alive and what they kept, and what sessions that are
    /// gone left; how many sessions.
    pub(super) async fn sweep(&self) -> Result<usize, StoreError> {
        let now = now_millis();
        self.write(move |txn| {
            let mut gone: Vec<String> = Vec::new();
            {
                let sessions = txn.open_table(SESSIONS)?;
                for entry in sessions.iter()? {
                    let (hash, until) = entry?;
                    if until.value() <= now {
                        gone.push(hash.value().to_owned());
                    }
                }
                // What a session left that has no record of its own (it was never renewed).
                let alive = |hash: &str| -> Result<bool, redb::StorageError> {
                    Ok(sessions.get(hash)?.is_some())
                };
                let mut orphans: Vec<String> = Vec::new();
                for entry in txn.open_table(EVENT_COUNTS)?.iter()? {
                    let (hash, _) = entry?;
                    if !alive(hash.value())? {
                        orphans.push(hash.value().to_owned());
                    }
                }
                for entry in txn.open_table(SEEN)?.iter()? {
                    let (hash, _) = entry?;
                    if !alive(hash.value())? {
                        orphans.push(hash.value().to_owned());
                    }
                }
                for records in Records::OF_SESSIONS {
                    for entry in txn.open_table(records.table())?.iter()? {
                        let (key, _) = entry?;
                        if !alive(key.value().0)? {
                            orphans.push(key.value().0.to_owned());
                        }
                    }
                }
                orphans.sort();
                orphans.dedup();
                gone.extend(orphans);
            }
            for hash in &gone {
                forget(txn, hash)?;
            }
            Ok(gone.len())
        })
        .await
    }
}

/// Removes session `hash` and everything it kept.
fn forget(txn: &WriteTransaction, hash: &str) -> Result<(), redb::Error> {
    txn.open_table(SESSIONS)?.remove(hash)?;
    txn.open_table(SEEN)?.remove(hash)?;
    txn.open_table(EVENT_COUNTS)?.remove(hash)?;
    let mut events = txn.open_table(EVENTS)?;
    events.retain_in((hash, 0)..=(hash, u64::MAX), |_, _| false)?;
    drop(events);
    for records in Records::OF_SESSIONS {
        let mut table = txn.open_table(records.table())?;
        let fields: Vec<String> = table
            .range((hash, "")..)?
            .map_while(|entry| match entry {
                Ok((key, _)) => (key.value().0 == hash).then(|| Ok(key.value().1.to_owned())),
                Err(error) => Some(Err(error)),
            })
            .collect::<Result<_, _>>()?;
        for field in &fields {
            table.remove((hash, field.as_str()))?;
        }
    }
    Ok(())
}

/// Opens (or makes) the database at `path`, readable by its owner only.
fn open_file(path: &Path) -> Result<Database, StoreError> {
    let unreachable = |what: String| StoreError::Unreachable(format!("{}: {what}", path.display()));
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|error| unreachable(error.to_string()))?;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(path)
            .map_err(|error| unreachable(error.to_string()))?;
    }
    Database::create(path).map_err(|error| match error {
        redb::DatabaseError::DatabaseAlreadyOpen => unreachable(
            "in use by another Switchyard process (give each its own [store] path or [oauth] \
             state_dir; `--upgrade` takes over from a running one)"
                .into(),
        ),
        other => unreachable(other.to_string()),
    })
}

fn failure(path: &Path, error: redb::Error) -> StoreError {
    match error {
        redb::Error::Io(error) => StoreError::Unreachable(format!("{}: {error}", path.display())),
        other => StoreError::Unreadable {
            kind: "store file",
            reason: format!("{}: {other}", path.display()),
        },
    }
}

fn event_id(sequence: u64) -> String {
    format!(
        "{}-{}",
        sequence >> LOW_BITS,
        sequence & ((1 << LOW_BITS) - 1)
    )
}

fn parse_event_id(id: &str) -> Option<u64> {
    let (high, low) = id.split_once('-')?;
    let (high, low): (u64, u64) = (high.parse().ok()?, low.parse().ok()?);
    if low >= 1 << LOW_BITS || high >= 1 << (64 - LOW_BITS) {
        return None;
    }
    Some(high << LOW_BITS | low)
}

fn millis(duration: Duration) -> u64 {
    duration.as_millis().max(1) as u64
}

mod records;

pub(super) use records::{Records, expiring_until};

#[cfg(test)]
mod tests;
