//! The tasks created through one upstream connection: whose each is, the handle its client
//! knows it by, and where its status notifications go. Entries last as long as the task's
//! time to live (a day at most; a task that ended stays listed until then), and an owner keeps
//! at most `KEPT_PER_OWNER` (those that ended longest ago go first), so a connection's table
//! stays bounded.

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
/// The most tasks, running or ended, kept per owner.
const KEPT_PER_OWNER: usize = 1024;

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
    /// Whether it was seen to end (it then no longer counts against its owner's bound).
    pub ended: bool,
    /// The place the call that created it holds under `concurrent` quotas: given back when
    /// the task is seen to end, when the watch goes (or the connection with it), and at the
    /// latest when it expires.
    pub held: Option<tokio_util::sync::DropGuard>,
}

impl TaskWatch {
    /// Until when a task given `ttl_ms` (none: no limit) is watched.
    pub fn expiry(ttl_ms: Option<u64>) -> Instant {
        Instant::now() + crate::expiring::lifetime(ttl_ms, LONGEST_WATCH)
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
        let mut ended: Vec<(Instant, String)> = self
            .tasks
            .iter()
            .filter(|entry| entry.owner == watch.owner && entry.ended)
            .map(|entry| (entry.expires, entry.key().clone()))
            .collect();
        let kept = self.tasks.iter().filter(|e| e.owner == watch.owner).count();
        if kept >= KEPT_PER_OWNER {
            ended.sort();
            for (_, old) in ended.iter().take(kept + 1 - KEPT_PER_OWNER) {
                self.tasks.remove(old);
            }
        }
        self.tasks.insert(task, watch);
    }

    /// Whose task `task` is, if it was created here and has not expired.
    pub fn owner(&self, task: &str) -> Option<String> {
        self.tasks
            .get(task)
            .filter(|watch| watch.expires > Instant::now())
            .map(|watch| watch.owner.clone())
    }

    /// The handle the client that created task `task` knows it by.
    pub fn handle(&self, task: &str) -> Option<String> {
        self.tasks.get(task).map(|watch| watch.handle.clone())
    }

    /// How many tasks `owner` has running here.
    pub fn count(&self, owner: &str) -> usize {
        let now = Instant::now();
        self.tasks
            .iter()
            .filter(|entry| entry.owner == owner && !entry.ended && entry.expires > now)
            .count()
    }

    /// A task that ended as `event` says no longer counts against its owner; its end is
    /// counted once, by whoever learns of it first.
    pub fn ended(&self, task: &str, event: TaskEvent) {
        if let Some(mut watch) = self.tasks.get_mut(task)
            && !watch.ended
        {
            watch.ended = true;
            watch.held = None;
            if let Some(series) = &watch.series {
                series.task(event);
            }
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::downstream::{Attached, Standalone};

    fn watch(owner: &str, handle: &str, outlet: &Outlet) -> TaskWatch {
        TaskWatch {
            handle: handle.into(),
            owner: owner.into(),
            outlet: outlet.clone(),
            era: Era::Legacy,
            expires: TaskWatch::expiry(Some(60_000)),
            series: None,
            notify: true,
            ended: false,
            held: None,
        }
    }

    #[tokio::test]
    async fn tasks_are_owned_counted_until_they_end_and_heard_of_under_their_handle() {
        let standalone = Arc::new(Standalone::default());
        let Attached::Live(mut stream) = standalone.attach() else {
            panic!("a live stream");
        };
        let outlet = Outlet::Session(standalone.clone());
        let watches = TaskWatches::default();
        watches.watch("up-1".into(), watch("alice", "h1", &outlet));
        watches.watch("up-2".into(), watch("alice", "h2", &outlet));
        watches.watch("up-3".into(), watch("bob", "h3", &outlet));
        assert_eq!((watches.count("alice"), watches.count("bob")), (2, 1));
        assert_eq!(watches.owner("up-3").as_deref(), Some("bob"));
        assert_eq!(watches.owner("up-9"), None);

        watches.status(serde_json::json!({"taskId": "up-1", "status": "completed"}));
        let heard = stream.recv().await.unwrap();
        let heard: serde_json::Value = serde_json::from_slice(&heard).unwrap();
        assert_eq!(heard["method"], "notifications/tasks/status");
        assert_eq!(heard["params"]["taskId"], "h1");
        assert_eq!(watches.count("alice"), 1, "an ended task no longer counts");
        assert_eq!(
            watches.owner("up-1").as_deref(),
            Some("alice"),
            "but is still listed"
        );
        watches.status(serde_json::json!({"taskId": "up-7", "status": "working"}));
        assert!(
            stream.try_recv().is_err(),
            "nothing of tasks not created here"
        );
    }
}
