//! The tasks created through one upstream connection: whose each is, the handle its client
//! knows it by, and where its status notifications go. Entries last as long as the task's
//! time to live (a day at most), so a connection's table stays bounded.

use std::time::{Duration, Instant};

use dashmap::DashMap;
use serde_json::Value;

use crate::{
    downstream::Outlet,
    metrics::{TaskEvent, ToolTable},
    protocol::Era,
    wire,
};

/// The longest a task is watched, whatever time to live it was given.
const LONGEST_WATCH: Duration = Duration::from_secs(24 * 3600);

/// A task created through the connection.
pub struct TaskWatch {
    /// The handle its client knows it by.
    pub handle: String,
    /// Whose it is (the principal's id).
    pub owner: String,
    /// Where its status notifications go.
    pub outlet: Outlet,
    /// The era of its client, whose shape its notifications take.
    pub era: Era,
    pub expires: Instant,
    /// Where its end is counted (its upstream's series).
    pub series: Option<std::sync::Arc<ToolTable>>,
    /// Whether its client hears of its status: not for a task Switchyard runs for a client
    /// that does not speak tasks.
    pub notify: bool,
}

impl TaskWatch {
    /// Until when a task given `ttl_ms` (none: no limit) is watched.
    pub fn expiry(ttl_ms: Option<u64>) -> Instant {
        let ttl = ttl_ms.map_or(LONGEST_WATCH, |ms| {
            Duration::from_millis(ms).min(LONGEST_WATCH)
        });
        Instant::now() + ttl
    }
}

/// The tasks of one connection, by the upstream's id.
#[derive(Default)]
pub struct TaskWatches {
    tasks: DashMap<String, TaskWatch>,
}

impl TaskWatches {
    pub fn watch(&self, task: String, watch: TaskWatch) {
        let now = Instant::now();
        self.tasks.retain(|_, watch| watch.expires > now);
        self.tasks.insert(task, watch);
    }

    /// Whose task `task` is, if it was created here and has not expired.
    pub fn owner(&self, task: &str) -> Option<String> {
        self.tasks
            .get(task)
            .filter(|watch| watch.expires > Instant::now())
            .map(|watch| watch.owner.clone())
    }

    /// How many live tasks `owner` has here.
    pub fn count(&self, owner: &str) -> usize {
        let now = Instant::now();
        self.tasks
            .iter()
            .filter(|entry| entry.owner == owner && entry.expires > now)
            .count()
    }

    /// A task that ended as `event` says no longer counts against its owner; its end is
    /// counted once, by whoever learns of it first.
    pub fn ended(&self, task: &str, event: TaskEvent) {
        if let Some((_, watch)) = self.tasks.remove(task)
            && let Some(series) = &watch.series
        {
            series.task(event);
        }
    }

    /// Passes on a status notification the upstream sent (its params), under the task's
    /// handle, to the client that created the task; ones about tasks not created here are
    /// dropped. A task that reached its end is forgotten.
    pub fn status(&self, mut params: Value) {
        let Some(task) = params
            .get("taskId")
            .and_then(Value::as_str)
            .map(str::to_owned)
        else {
            return;
        };
        let end = params
            .get("status")
            .and_then(Value::as_str)
            .and_then(TaskEvent::of_status);
        let Some(watch) = self.tasks.get(&task).filter(|watch| watch.notify) else {
            return;
        };
        params["taskId"] = Value::String(watch.handle.clone());
        let method = match watch.era {
            Era::Legacy => "notifications/tasks/status",
            Era::Modern => "notifications/tasks",
        };
        let text = params.to_string();
        let _ = watch
            .outlet
            .offer(wire::write::notification(method, Some(&text)));
        drop(watch);
        if let Some(end) = end {
            self.ended(&task, end);
        }
    }
}
