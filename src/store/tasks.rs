//! Who created each task of an upstream without sessions. Such an upstream's task ids are one
//! namespace for all its callers, and they come round again when it restarts (a server that
//! numbers its tasks from 1 at each start): the last caller to create an id owns it, and a
//! handle of an earlier task with that id opens for no one.
//!
//! Kept in this process (bounded, each entry for its task's lifetime), and beyond it where the
//! store keeps anything: with Redis as a sealed record, which is then what counts, so that
//! every replica reads the same owner; in the embedded file, for the next process after a
//! restart or an upgrade (records sealed, dropped once expired).

use std::{sync::Arc, time::Duration};

use super::{Store, file::Records, record_hash, records::purpose};
use crate::expiring::{Expiring, lifetime};

/// What the records are kept as.
const KIND: &str = "task-owner";
/// The longest a task's owner is kept (a task asking for longer is kept this long).
const LONGEST: Duration = Duration::from_secs(24 * 3600);
/// The most owners this process keeps (those of the tasks that end soonest go first).
const MOST: usize = 100_000;

/// The owners of tasks, by upstream and task id.
pub(super) fn owners() -> Expiring<String> {
    Expiring::new(LONGEST, MOST)
}

fn key(upstream: &str, task: &str) -> String {
    format!("{upstream}\n{task}")
}

impl Store {
    /// Records that `owner` created task `task` of `upstream`, which lives `ttl_ms` (none:
    /// as long as the upstream keeps it).
    pub fn own_task(
        self: &Arc<Self>,
        upstream: &str,
        task: &str,
        owner: &str,
        ttl_ms: Option<u64>,
    ) {
        let key = key(upstream, task);
        self.task_owners
            .insert(key.clone(), owner.to_owned(), ttl_ms);
        if self.redis.is_none() && self.file.is_none() {
            return;
        }
        let (store, owner, upstream) = (self.clone(), owner.to_owned(), upstream.to_owned());
        let ttl = lifetime(ttl_ms, LONGEST);
        tokio::spawn(async move {
            if let Err(error) = store.keep_owner(&upstream, &key, &owner, ttl).await {
                tracing::warn!(%error, "a task's owner cannot be kept beyond this process");
            }
        });
    }

    async fn keep_owner(
        &self,
        upstream: &str,
        key: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<(), super::StoreError> {
        if self.redis.is_some() {
            return self
                .save_record(KIND, key, owner.as_bytes(), Some(ttl))
                .await;
        }
        let Some(file) = &self.file else {
            return Ok(());
        };
        let until = crate::clock::now_millis() + ttl.as_millis() as u64;
        let mut value = until.to_be_bytes().to_vec();
        value.extend(self.sealer.seal(&purpose(KIND, key), owner.as_bytes()));
        let (hash, field) = (record_hash(upstream), record_hash(key));
        self.health.of(file
            .put_expiring(Records::TaskOwners, hash, field, value)
            .await)
    }

    /// Who created task `task` of `upstream` last, if it is known here (or, with Redis, to
    /// any replica; with the embedded file, to an earlier process).
    pub async fn task_owner(&self, upstream: &str, task: &str) -> Option<String> {
        let key = key(upstream, task);
        if self.redis.is_some()
            && let Ok(record) = self.load_record(KIND, &key).await
        {
            return record.and_then(|owner| String::from_utf8(owner).ok());
        }
        if let Some(owner) = self.task_owners.get(&key) {
            return Some(owner);
        }
        let file = self.file.as_ref()?;
        let (hash, field) = (record_hash(upstream), record_hash(&key));
        let value = file.record(Records::TaskOwners, hash, field).await.ok()??;
        if super::file::expiring_until(&value) <= crate::clock::now_millis() {
            return None;
        }
        let owner = self.sealer.open(&purpose(KIND, &key), value.get(8..)?)?;
        String::from_utf8(owner).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{StoreKind, StoreSettings};

    #[tokio::test]
    async fn the_last_creator_owns_a_task_id_and_the_next_process_knows_it() {
        let state = tempfile::tempdir().unwrap();
        let embedded = StoreSettings {
            kind: StoreKind::Embedded {
                path: Some(state.path().join("store.redb")),
            },
            ..Default::default()
        };
        let metrics = crate::metrics::standalone();
        let store = Store::new(&embedded, state.path(), &metrics);
        assert_eq!(store.task_owner("jobs", "t-1").await, None);
        store.own_task("jobs", "t-1", "user:alice", Some(60_000));
        store.own_task("jobs", "t-1", "user:bob", Some(60_000));
        store.own_task("jobs", "t-2", "user:alice", Some(0));
        assert_eq!(
            store.task_owner("jobs", "t-1").await.as_deref(),
            Some("user:bob")
        );
        assert_eq!(store.task_owner("other", "t-1").await, None);
        // Written in the background, each write on its own: the next process reads the last
        // one from the file once it is there (it may see the first one before).
        let kept = async {
            loop {
                tokio::time::sleep(Duration::from_millis(20)).await;
                store.release_file(false).await;
                let next = Store::new(&embedded, state.path(), &metrics);
                let owner = next.task_owner("jobs", "t-1").await;
                next.release_file(false).await;
                if owner.as_deref() == Some("user:bob") {
                    return owner;
                }
            }
        };
        let owner = tokio::time::timeout(Duration::from_secs(10), kept).await;
        assert_eq!(owner.unwrap().as_deref(), Some("user:bob"));
        let next = Store::new(&embedded, state.path(), &metrics);
        assert_eq!(next.task_owner("jobs", "t-2").await, None, "expired");
    }
}
