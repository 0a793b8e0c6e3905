//! Sealed records that replicas share, for whoever keeps state beyond sessions (the OAuth
//! token vault, its client registrations and pending authorizations): a record, a set of
//! members, a lease (a lock that lapses), and the news that a record changed.
//!
//! A record of kind `KIND` under key `KEY` is `PREFIX:KIND:HASH` (HASH: `record_hash(KEY)`),
//! its value sealed with the session keys for the purpose `switchyard KIND KEY`: a value
//! copied under another key, or of another kind, does not open. A set is a Redis hash of
//! (member hash → sealed member). A lease is `PREFIX:lease:HASH` holding a random token, set
//! only if absent and deleted only by its holder. Changes are published on `PREFIX:changed`
//! as `KIND HASH`.

use std::time::Duration;

use redis::AsyncCommands;
use tracing::Instrument;

use super::{Store, StoreError, redis::Redis, redis::failure};
use crate::telemetry;

/// A lease this replica holds, until it lapses or is given back.
pub struct Lease {
    key: String,
    token: String,
}

/// Deletes a lease only if it still holds its holder's token (it may have lapsed and been
/// taken by another replica since).
const RELEASE: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0";

impl Store {
    /// The record of `kind` under `key`, opened; `None` if there is none (or no shared store).
    pub async fn load_record(
        &self,
        kind: &'static str,
        key: &str,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        self.fetch_record(kind, key, false)
            .instrument(telemetry::child("store load"))
            .await
    }

    /// Writes the record of `kind` under `key` (sealed), replacing any; it lapses after `ttl`
    /// if one is given.
    pub async fn save_record(
        &self,
        kind: &'static str,
        key: &str,
        plain: &[u8],
        ttl: Option<Duration>,
    ) -> Result<(), StoreError> {
        self.set_record(kind, key, plain, ttl, false)
            .instrument(telemetry::child("store save"))
            .await
            .map(drop)
    }

    /// Writes the record of `kind` under `key` only if there is none; whether it was written.
    pub async fn save_record_if_absent(
        &self,
        kind: &'static str,
        key: &str,
        plain: &[u8],
        ttl: Option<Duration>,
    ) -> Result<bool, StoreError> {
        self.set_record(kind, key, plain, ttl, true).await
    }

    async fn set_record(
        &self,
        kind: &'static str,
        key: &str,
        plain: &[u8],
        ttl: Option<Duration>,
        only_if_absent: bool,
    ) -> Result<bool, StoreError> {
        let Some(redis) = &self.redis else {
            return Ok(false);
        };
        let sealed = self.sealer.seal(&purpose(kind, key), plain);
        let mut set = redis::cmd("SET");
        set.arg(redis.record_key(kind, key)).arg(sealed);
        if let Some(ttl) = ttl {
            set.arg("PX").arg(millis(ttl));
        }
        if only_if_absent {
            set.arg("NX");
        }
        let written: Option<String> = self.health.of(set
            .query_async(&mut redis.connection())
            .await
            .map_err(failure(kind)))?;
        Ok(written.is_some())
    }

    /// Removes the record of `kind` under `key` and gives what it held, at most once across
    /// replicas.
    pub async fn take_record(
        &self,
        kind: &'static str,
        key: &str,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        self.fetch_record(kind, key, true).await
    }

    async fn fetch_record(
        &self,
        kind: &'static str,
        key: &str,
        take: bool,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        let Some(redis) = &self.redis else {
            return Ok(None);
        };
        let name = redis.record_key(kind, key);
        let mut connection = redis.connection();
        let fetched = if take {
            connection.get_del(name).await
        } else {
            connection.get(name).await
        };
        let sealed: Option<Vec<u8>> = self.health.of(fetched.map_err(failure(kind)))?;
        sealed
            .map(|sealed| self.open(kind, key, &sealed))
            .transpose()
    }

    /// Deletes the record of `kind` under `key`; whether there was one.
    pub async fn delete_record(&self, kind: &'static str, key: &str) -> Result<bool, StoreError> {
        let Some(redis) = &self.redis else {
            return Ok(false);
        };
        let deleted: u64 = self.health.of(redis
            .connection()
            .del(redis.record_key(kind, key))
            .await
            .map_err(failure(kind)))?;
        Ok(deleted > 0)
    }

    /// Adds `member` to the set of `kind` under `key`.
    pub async fn add_member(
        &self,
        kind: &'static str,
        key: &str,
        member: &str,
    ) -> Result<(), StoreError> {
        let Some(redis) = &self.redis else {
            return Ok(());
        };
        let sealed = self.sealer.seal(&purpose(kind, key), member.as_bytes());
        let _: u64 = self.health.of(redis
            .connection()
            .hset(redis.record_key(kind, key), record_hash(member), sealed)
            .await
            .map_err(failure(kind)))?;
        Ok(())
    }

    /// Removes `members` from the set of `kind` under `key`.
    pub async fn remove_members(
        &self,
        kind: &'static str,
        key: &str,
        members: &[String],
    ) -> Result<(), StoreError> {
        let Some(redis) = &self.redis else {
            return Ok(());
        };
        if members.is_empty() {
            return Ok(());
        }
        let fields: Vec<String> = members.iter().map(|m| record_hash(m)).collect();
        let _: u64 = self.health.of(redis
            .connection()
            .hdel(redis.record_key(kind, key), fields)
            .await
            .map_err(failure(kind)))?;
        Ok(())
    }

    /// The members of the set of `kind` under `key`.
    pub async fn members(&self, kind: &'static str, key: &str) -> Result<Vec<String>, StoreError> {
        let Some(redis) = &self.redis else {
            return Ok(Vec::new());
        };
        let sealed: Vec<Vec<u8>> = self.health.of(redis
            .connection()
            .hvals(redis.record_key(kind, key))
            .await
            .map_err(failure(kind)))?;
        sealed
            .iter()
            .map(|sealed| {
                let plain = self.open(kind, key, sealed)?;
                String::from_utf8(plain).map_err(|_| StoreError::Unreadable {
                    kind,
                    reason: "a member is not text".into(),
                })
            })
            .collect()
    }

    /// Takes the lease `name` for `lease` if no replica holds it; `None` if one does. Without
    /// a shared store every lease is granted (the process's own locks serialize its work).
    pub async fn try_lease(
        &self,
        name: &str,
        lease: Duration,
    ) -> Result<Option<Lease>, StoreError> {
        let Some(redis) = &self.redis else {
            return Ok(Some(Lease {
                key: String::new(),
                token: String::new(),
            }));
        };
        let key = redis.record_key("lease", name);
        let mut token = [0u8; 16];
        super::seal::fill_random(&mut token);
        let token: String = token.iter().map(|b| format!("{b:02x}")).collect();
        let taken: Option<String> = self.health.of(redis::cmd("SET")
            .arg(&key)
            .arg(&token)
            .arg("NX")
            .arg("PX")
            .arg(millis(lease))
            .query_async(&mut redis.connection())
            .await
            .map_err(failure("lease")))?;
        Ok(taken.map(|_| Lease { key, token }))
    }

    /// Gives `lease` back, unless it lapsed and another replica holds it now.
    pub async fn release(&self, lease: Lease) {
        let Some(redis) = &self.redis else {
            return;
        };
        let released: Result<u64, _> = redis::Script::new(RELEASE)
            .key(&lease.key)
            .arg(&lease.token)
            .invoke_async(&mut redis.connection())
            .await;
        if let Err(error) = self.health.of(released.map_err(failure("lease"))) {
            tracing::warn!(%error, "cannot give a lease back; it lapses by itself");
        }
    }

    /// Tells every replica that the record of `kind` under `key` changed.
    pub async fn announce(&self, kind: &'static str, key: &str) -> Result<(), StoreError> {
        let Some(redis) = &self.redis else {
            return Ok(());
        };
        let _: u64 = self.health.of(redis
            .connection()
            .publish(
                redis.changed_channel(),
                format!("{kind} {}", record_hash(key)),
            )
            .await
            .map_err(failure(kind)))?;
        Ok(())
    }

    /// `sealed`, opened as the value of kind `kind` under `key`.
    pub(super) fn open(
        &self,
        kind: &'static str,
        key: &str,
        sealed: &[u8],
    ) -> Result<Vec<u8>, StoreError> {
        self.sealer
            .open(&purpose(kind, key), sealed)
            .ok_or_else(|| StoreError::Unreadable {
                kind,
                reason: "it does not open with this replica's session keys (another key, or \
                         altered)"
                    .into(),
            })
    }
}

impl Redis {
    pub(super) fn record_key(&self, kind: &str, key: &str) -> String {
        format!("{}:{kind}:{}", self.prefix(), record_hash(key))
    }

    pub(super) fn changed_channel(&self) -> String {
        format!("{}:changed", self.prefix())
    }
}

/// What the store knows a record's key by (the key itself, which may name a user, never
/// leaves the process): the hex SHA-256 of it, first 128 bits.
pub fn record_hash(key: &str) -> String {
    super::session_hash(key)
}

pub(super) fn purpose(kind: &str, key: &str) -> Vec<u8> {
    format!("switchyard {kind} {key}").into_bytes()
}

pub(super) fn millis(duration: Duration) -> u64 {
    duration.as_millis().clamp(1, u64::MAX as u128) as u64
}
