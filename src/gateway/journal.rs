//! What operators look back at: the last reloads (what each changed, or why it was refused)
//! and the last upstream failures. Bounded, kept in memory, written rarely; each one is also
//! published as an event (`reload`, `error`) to whoever follows `/api/events`.

use std::{
    collections::VecDeque,
    sync::{Arc, Mutex},
};

use serde::Serialize;

use crate::{clock, events::Events};

/// How many reloads are kept.
const RELOADS: usize = 20;
/// How many failures are kept.
const ERRORS: usize = 50;

/// What started a reload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Trigger {
    /// The configuration file changed.
    File,
    /// `SIGHUP`.
    Signal,
    /// The admin API.
    Admin,
}

/// How a reload ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReloadOutcome {
    /// The new configuration is in force.
    Applied,
    /// It was invalid; nothing changed.
    Rejected,
    /// It was valid and the same as the one in force.
    Unchanged,
}

impl ReloadOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            ReloadOutcome::Applied => "applied",
            ReloadOutcome::Rejected => "rejected",
            ReloadOutcome::Unchanged => "unchanged",
        }
    }
}

/// One reload, as reported to operators (log, admin API, status page).
#[derive(Debug, Clone, Serialize)]
pub struct ReloadEntry {
    /// Unix seconds.
    pub at: u64,
    pub trigger: Trigger,
    pub outcome: ReloadOutcome,
    /// What changed, e.g. `added a; removed b; changed c`.
    pub summary: String,
    /// Why it was rejected: every problem, with the file and key path.
    pub errors: Vec<String>,
    /// Settings that changed in the file but take effect only after a restart.
    pub needs_restart: Vec<String>,
}

/// A failure worth showing.
#[derive(Debug, Clone, Serialize)]
pub struct JournalError {
    pub at: u64,
    pub upstream: Option<String>,
    pub message: String,
}

/// The bounded history.
pub struct Journal {
    reloads: Mutex<VecDeque<ReloadEntry>>,
    errors: Mutex<VecDeque<JournalError>>,
    events: Arc<Events>,
}

impl Journal {
    pub fn new(events: Arc<Events>) -> Self {
        Self {
            reloads: Mutex::default(),
            errors: Mutex::default(),
            events,
        }
    }

    pub fn reload(&self, entry: ReloadEntry) {
        self.events.publish("reload", &entry);
        push(&self.reloads, entry, RELOADS);
    }

    pub fn error(&self, upstream: Option<&str>, message: String) {
        let entry = JournalError {
            at: unix_now(),
            upstream: upstream.map(str::to_owned),
            message,
        };
        self.events.publish("error", &entry);
        push(&self.errors, entry, ERRORS);
    }

    /// The reloads kept, newest first.
    pub fn reloads(&self) -> Vec<ReloadEntry> {
        newest_first(&self.reloads)
    }

    /// The failures kept, newest first.
    pub fn errors(&self) -> Vec<JournalError> {
        newest_first(&self.errors)
    }
}

fn push<T>(list: &Mutex<VecDeque<T>>, entry: T, cap: usize) {
    let mut list = list.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if list.len() == cap {
        list.pop_front();
    }
    list.push_back(entry);
}

fn newest_first<T: Clone>(list: &Mutex<VecDeque<T>>) -> Vec<T> {
    let list = list.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    list.iter().rev().cloned().collect()
}

/// Seconds since the Unix epoch.
pub fn unix_now() -> u64 {
    clock::now_seconds()
}
