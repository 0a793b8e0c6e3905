//! The tools a session's client found with tool search, shared by the replicas that serve it
//! (and kept across a restart with the embedded store): the session's own `tools/list` holds
//! them, wherever the client's next request lands.
//!
//! `PREFIX:found:HASH` (HASH: the session's) is a Redis string holding the sealed list (JSON
//! array of names). It is renewed and deleted with `PREFIX:session:HASH`.

use std::time::Duration;

use redis::AsyncCommands;

use super::{
    Store, StoreError,
    file::Records,
    records::{millis, purpose},
    redis::{Redis, failure},
};

/// The kind named in errors, and in the purpose the record is sealed for.
const KIND: &str = "found-tools";
/// The one record of a session in the embedded store's table.
const FIELD: &str = "tools";

impl Store {
    /// The tools session `hash`'s client found (none kept, or no store that keeps sessions).
    pub async fn found_tools(&self, hash: &str) -> Result<Vec<String>, StoreError> {
        let sealed: Option<Vec<u8>> = if let Some(file) = &self.file {
            let read = file.record(Records::Found, hash.to_owned(), FIELD.to_owned());
            self.health.of(read.await)?
        } else if let Some(redis) = &self.redis {
            self.health.of(redis
                .connection()
                .get(redis.found_key(hash))
                .await
                .map_err(failure(KIND)))?
        } else {
            return Ok(Vec::new());
        };
        let Some(sealed) = sealed else {
            return Ok(Vec::new());
        };
        let plain = self.open(KIND, hash, &sealed)?;
        serde_json::from_slice(&plain).map_err(|error| StoreError::Unreadable {
            kind: KIND,
            reason: error.to_string(),
        })
    }

    /// Keeps `names` as the tools session `hash`'s client found, replacing what was kept. The
    /// record lapses `ttl` from now unless the session is renewed.
    pub async fn keep_found_tools(
        &self,
        hash: &str,
        names: &[&str],
        ttl: Duration,
    ) -> Result<(), StoreError> {
        if self.file.is_none() && self.redis.is_none() {
            return Ok(());
        }
        let plain = serde_json::to_vec(names).expect("names serialize");
        let sealed = self.sealer.seal(&purpose(KIND, hash), &plain);
        if let Some(file) = &self.file {
            let (hash, field) = (hash.to_owned(), FIELD.to_owned());
            let put = file.put_record(Records::Found, hash, field, sealed, true, None);
            return self.health.of(put.await).map(drop);
        }
        let Some(redis) = &self.redis else {
            return Ok(());
        };
        let () = self.health.of(redis
            .connection()
            .pset_ex(redis.found_key(hash), sealed, millis(ttl))
            .await
            .map_err(failure(KIND)))?;
        Ok(())
    }
}

impl Redis {
    pub(super) fn found_key(&self, hash: &str) -> String {
        format!("{}:found:{hash}", self.prefix())
    }
}
