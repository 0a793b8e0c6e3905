//! The tasks clients run for one upstream connection, by the id the upstream knows each by.
//! That id is a handle Switchyard makes, not the client's own: clients that share a
//! connection each number their tasks, and one client's `1` must not reach another's. Entries
//! last as long as the task's time to live (a day at most), and a connection keeps at most
//! `MAX_ASKED` (those that expire soonest go first).

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use crate::{downstream::Downstream, expiring::Expiring};

/// The most tasks a connection keeps.
const MAX_ASKED: usize = 1024;
/// The longest a task is kept, whatever time to live it was given.
const LONGEST: Duration = Duration::from_secs(24 * 3600);

/// A task a client runs for the upstream.
#[derive(Clone)]
pub struct Asked {
    /// The client that runs it.
    pub client: Arc<Downstream>,
    /// The client's id of it.
    pub id: String,
    /// Its place in the order tasks were created in (`tasks/list` pages follow it).
    seq: u64,
}

/// The tasks clients run for one connection, by handle.
pub struct AskedTasks {
    by_handle: Expiring<Asked>,
    next: AtomicU64,
}

impl Default for AskedTasks {
    fn default() -> Self {
        Self {
            by_handle: Expiring::new(LONGEST, MAX_ASKED),
            next: AtomicU64::new(0),
        }
    }
}

impl AskedTasks {
    /// Keeps the client's task `id`, which lives `ttl_ms` (none: as long as any is kept), and
    /// gives the handle the upstream is to know it by.
    pub fn hold(&self, client: Arc<Downstream>, id: String, ttl_ms: Option<u64>) -> String {
        let handle = new_handle();
        let seq = self.next.fetch_add(1, Ordering::Relaxed);
        let asked = Asked { client, id, seq };
        self.by_handle.insert(handle.clone(), asked, ttl_ms);
        handle
    }

    /// The task the upstream knows as `handle`, if it is kept.
    pub fn get(&self, handle: &str) -> Option<Asked> {
        self.by_handle.get(handle)
    }

    /// Up to `size` tasks created after the one numbered `after` (from the first if none), in
    /// the order they were created, and the number to go on after if more remain.
    pub fn page(&self, after: Option<u64>, size: usize) -> (Vec<(String, Asked)>, Option<u64>) {
        let mut tasks = self.by_handle.live();
        tasks.retain(|(_, asked)| after.is_none_or(|after| asked.seq > after));
        tasks.sort_by_key(|(_, asked)| asked.seq);
        let more = tasks.len() > size;
        tasks.truncate(size);
        let next = more
            .then(|| tasks.last().map(|(_, asked)| asked.seq))
            .flatten();
        (tasks, next)
    }
}

/// A handle no one can guess: 128 random bits, in hex.
fn new_handle() -> String {
    let mut bytes = [0u8; 16];
    let _ = aws_lc_rs::rand::fill(&mut bytes);
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        downstream::{Asks, LogLevel, Outlet, Standalone},
        policy::EndpointName,
        principal::Principal,
    };

    fn client() -> Arc<Downstream> {
        Arc::new(Downstream {
            outlet: Outlet::Session(Arc::new(Standalone::default())),
            asks: Some(Arc::new(Asks::default())),
            bridge: None,
            progress_token: None,
            capabilities: Arc::default(),
            principal: Principal::default(),
            endpoint: EndpointName::MAIN,
            log_level: LogLevel::Unset,
        })
    }

    #[test]
    fn two_clients_tasks_of_one_id_get_two_handles_and_pages_follow_creation() {
        let asked = AskedTasks::default();
        let (ada, bob) = (client(), client());
        let first = asked.hold(ada.clone(), "1".into(), Some(60_000));
        let second = asked.hold(bob.clone(), "1".into(), None);
        assert_ne!(first, second);
        assert_eq!(first.len(), 32);
        assert!(Arc::ptr_eq(&asked.get(&first).unwrap().client, &ada));
        assert!(Arc::ptr_eq(&asked.get(&second).unwrap().client, &bob));
        assert!(asked.get("1").is_none(), "a client's own id names nothing");

        let third = asked.hold(ada, "2".into(), Some(0));
        assert!(asked.get(&third).is_none(), "an expired task is gone");
        let (page, next) = asked.page(None, 1);
        assert_eq!(page[0].0, first);
        let (page, last) = asked.page(next, 1);
        assert_eq!((page[0].0.as_str(), last), (second.as_str(), None));
    }
}
