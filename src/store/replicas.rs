//! The replicas sharing the store, as far as they must know of each other: each has a random
//! id and beats every `BEAT` (`PREFIX:replicas`, a sorted set of id → the Redis clock at its
//! last beat, in milliseconds); one not heard of for `STALE` is taken for dead, and what it
//! held for sessions (`PREFIX:held:ID`, their hashes) is taken over by the replicas serving
//! them. Redis's own clock is used, so the replicas' clocks need not agree.

use std::time::Duration;

use redis::AsyncCommands;

use super::{Store, StoreError, records::millis, redis::Redis, redis::failure};

/// How often a replica tells the others it is alive.
pub const BEAT: Duration = Duration::from_secs(2);
/// How long a replica may stay silent before the others take it for dead.
pub const STALE: Duration = Duration::from_secs(10);
/// How long a dead replica stays listed (and what it held, kept): time enough for every
/// replica to take over what it held.
const FORGOTTEN: Duration = Duration::from_secs(3600);

const KIND: &str = "replica";

/// Beats for this replica; answers how many replicas beat within `ARGV[3]` milliseconds,
/// then the replicas whose beats are older (`ARGV[1]`: this replica's id, `ARGV[2]`: how long
/// dead ones stay listed).
const BEAT_SCRIPT: &str = on_redis_clock!(
    r"
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[2]))
local stale = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[3]))
table.insert(stale, 1, tostring(redis.call('ZCOUNT', KEYS[1], now - tonumber(ARGV[3]), '+inf')))
return stale
"
);

/// Marks replica `ARGV[1]` as silent for `ARGV[2]` milliseconds already: dead to the others
/// at once, and listed as long as a dead replica is.
const LEAVE_SCRIPT: &str = on_redis_clock!(
    r"
redis.call('ZADD', KEYS[1], now - tonumber(ARGV[2]), ARGV[1])
"
);

/// Of the replicas `ARGV[2..]`, 1 for each that beat within `ARGV[1]` milliseconds, else 0.
const ALIVE_SCRIPT: &str = on_redis_clock!(
    r"
local alive = {}
for i = 2, #ARGV do
  local beat = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if beat and tonumber(beat) >= now - tonumber(ARGV[1]) then alive[i - 1] = 1 else alive[i - 1] = 0 end
end
return alive
"
);

impl Store {
    /// This replica's id among those sharing the store.
    pub fn replica(&self) -> &str {
        &self.replica
    }

    /// Tells the other replicas this one is alive; answers the replicas that have stopped
    /// beating (none without a shared store).
    pub async fn beat(&self) -> Result<Vec<String>, StoreError> {
        let Some(redis) = &self.redis else {
            return Ok(Vec::new());
        };
        let dead: Vec<String> = self.health.of(redis::Script::new(BEAT_SCRIPT)
            .key(redis.replicas_key())
            .arg(&self.replica)
            .arg(millis(FORGOTTEN))
            .arg(millis(STALE))
            .invoke_async(&mut redis.connection())
            .await
            .map_err(failure(KIND)))?;
        let mut dead = dead.into_iter();
        let alive = dead
            .next()
            .and_then(|count| count.parse().ok())
            .unwrap_or(1);
        self.alive
            .store(alive, std::sync::atomic::Ordering::Relaxed);
        Ok(dead.filter(|id| *id != self.replica).collect())
    }

    /// How many replicas share the store, as of the last beat (1 without Redis).
    pub fn replicas(&self) -> usize {
        self.alive.load(std::sync::atomic::Ordering::Relaxed).max(1)
    }

    /// Which of `replicas` are alive (in the same order); this one always is. With the
    /// embedded file, no other: the others were the processes before this one.
    pub async fn replicas_alive(&self, replicas: &[&str]) -> Result<Vec<bool>, StoreError> {
        let Some(redis) = &self.redis else {
            return Ok(replicas.iter().map(|id| *id == self.replica).collect());
        };
        let others: Vec<&str> = replicas
            .iter()
            .copied()
            .filter(|id| *id != self.replica)
            .collect();
        let mut alive = if others.is_empty() {
            Vec::new()
        } else {
            let flags: Vec<u8> = self.health.of(redis::Script::new(ALIVE_SCRIPT)
                .key(redis.replicas_key())
                .arg(millis(STALE))
                .arg(&others)
                .invoke_async(&mut redis.connection())
                .await
                .map_err(failure(KIND)))?;
            flags
        }
        .into_iter();
        Ok(replicas
            .iter()
            .map(|id| *id == self.replica || alive.next() == Some(1))
            .collect())
    }

    /// Marks this replica dead at once (it is shutting down), so that the others take over
    /// what it held without waiting for its beats to go stale; the embedded file is flushed
    /// and closed for the next process.
    pub async fn leave(&self) {
        self.release_file(true).await;
        let Some(redis) = &self.redis else {
            return;
        };
        let left: Result<(), _> = redis::Script::new(LEAVE_SCRIPT)
            .key(redis.replicas_key())
            .arg(&self.replica)
            .arg(millis(STALE) + 1)
            .invoke_async(&mut redis.connection())
            .await;
        if let Err(error) = left {
            tracing::debug!(%error, "could not tell the other replicas this one is leaving");
        }
    }

    /// The sessions whose state replica `replica` held (some may have ended since).
    pub async fn held_by(&self, replica: &str) -> Result<Vec<String>, StoreError> {
        let Some(redis) = &self.redis else {
            return Ok(Vec::new());
        };
        self.health.of(redis
            .connection()
            .smembers(redis.held_key(replica))
            .await
            .map_err(failure(KIND)))
    }

    /// Adds to a pipeline: this replica holds state for session `hash`.
    pub(super) fn note_held(&self, redis: &Redis, pipe: &mut redis::Pipeline, hash: &str) {
        let key = redis.held_key(&self.replica);
        pipe.sadd(&key, hash)
            .ignore()
            .pexpire(&key, millis(FORGOTTEN) as i64)
            .ignore();
    }
}

impl Redis {
    fn replicas_key(&self) -> String {
        format!("{}:replicas", self.prefix())
    }

    fn held_key(&self, replica: &str) -> String {
        format!("{}:held:{replica}", self.prefix())
    }
}

/// A new replica id: 64 random bits, in hex.
pub(super) fn new_replica_id() -> String {
    let mut bytes = [0u8; 8];
    super::seal::fill_random(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
