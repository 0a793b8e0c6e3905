//! Tasks through the gateway (long-running tool calls, 2025-11-25 and the 2026-07-28 tasks
//! extension). A tool call that creates a task upstream answers with a handle of Switchyard's
//! (`handle`) instead of the upstream's id; `tasks/get`, `tasks/result`, `tasks/update` and
//! `tasks/cancel` open the handle and go on the raw path to the upstream session the task
//! lives in, with the upstream's id put back; what comes back names the handle again.
//! `tasks/list` merges the caller's tasks across upstreams (`list`). A client that does not
//! speak tasks gets `required` tools run for it (`bridge`).

mod bridge;
mod eras;
mod handle;
mod list;

use std::sync::Arc;

use bytes::Bytes;
use serde_json::Value;

use self::handle::{TaskHandle, TaskScope};
use super::{
    Call, ConnectionSource, Routed, Target,
    raw::{RawRequest, TaskBound, client_answer, relay_error, upstream_request},
    timeout::Timer,
    unknown_task,
};
use crate::{
    error::GatewayError,
    metrics::TaskEvent,
    protocol::{Era, META_RELATED_TASK, TASKS_EXTENSION},
    upstream::{Connection, TaskWatch, Upstream},
    wire::{self, Answer, Fields},
};

/// Live tasks one principal may have through one upstream connection.
pub const MAX_TASKS_PER_PRINCIPAL: usize = 64;

/// The task methods a client may send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskMethod {
    Get,
    Result,
    Update,
    Cancel,
    List,
}

impl TaskMethod {
    pub fn of_method(method: &str) -> Option<Self> {
        match method {
            "tasks/get" => Some(Self::Get),
            "tasks/result" => Some(Self::Result),
            "tasks/update" => Some(Self::Update),
            "tasks/cancel" => Some(Self::Cancel),
            "tasks/list" => Some(Self::List),
            _ => None,
        }
    }

    fn method(self) -> &'static str {
        match self {
            Self::Get => "tasks/get",
            Self::Result => "tasks/result",
            Self::Update => "tasks/update",
            Self::Cancel => "tasks/cancel",
            Self::List => "tasks/list",
        }
    }
}

impl<S: ConnectionSource> Call<'_, S> {
    /// Answers a task method.
    pub async fn task(&self, method: TaskMethod) -> Answer {
        if let Err(refusal) = self.task_method_allowed(method) {
            return Answer::read(refusal);
        }
        let answer = match method {
            TaskMethod::List => self.list_tasks().await,
            _ => self.task_request(method).await,
        };
        match answer {
            Ok(answer) => Answer::read(answer),
            Err(error) => self.failed(error),
        }
    }

    /// Whether the caller may send `method` here: only if a tool it sees can run as a task, of
    /// its era's task methods (2025-11-25 has `tasks/result` and `tasks/list`, the 2026-07-28
    /// extension `tasks/update` instead), and, from 2026-07-28 on, only if the request
    /// declares the tasks extension.
    fn task_method_allowed(&self, method: TaskMethod) -> Result<(), Bytes> {
        let (id, era) = (self.request.id(), self.request.era);
        let of_era = match method {
            TaskMethod::Get | TaskMethod::Cancel => true,
            TaskMethod::Result | TaskMethod::List => era == Era::Legacy,
            TaskMethod::Update => era == Era::Modern,
        };
        if !of_era || self.request.view().task_upstreams(era).is_empty() {
            return Err(wire::write::error(
                Some(id),
                -32601,
                &format!("Method not found: {}", method.method()),
                None,
            ));
        }
        if era == Era::Modern && !self.request.declares_tasks() {
            let data = serde_json::json!({
                "requiredCapabilities": { "extensions": { TASKS_EXTENSION: {} } }
            });
            return Err(wire::write::error(
                Some(id),
                -32021,
                "Missing required client capability",
                Some(&data),
            ));
        }
        Ok(())
    }

    /// The upstream that runs the task this request names, if it names one of the caller's.
    pub async fn task_upstream(&self) -> Option<crate::names::UpstreamName> {
        let params = self.request.message.params()?;
        let text = params.get("taskId").and_then(wire::string)?;
        Some(self.open_handle(&text).await.ok()?.upstream)
    }

    /// Whose tasks the caller's are.
    fn owner(&self) -> &str {
        self.request.caller.principal.as_str()
    }

    /// `tasks/get`, `tasks/result`, `tasks/update` or `tasks/cancel`, to the upstream that runs
    /// the task.
    async fn task_request(&self, method: TaskMethod) -> Result<Bytes, GatewayError> {
        let text = self
            .request
            .message
            .params()
            .and_then(|params| params.get("taskId"))
            .and_then(wire::string)
            .ok_or_else(|| GatewayError::InvalidParams("`taskId` must be a string".into()))?;
        let handle = self.open_handle(&text).await?;
        let upstream = self.request.live.serving_upstream(&handle.upstream)?;
        let empty = Fields::default();
        let params = self.request.message.params().unwrap_or(&empty);
        let write = |number, rewrite: crate::router::Rewrite<'_>| {
            upstream_request(
                method.method(),
                "taskId",
                number,
                &handle.task,
                params,
                rewrite,
                &[],
            )
        };
        let request = RawRequest {
            upstream: &upstream,
            method: method.method(),
            name: &handle.task,
            write: &write,
            params: &[],
            task: Some(self.bound(&handle)),
        };
        let forwarded = upstream.config().forwarded(&self.request.headers);
        let mut timer = match method {
            TaskMethod::Result => Timer::for_task(&upstream),
            _ => Timer::start(&upstream, None),
        };
        let _admitted = self.admit(&upstream, &mut timer).await?;
        let (answer, connection) = self.exchange(&request, &forwarded, &mut timer).await?;
        let (id, era) = (self.request.id(), self.request.era);
        if answer.is_error {
            return Ok(super::raw::relay_error(id, answer.payload(), upstream.name(), era).message);
        }
        let handle_text = handle.seal(self.store.sealer());
        let legacy_upstream = connection.raw().is_some_and(|raw| raw.era() == Era::Legacy);
        if era == Era::Modern && legacy_upstream {
            match method {
                TaskMethod::Get => {
                    return self
                        .modern_status(answer.payload(), &handle, &handle_text, &upstream)
                        .await;
                }
                TaskMethod::Cancel => {
                    connection
                        .relay()
                        .tasks
                        .ended(&handle.task, TaskEvent::Cancelled);
                    return Ok(wire::write::response(id, r#"{"resultType":"complete"}"#));
                }
                _ => {}
            }
        }
        let retagged = retag(answer.payload(), &|task| {
            (task == handle.task).then(|| handle_text.clone())
        });
        let result = retagged.as_deref().unwrap_or(answer.payload());
        if let Some(end) = ended(method, result) {
            connection.relay().tasks.ended(&handle.task, end);
        }
        if method == TaskMethod::Result {
            let scheme = self.request.view().scheme().clone();
            return Ok(super::raw::client_answer(
                super::Routed::Tool,
                id,
                result,
                &scheme,
                upstream.name(),
                era,
            ));
        }
        Ok(wire::write::response(id, result))
    }

    /// The client's answer to a tool call that created task `payload` on `upstream` (a
    /// `CreateTaskResult`, of either era), with the task known by its handle, and the task
    /// watched for its status notifications. `None` if the call did not create a task.
    pub(super) fn task_created(
        &self,
        payload: &str,
        upstream: &Upstream,
        connection: &Arc<Connection>,
    ) -> Option<String> {
        let created = Created::of(payload)?;
        let handle = self.watch(&created, upstream, connection, true);
        let retagged = retag(payload, &|task| {
            (task == created.task).then(|| handle.clone())
        })?;
        let shaped = match self.request.era {
            Era::Legacy => strip_complete(&retagged).unwrap_or(retagged),
            Era::Modern => retagged,
        };
        Some(shaped)
    }

    /// The task `text` names, if it is a handle of the caller's for a task they may still
    /// reach: of an upstream that runs tasks in their view, and, for an upstream without
    /// sessions, one they were the last to create under its id.
    async fn open_handle(&self, text: &str) -> Result<TaskHandle, GatewayError> {
        let handle =
            TaskHandle::open(self.store.sealer(), text, self.owner()).ok_or_else(unknown_task)?;
        if !self.request.view().runs_tasks_of(&handle.upstream) {
            return Err(unknown_task());
        }
        if handle.scope == TaskScope::Server {
            let owner = self
                .store
                .task_owner(handle.upstream.as_str(), &handle.task)
                .await;
            if owner.as_deref() != Some(self.owner()) {
                return Err(unknown_task());
            }
        }
        Ok(handle)
    }

    /// Where requests about `handle`'s task may go.
    pub(super) fn bound<'h>(&'h self, handle: &'h TaskHandle) -> TaskBound<'h> {
        TaskBound {
            session: handle.scope.session(),
            run: handle.scope.run(),
            owner: self.owner(),
        }
    }

    /// Counts a task a call created on `upstream` through `connection`, and watches it (for
    /// the owner's bound and `tasks/list`, and, if `notify`, to pass its status on): its
    /// handle.
    pub(super) fn watch(
        &self,
        created: &Created,
        upstream: &Upstream,
        connection: &Connection,
        notify: bool,
    ) -> String {
        let series = upstream.lists().tool_series();
        if let Some(series) = &series {
            series.task(TaskEvent::Created);
        }
        // The task lives in the upstream session: it must outlive this connection (a replica
        // leaving, a connection reaped) for as long as the task may be asked about.
        connection.session().keep();
        let scope = TaskScope::of(connection);
        if scope == TaskScope::Server {
            // Its id is the upstream's alone: whoever creates it next owns it from then on.
            let name = upstream.name().as_str();
            self.store
                .own_task(name, &created.task, self.owner(), created.ttl_ms);
        }
        let handle = TaskHandle {
            upstream: upstream.name().clone(),
            scope,
            task: created.task.clone(),
            owner: self.owner().to_owned(),
        }
        .seal(self.store.sealer());
        connection.relay().tasks.watch(
            created.task.clone(),
            TaskWatch {
                handle: handle.clone(),
                owner: self.owner().to_owned(),
                outlet: self.downstream.outlet.clone(),
                era: self.request.era,
                expires: TaskWatch::expiry(created.ttl_ms),
                series,
                notify,
                ended: false,
                held: self.hold_until_ended(created.ttl_ms),
            },
        );
        handle
    }

    /// The call's place under `concurrent` quotas, if it holds one, moved to the task it
    /// created: given back when the guard is dropped (the task seen to end, its watch gone),
    /// or once the task's time to live has passed.
    fn hold_until_ended(&self, ttl_ms: Option<u64>) -> Option<tokio_util::sync::DropGuard> {
        let granted = self.take_held()?;
        let ended = tokio_util::sync::CancellationToken::new();
        let until = tokio::time::Instant::from_std(TaskWatch::expiry(ttl_ms));
        let release = ended.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = release.cancelled() => {}
                _ = tokio::time::sleep_until(until) => {}
            }
            drop(granted);
        });
        Some(ended.drop_guard())
    }

    /// Calls `target`'s tool asking for a task the 2025-11-25 way (`params.task`), within
    /// `timer`: the task it created, with the connection it came on, or the client's answer if
    /// the upstream refused the call or answered it at once.
    pub(super) async fn call_as_task(
        &self,
        target: &Target,
        forwarded: &[(http::HeaderName, http::HeaderValue)],
        timer: &mut Timer<'_>,
    ) -> Result<AsTask, GatewayError> {
        let empty = Fields::default();
        let params = self.request.message.params().unwrap_or(&empty);
        let write = |number, rewrite: crate::router::Rewrite<'_>| {
            upstream_request(
                Routed::Tool.method(),
                Routed::Tool.field(),
                number,
                &target.original,
                params,
                rewrite,
                &[("task", "{}")],
            )
        };
        let request = RawRequest {
            upstream: &target.upstream,
            method: Routed::Tool.method(),
            name: &target.original,
            write: &write,
            params: &target.param_values(params),
            task: None,
        };
        let (answer, connection) = self.exchange(&request, forwarded, timer).await?;
        let (id, era, upstream) = (self.request.id(), self.request.era, target.upstream.name());
        if answer.is_error {
            return Ok(AsTask::Answered(relay_error(
                id,
                answer.payload(),
                upstream,
                era,
            )));
        }
        Ok(match Created::of(answer.payload()) {
            Some(created) => AsTask::Created(created, connection),
            // The upstream ran it at once after all.
            None => AsTask::Answered(Answer::tool_result(client_answer(
                Routed::Tool,
                id,
                answer.payload(),
                self.request.view().scheme(),
                upstream,
                era,
            ))),
        })
    }

    /// Refuses a call that would create one task more than the caller may have through
    /// `connection`.
    pub(super) fn check_task_room(&self, connection: &Connection) -> Result<(), GatewayError> {
        if connection.relay().tasks.count(self.owner()) >= MAX_TASKS_PER_PRINCIPAL {
            return Err(GatewayError::InvalidParams(format!(
                "too many tasks: you have {MAX_TASKS_PER_PRINCIPAL} running through this \
                 upstream; wait for one to end or cancel one"
            )));
        }
        Ok(())
    }
}

/// What a call that asked for a task came to.
pub(super) enum AsTask {
    Created(Created, Arc<Connection>),
    /// The client's answer: the upstream's error, or the result it gave at once.
    Answered(Answer),
}

/// A task a tool call created: the upstream's id for it, its time to live, and the task as
/// the upstream described it.
pub(super) struct Created {
    pub task: String,
    pub ttl_ms: Option<u64>,
    /// How often the upstream suggests asking how it goes.
    pub poll_ms: Option<u64>,
    /// The task's fields (a 2025-11-25 `task`, or a 2026-07-28 result's top level).
    pub fields: Value,
}

impl Created {
    /// The task `payload` (a tool call's result) created: a 2025-11-25 `{"task": {…}}` or a
    /// 2026-07-28 result of `"resultType": "task"`.
    pub fn of(payload: &str) -> Option<Self> {
        if !payload.contains("\"taskId\"") {
            return None;
        }
        let mut result: Value = serde_json::from_str(payload).ok()?;
        let (fields, ttl, poll) =
            if result.get("resultType").and_then(Value::as_str) == Some("task") {
                (result, "ttlMs", "pollIntervalMs")
            } else {
                (result.get_mut("task")?.take(), "ttl", "pollInterval")
            };
        Some(Self {
            task: fields.get("taskId")?.as_str()?.to_owned(),
            ttl_ms: fields.get(ttl).and_then(Value::as_u64),
            poll_ms: fields.get(poll).and_then(Value::as_u64),
            fields,
        })
    }
}

/// `result` (JSON text) with every task id `rename` knows replaced: at the top level, in a
/// 2025-11-25 `task`, and in `_meta`'s related task. `None` if nothing changed.
pub(super) fn retag(result: &str, rename: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    if !result.contains("\"taskId\"") {
        return None;
    }
    let mut value: Value = serde_json::from_str(result).ok()?;
    let mut changed = false;
    let mut swap = |holder: Option<&mut Value>| {
        if let Some(id) = holder.and_then(|holder| holder.get_mut("taskId"))
            && let Some(new) = id.as_str().and_then(rename)
        {
            *id = Value::String(new);
            changed = true;
        }
    };
    swap(Some(&mut value));
    swap(value.get_mut("task"));
    swap(
        value
            .get_mut("_meta")
            .and_then(|meta| meta.get_mut(META_RELATED_TASK)),
    );
    changed.then(|| value.to_string())
}

/// A legacy client's result without the 2026-07-28 `resultType: "complete"`.
fn strip_complete(result: &str) -> Option<String> {
    let mut value: Value = serde_json::from_str(result).ok()?;
    let object = value.as_object_mut()?;
    if object.get("resultType").and_then(Value::as_str) != Some("complete") {
        return None;
    }
    object.remove("resultType");
    Some(value.to_string())
}

/// How the task ended, if the answer to `method` (its result) says it did.
fn ended(method: TaskMethod, result: &str) -> Option<TaskEvent> {
    match method {
        TaskMethod::Result => Some(TaskEvent::Completed),
        TaskMethod::Get | TaskMethod::Cancel => serde_json::from_str::<Value>(result)
            .ok()?
            .get("status")?
            .as_str()
            .and_then(TaskEvent::of_status),
        TaskMethod::Update | TaskMethod::List => None,
    }
}

/// A task's result without the `_meta` that names the upstream's task (the client of a
/// bridged call knows of no task; one of the 2026-07-28 extension finds its id elsewhere).
pub(super) fn without_related_task(result: &str) -> Option<String> {
    if !result.contains(META_RELATED_TASK) {
        return None;
    }
    let mut value: Value = serde_json::from_str(result).ok()?;
    let meta = value.get_mut("_meta")?.as_object_mut()?;
    meta.remove(META_RELATED_TASK);
    if meta.is_empty() {
        value.as_object_mut()?.remove("_meta");
    }
    Some(value.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn created_tasks_of_both_eras_are_recognized_and_retagged() {
        let legacy = r#"{"task":{"taskId":"up-1","status":"working","ttl":60000,"pollInterval":1000,"createdAt":"x","lastUpdatedAt":"x"}}"#;
        let created = Created::of(legacy).unwrap();
        assert_eq!(
            (created.task.as_str(), created.ttl_ms, created.poll_ms),
            ("up-1", Some(60000), Some(1000))
        );
        let modern = r#"{"resultType":"task","taskId":"up-2","status":"working","ttlMs":null,"createdAt":"x","lastUpdatedAt":"x"}"#;
        let created = Created::of(modern).unwrap();
        assert_eq!((created.task.as_str(), created.ttl_ms), ("up-2", None));
        assert!(Created::of(r#"{"content":[{"type":"text","text":"taskId"}]}"#).is_none());

        let rename = |task: &str| (task == "up-1").then(|| "handle".to_owned());
        let retagged: Value = serde_json::from_str(&retag(legacy, &rename).unwrap()).unwrap();
        assert_eq!(retagged["task"]["taskId"], "handle");
        let result =
            r#"{"content":[],"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"up-1"}}}"#;
        let retagged: Value = serde_json::from_str(&retag(result, &rename).unwrap()).unwrap();
        assert_eq!(retagged["_meta"][META_RELATED_TASK]["taskId"], "handle");
        assert!(retag(r#"{"taskId":"up-9"}"#, &rename).is_none());
    }
}
