//! Who created each task of an upstream without sessions. Such an upstream's task ids are one
//! namespace for all its callers, and they come round again when it restarts (a server that
//! numbers its tasks from 1 at each start): the last caller to create an id owns it, and a
//! handle of an earlier task with that id opens for no one. Kept in this process, bounded,
//! each entry for its task's lifetime, and with Redis as a sealed record as well, which is
//! then what counts, so that every replica reads the same owner.

use std::{sync::Arc, time::Duration};

use super::Store;
use crate::expiring::{Expiring, lifetime};

/// What the records are kept as.
const KIND: &str = "task-owner";
/// The longest a task's owner is kept (a task asking for longer is kept this long).
pub(super) const LONGEST: Duration = Duration::from_secs(24 * 3600);
/// The most owners this process keeps (those of the tasks that end soonest go first).
pub(super) const MOST: usize = 100_000;

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
        if self.redis.is_none() {
            return;
        }
        let (store, owner) = (self.clone(), owner.to_owned());
        let ttl = lifetime(ttl_ms, LONGEST);
        tokio::spawn(async move {
            if let Err(error) = store
                .save_record(KIND, &key, owner.as_bytes(), Some(ttl))
                .await
            {
                tracing::warn!(%error, "a task's owner cannot be shared with the other replicas");
            }
        });
    }

    /// Who created task `task` of `upstream` last, if it is known here (or, with Redis, to
    /// any replica).
    pub async fn task_owner(&self, upstream: &str, task: &str) -> Option<String> {
        let key = key(upstream, task);
        if self.redis.is_some()
            && let Ok(record) = self.load_record(KIND, &key).await
        {
            return record.and_then(|owner| String::from_utf8(owner).ok());
        }
        self.task_owners.get(&key)
    }
}
