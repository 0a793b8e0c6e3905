//! What Switchyard keeps for a peer for as long as the peer asked, within bounds: a time to
//! live capped at a longest one, and a table of such entries that keeps at most so many
//! (those that expire soonest go first when it is full).

use std::{
    collections::HashMap,
    sync::Mutex,
    time::{Duration, Instant},
};

/// How long something asked to live `ttl_ms` (none: without limit) is kept: at most `longest`.
pub fn lifetime(ttl_ms: Option<u64>, longest: Duration) -> Duration {
    ttl_ms.map_or(longest, Duration::from_millis).min(longest)
}

/// Entries by key, each until its expiry; at most `most` of them.
pub struct Expiring<V> {
    /// Held only to insert, look up or sweep.
    entries: Mutex<HashMap<String, (V, Instant)>>,
    longest: Duration,
    most: usize,
}

impl<V: Clone> Expiring<V> {
    /// A table whose entries live `longest` at most, and that keeps `most` at most.
    pub fn new(longest: Duration, most: usize) -> Self {
        Self {
            entries: Mutex::default(),
            longest,
            most,
        }
    }

    /// Keeps `value` under `key` for `ttl_ms` (within the table's longest lifetime); the
    /// expired entries are dropped first, then, if the table is full, the one that expires
    /// soonest.
    pub fn insert(&self, key: String, value: V, ttl_ms: Option<u64>) {
        let now = Instant::now();
        let mut entries = self.lock();
        entries.retain(|_, (_, expires)| *expires > now);
        if entries.len() >= self.most
            && let Some(first) = entries
                .iter()
                .min_by_key(|(_, (_, expires))| *expires)
                .map(|(key, _)| key.clone())
        {
            entries.remove(&first);
        }
        let expires = now + lifetime(ttl_ms, self.longest);
        entries.insert(key, (value, expires));
    }

    /// What is kept under `key`, if it has not expired.
    pub fn get(&self, key: &str) -> Option<V> {
        let entries = self.lock();
        let (value, expires) = entries.get(key)?;
        (*expires > Instant::now()).then(|| value.clone())
    }

    /// Every entry that has not expired, in no order.
    pub fn live(&self) -> Vec<(String, V)> {
        let now = Instant::now();
        self.lock()
            .iter()
            .filter(|(_, (_, expires))| *expires > now)
            .map(|(key, (value, _))| (key.clone(), value.clone()))
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (V, Instant)>> {
        self.entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_live_their_ttl_within_the_longest_and_the_soonest_to_expire_goes_first() {
        let day = Duration::from_secs(24 * 3600);
        assert_eq!(lifetime(None, day), day);
        assert_eq!(lifetime(Some(5_000), day), Duration::from_secs(5));
        assert_eq!(lifetime(Some(u64::MAX), day), day);

        let table = Expiring::new(day, 2);
        table.insert("gone".into(), 0, Some(0));
        assert_eq!(table.get("gone"), None, "an expired entry is not found");
        table.insert("short".into(), 1, Some(60_000));
        table.insert("long".into(), 2, None);
        table.insert("new".into(), 3, Some(120_000));
        assert_eq!(
            table.get("short"),
            None,
            "the full table dropped the soonest to expire"
        );
        assert_eq!((table.get("long"), table.get("new")), (Some(2), Some(3)));
        let mut live = table.live();
        live.sort();
        assert_eq!(live, [("long".into(), 2), ("new".into(), 3)]);
    }
}
