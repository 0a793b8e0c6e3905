//! A session's resource subscriptions as the replicas know them: which replica holds each
//! (it is subscribed upstream and passes the updates on), so that a second replica does not
//! subscribe again, and a replica serving the session takes one over when its holder dies.
//!
//! `PREFIX:subscriptions:HASH` (HASH: the session's) is a Redis hash of (the URI's hash →
//! sealed record: the URI as the client named it, and the holder's id). It is renewed and
//! deleted with `PREFIX:session:HASH`. The holder also lists the session in its
//! `PREFIX:held:ID` (see `replicas`).

use std::time::Duration;

use redis::AsyncCommands;
use serde::{Deserialize, Serialize};

use super::{
    Store, StoreError,
    file::Records,
    record_hash,
    records::{millis, purpose},
    redis::{Redis, failure},
};

/// The kind named in errors, and in the purpose the records are sealed for.
const KIND: &str = "subscription";

/// Replaces field `ARGV[1]` of hash `KEYS[1]` with `ARGV[3]` if it still holds `ARGV[2]`.
const REPLACE_SCRIPT: &str = r"
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
  return 1
end
return 0
";

/// One subscription of a session, and the replica holding it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubscriptionRecord {
    /// The resource's URI as the client named it.
    pub uri: String,
    pub holder: String,
    /// The record as stored, to replace it only if no one changed it since.
    #[serde(skip)]
    pub sealed: Vec<u8>,
}

impl Store {
    /// Session `hash`'s subscriptions (none without a shared store).
    pub async fn subscriptions(&self, hash: &str) -> Result<Vec<SubscriptionRecord>, StoreError> {
        let sealed: Vec<Vec<u8>> = if let Some(file) = &self.file {
            self.health
                .of(file.records(Records::Subscriptions, hash.to_owned()).await)?
        } else if let Some(redis) = &self.redis {
            self.health.of(redis
                .connection()
                .hvals(redis.subscriptions_key(hash))
                .await
                .map_err(failure(KIND)))?
        } else {
            return Ok(Vec::new());
        };
        sealed
            .into_iter()
            .map(|sealed| {
                let plain = self.open(KIND, hash, &sealed)?;
                let mut record: SubscriptionRecord =
                    serde_json::from_slice(&plain).map_err(|error| StoreError::Unreadable {
                        kind: KIND,
                        reason: error.to_string(),
                    })?;
                record.sealed = sealed;
                Ok(record)
            })
            .collect()
    }

    /// Notes that this replica holds session `hash`'s subscription to `uri`; over `previous`
    /// only if that record is still there unchanged (whether it was written). The session's
    /// records lapse `ttl` from now unless the session is renewed.
    pub async fn hold_subscription(
        &self,
        hash: &str,
        uri: &str,
        previous: Option<&SubscriptionRecord>,
        ttl: Duration,
    ) -> Result<bool, StoreError> {
        if self.redis.is_none() && self.file.is_none() {
            return Ok(true);
        }
        let record = SubscriptionRecord {
            uri: uri.to_owned(),
            holder: self.replica.clone(),
            sealed: Vec::new(),
        };
        let plain = serde_json::to_vec(&record).expect("a record serializes");
        let sealed = self.sealer.seal(&purpose(KIND, hash), &plain);
        let Some(redis) = &self.redis else {
            let Some(file) = &self.file else {
                return Ok(true);
            };
            let expected = previous.map(|previous| previous.sealed.clone());
            let (hash, field) = (hash.to_owned(), record_hash(uri));
            let put = file.put_record(Records::Subscriptions, hash, field, sealed, true, expected);
            return self.health.of(put.await);
        };
        let key = redis.subscriptions_key(hash);
        let field = record_hash(uri);
        if let Some(previous) = previous {
            let replaced: u8 = self.health.of(redis::Script::new(REPLACE_SCRIPT)
                .key(&key)
                .arg(&field)
                .arg(&previous.sealed)
                .arg(&sealed)
                .invoke_async(&mut redis.connection())
                .await
                .map_err(failure(KIND)))?;
            if replaced == 0 {
                return Ok(false);
            }
        }
        let mut pipe = redis::pipe();
        if previous.is_none() {
            pipe.hset(&key, &field, &sealed).ignore();
        }
        pipe.pexpire(&key, millis(ttl) as i64).ignore();
        self.note_held(redis, &mut pipe, hash);
        let () = self.health.of(pipe
            .query_async(&mut redis.connection())
            .await
            .map_err(failure(KIND)))?;
        Ok(true)
    }

    /// Forgets session `hash`'s subscription to `uri`, whoever held it.
    pub async fn drop_subscription(&self, hash: &str, uri: &str) -> Result<(), StoreError> {
        if let Some(file) = &self.file {
            let (hash, field) = (hash.to_owned(), record_hash(uri));
            return self.health.of(file
                .remove_record(Records::Subscriptions, hash, field)
                .await);
        }
        let Some(redis) = &self.redis else {
            return Ok(());
        };
        let _: u64 = self.health.of(redis
            .connection()
            .hdel(redis.subscriptions_key(hash), record_hash(uri))
            .await
            .map_err(failure(KIND)))?;
        Ok(())
    }
}

impl Redis {
    pub(super) fn subscriptions_key(&self, hash: &str) -> String {
        format!("{}:subscriptions:{hash}", self.prefix())
    }
}
