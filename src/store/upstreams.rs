//! The upstream sessions a client session has with `per_client` upstreams, shared by the
//! replicas that serve it: a replica that serves the session next goes on with the same
//! upstream session instead of opening its own, so the upstream's per-client state follows
//! the client.
//!
//! `PREFIX:upstreams:HASH` (HASH: the session's) is a Redis hash of (upstream name's hash →
//! sealed record). It is renewed and deleted with `PREFIX:session:HASH`, so it lives exactly
//! as long as the session.

use std::time::Duration;

use redis::AsyncCommands;

use super::{
    Store, StoreError,
    file::Records,
    record_hash,
    records::{millis, purpose},
    redis::Redis,
    redis::failure,
};

/// The kind named in errors, and in the purpose the records are sealed for.
const KIND: &str = "upstream-session";

impl Store {
    /// The record session `hash` keeps for its session with `upstream`, opened.
    pub async fn upstream_session(
        &self,
        hash: &str,
        upstream: &str,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        let sealed: Option<Vec<u8>> = if let Some(file) = &self.file {
            let field = record_hash(upstream);
            self.health.of(file
                .record(Records::Upstreams, hash.to_owned(), field)
                .await)?
        } else if let Some(redis) = &self.redis {
            self.health.of(redis
                .connection()
                .hget(redis.upstreams_key(hash), record_hash(upstream))
                .await
                .map_err(failure(KIND)))?
        } else {
            return Ok(None);
        };
        sealed
            .map(|sealed| self.open(KIND, &record_key(hash, upstream), &sealed))
            .transpose()
    }

    /// Keeps `plain` as session `hash`'s record for `upstream`, replacing any, or only if
    /// there is none (`replace` false); whether it was written. The session's records lapse
    /// `ttl` from now unless the session is renewed.
    pub async fn keep_upstream_session(
        &self,
        hash: &str,
        upstream: &str,
        plain: &[u8],
        ttl: Duration,
        replace: bool,
    ) -> Result<bool, StoreError> {
        let sealed = self
            .sealer
            .seal(&purpose(KIND, &record_key(hash, upstream)), plain);
        if let Some(file) = &self.file {
            let (hash, field) = (hash.to_owned(), record_hash(upstream));
            let put = file.put_record(Records::Upstreams, hash, field, sealed, replace, None);
            return self.health.of(put.await);
        }
        let Some(redis) = &self.redis else {
            return Ok(false);
        };
        let key = redis.upstreams_key(hash);
        let set = if replace { "HSET" } else { "HSETNX" };
        let (written,): (u64,) = self.health.of(redis::pipe()
            .cmd(set)
            .arg(&key)
            .arg(record_hash(upstream))
            .arg(sealed)
            .pexpire(&key, millis(ttl) as i64)
            .ignore()
            .query_async(&mut redis.connection())
            .await
            .map_err(failure(KIND)))?;
        // HSET counts new fields only: a replaced record counts as written too.
        Ok(replace || written > 0)
    }
}

impl Redis {
    pub(super) fn upstreams_key(&self, hash: &str) -> String {
        format!("{}:upstreams:{hash}", self.prefix())
    }
}

/// What a record is sealed for: the session and the upstream, so that it opens for no other.
fn record_key(hash: &str, upstream: &str) -> String {
    format!("{hash} {upstream}")
}
