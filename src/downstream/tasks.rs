//! Tasks a client runs when an upstream asks it something: what the client declared it can
//! run as a task (2025-11-25's `capabilities.tasks`, which rmcp's model of the capabilities
//! lacks), and, for each task it runs for an upstream, where its status notifications go and
//! under which id that upstream knows the task.

use std::time::Duration;

use rmcp::{
    RoleClient,
    model::{ClientNotification, CustomNotification},
    service::Peer,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::{
    expiring::Expiring,
    wire::{Edit, Fields},
};

/// The notification of a task's new status.
pub const STATUS: &str = "notifications/tasks/status";

/// A request an upstream may ask a client to run as a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskRequest {
    Sampling,
    Elicitation,
}

impl TaskRequest {
    /// The request `method` names, if it may run as a task.
    pub fn of_method(method: &str) -> Option<Self> {
        match method {
            "sampling/createMessage" => Some(Self::Sampling),
            "elicitation/create" => Some(Self::Elicitation),
            _ => None,
        }
    }

    /// The capability a client declares to run it as a task.
    pub fn capability(self) -> &'static str {
        match self {
            Self::Sampling => "tasks.requests.sampling.createMessage",
            Self::Elicitation => "tasks.requests.elicitation.create",
        }
    }

    fn bit(self) -> u8 {
        match self {
            Self::Sampling => TaskSupport::SAMPLING,
            Self::Elicitation => TaskSupport::ELICITATION,
        }
    }
}

/// What a client declared of tasks it runs: kept as bits, so that a session id carries it in
/// a few bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TaskSupport(u8);

impl TaskSupport {
    const SAMPLING: u8 = 1;
    const ELICITATION: u8 = 2;
    const CANCEL: u8 = 4;

    /// Everything Switchyard can relay: what a connection shared by all clients declares.
    pub const RELAYED: Self = Self(Self::SAMPLING | Self::ELICITATION | Self::CANCEL);

    /// What `capabilities` (a client's, as it sent them at `initialize`) declare.
    pub fn declared_in(capabilities: Option<&Fields<'_>>) -> Self {
        let Some(tasks) = capabilities
            .and_then(|caps| caps.get("tasks"))
            .and_then(|tasks| serde_json::from_str::<Value>(tasks.get()).ok())
        else {
            return Self::default();
        };
        let has = |pointer: &str| tasks.pointer(pointer).is_some_and(Value::is_object);
        let mut bits = 0;
        if has("/requests/sampling/createMessage") {
            bits |= Self::SAMPLING;
        }
        if has("/requests/elicitation/create") {
            bits |= Self::ELICITATION;
        }
        if has("/cancel") {
            bits |= Self::CANCEL;
        }
        Self(bits)
    }

    /// Whether the client runs `request` as a task when asked to.
    pub fn runs(self, request: TaskRequest) -> bool {
        self.0 & request.bit() != 0
    }

    /// Whether the client runs any request as a task when asked to.
    pub fn runs_any(self) -> bool {
        self.0 & (Self::SAMPLING | Self::ELICITATION) != 0
    }

    /// Whether the client cancels its tasks when asked to.
    pub fn cancels(self) -> bool {
        self.0 & Self::CANCEL != 0
    }

    /// Whether the client runs no request as a task.
    pub fn runs_nothing(&self) -> bool {
        self.0 & (Self::SAMPLING | Self::ELICITATION) == 0
    }

    /// `capabilities.tasks` declaring this support to an upstream, if there is any. Listing is
    /// always declared: Switchyard answers it from the tasks it relayed.
    pub fn capability(self) -> Option<Value> {
        if self.runs_nothing() {
            return None;
        }
        let mut requests = serde_json::Map::new();
        if self.runs(TaskRequest::Sampling) {
            requests.insert("sampling".into(), json!({ "createMessage": {} }));
        }
        if self.runs(TaskRequest::Elicitation) {
            requests.insert("elicitation".into(), json!({ "create": {} }));
        }
        let mut tasks = json!({ "list": {}, "requests": requests });
        if self.cancels() {
            tasks["cancel"] = json!({});
        }
        Some(tasks)
    }
}

/// The most tasks a session keeps the status route of; the ones that expire soonest go first.
const MAX_REPORTED: usize = 1024;
/// The longest a task's status route is kept, whatever time to live it was given.
const LONGEST_REPORT: Duration = Duration::from_secs(24 * 3600);

/// Where a task a client runs for an upstream reports to.
#[derive(Clone)]
pub struct Report {
    /// The connection of the upstream that asked for it.
    pub upstream: Peer<RoleClient>,
    /// The id that upstream knows the task by.
    pub handle: String,
}

/// The tasks a session's client runs for upstreams, by the client's own task id.
pub struct Reports(Expiring<Report>);

impl Default for Reports {
    fn default() -> Self {
        Self(Expiring::new(LONGEST_REPORT, MAX_REPORTED))
    }
}

impl Reports {
    /// Notes that the client's task `id` is `handle` to `upstream`, for `ttl_ms` (none:
    /// as long as Switchyard keeps any).
    pub fn insert(
        &self,
        id: String,
        upstream: Peer<RoleClient>,
        handle: String,
        ttl_ms: Option<u64>,
    ) {
        self.0.insert(id, Report { upstream, handle }, ttl_ms);
    }

    /// Where the client's task `id` reports to, if it runs for an upstream.
    pub fn get(&self, id: &str) -> Option<Report> {
        self.0.get(id)
    }

    /// Passes the client's `notifications/tasks/status` (its `params`) on to the upstream its
    /// task runs for, under the id that upstream knows the task by. The status of a task the
    /// client runs for no upstream (or for one that has gone) goes nowhere.
    pub fn pass_status(&self, params: &Fields<'_>) {
        let Some(id) = params.get("taskId").and_then(crate::wire::string) else {
            return;
        };
        let Some(report) = self.get(&id) else {
            return;
        };
        let mut out = Vec::with_capacity(128);
        let handle = serde_json::to_string(&report.handle).unwrap_or_default();
        params.write(
            &mut out,
            |key| match key {
                "taskId" => Edit::Value(&handle),
                _ => Edit::Keep,
            },
            &[],
        );
        let Ok(params) = serde_json::from_slice::<Value>(&out) else {
            return;
        };
        let notification =
            ClientNotification::CustomNotification(CustomNotification::new(STATUS, Some(params)));
        tokio::spawn(async move {
            // The upstream's connection may have closed; the status then concerns no one.
            let _ = report.upstream.send_notification(notification).await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn declared(capabilities: &str) -> TaskSupport {
        TaskSupport::declared_in(Fields::of_text(capabilities).as_ref())
    }

    #[test]
    fn a_clients_declaration_is_read_as_the_2025_11_25_schema_puts_it() {
        let both = declared(
            r#"{"sampling":{},"tasks":{"cancel":{},"requests":{"sampling":{"createMessage":{}},"elicitation":{"create":{}}}}}"#,
        );
        assert!(both.runs(TaskRequest::Sampling) && both.runs(TaskRequest::Elicitation));
        assert!(both.cancels());
        let sampling = declared(r#"{"tasks":{"requests":{"sampling":{"createMessage":{}}}}}"#);
        assert!(sampling.runs(TaskRequest::Sampling));
        assert!(!sampling.runs(TaskRequest::Elicitation) && !sampling.cancels());
        // Tool-call tasks alone, a malformed entry, or nothing: nothing it runs when asked.
        assert!(declared(r#"{"tasks":{"list":{},"cancel":{}}}"#).runs_nothing());
        assert!(declared(r#"{"tasks":{"requests":{"sampling":true}}}"#).runs_nothing());
        assert!(declared("{}").runs_nothing());
        assert_eq!(TaskSupport::declared_in(None), TaskSupport::default());
    }

    #[test]
    fn the_capability_declared_upstream_names_what_the_client_runs() {
        let sampling = declared(r#"{"tasks":{"requests":{"sampling":{"createMessage":{}}}}}"#);
        assert_eq!(
            sampling.capability(),
            Some(json!({"list": {}, "requests": {"sampling": {"createMessage": {}}}}))
        );
        assert_eq!(
            TaskSupport::RELAYED.capability(),
            Some(json!({"list": {}, "cancel": {}, "requests": {
                "sampling": {"createMessage": {}}, "elicitation": {"create": {}}}}))
        );
        assert_eq!(TaskSupport::default().capability(), None);
    }
}
