//! The bridge for clients that do not speak tasks: a tool that must run as a task
//! (`taskSupport: "required"`), called plainly, is run as one by Switchyard. It creates the
//! task upstream, waits for its result with `tasks/result` (whatever the upstream sends on the
//! way, such as a question for the user, is passed on as for any call), tells the client how
//! the task goes as progress (from `tasks/get`, at the interval the upstream suggests), and
//! answers the call with the task's result. A call the client cancels cancels the task.

use std::time::Duration;

use bytes::Bytes;
use serde_json::Value;

use std::sync::Arc;

use super::{AsTask, without_related_task};
use crate::{
    error::GatewayError,
    metrics::TaskEvent,
    router::{
        Call, ConnectionSource, Routed, Target,
        raw::{RawRequest, client_answer, relay_error},
        timeout::Timer,
    },
    upstream::{Connection, RawLink},
    wire::{self, Answer},
};

/// Bounds on how often a bridged task is asked how it goes, whatever the upstream suggests.
const FASTEST_POLL: Duration = Duration::from_millis(250);
const SLOWEST_POLL: Duration = Duration::from_secs(5);
const DEFAULT_POLL: Duration = Duration::from_secs(1);

impl<S: ConnectionSource> Call<'_, S> {
    /// Answers a plain call of a tool that must run as a task, at `target`, by running it as
    /// one.
    pub(in crate::router) async fn bridged(
        &self,
        target: &Target,
        forwarded: &[(http::HeaderName, http::HeaderValue)],
    ) -> Result<Answer, GatewayError> {
        let upstream = &target.upstream;
        let mut timer = Timer::start(upstream, target.tool());
        let _admitted = self.admit(upstream, &mut timer).await?;
        let (created, connection) = match self.call_as_task(target, forwarded, &mut timer).await? {
            AsTask::Created(created, connection) => (created, connection),
            AsTask::Answered(answer) => return Ok(answer),
        };
        let (id, era) = (self.request.id(), self.request.era);
        let scheme = self.request.view().scheme().clone();
        // Watched quietly: it counts against the caller's bound and shows in `tasks/list`.
        self.watch(&created, upstream, &connection, false);
        let tasks = &connection.relay().tasks;
        let count = |event| tasks.ended(&created.task, event);
        let following = Following {
            connection: &connection,
            task: &created.task,
        };
        let poll = created
            .poll_ms
            .map_or(DEFAULT_POLL, Duration::from_millis)
            .clamp(FASTEST_POLL, SLOWEST_POLL);
        let result_params = serde_json::json!({ "taskId": created.task }).to_string();
        let write_result = |number: i64, _: crate::router::Rewrite<'_>| -> Bytes {
            wire::write::request(
                itoa::Buffer::new().format(number),
                "tasks/result",
                Some(result_params.as_bytes()),
            )
            .into()
        };
        let waiting = RawRequest {
            upstream,
            method: "tasks/result",
            name: &created.task,
            write: &write_result,
            params: &[],
            task: None,
        };
        let mut wait_timer = Timer::for_task(upstream);
        let outcome = tokio::select! {
            outcome = self.exchange(&waiting, forwarded, &mut wait_timer) => outcome,
            never = following.report(self, poll) => match never {},
        };
        let answer = match outcome {
            Ok((answer, _)) => answer,
            Err(error) => {
                following.cancel();
                count(TaskEvent::Cancelled);
                return Err(error);
            }
        };
        if answer.is_error {
            count(TaskEvent::Failed);
            return Ok(relay_error(id, answer.payload(), upstream.name(), era));
        }
        count(TaskEvent::Completed);
        let result = without_related_task(answer.payload());
        let result = result.as_deref().unwrap_or(answer.payload());
        Ok(Answer::tool_result(client_answer(
            Routed::Tool,
            id,
            result,
            &scheme,
            upstream.name(),
            era,
        )))
    }
}

/// A bridged task being followed.
struct Following<'a> {
    connection: &'a Arc<Connection>,
    task: &'a str,
}

impl Following<'_> {
    fn link(&self) -> Option<&RawLink> {
        self.connection.raw()
    }

    fn params(&self) -> Value {
        serde_json::json!({ "taskId": self.task })
    }

    /// Asks how the task goes every `poll`, and tells the client as progress if it asked for
    /// progress; runs until dropped.
    async fn report<S: ConnectionSource>(
        &self,
        call: &Call<'_, S>,
        poll: Duration,
    ) -> std::convert::Infallible {
        let token = call
            .downstream
            .progress_token
            .as_ref()
            .and_then(|token| serde_json::to_string(token).ok());
        let mut step = 0u64;
        loop {
            tokio::time::sleep(poll).await;
            let (Some(token), Some(link)) = (&token, self.link()) else {
                continue;
            };
            let Ok(answer) = link.request("tasks/get", self.params(), |_| {}).await else {
                continue;
            };
            if answer.is_error {
                continue;
            }
            let status: Value = serde_json::from_str(answer.payload()).unwrap_or_default();
            step += 1;
            let mut progress = serde_json::json!({ "progressToken": null, "progress": step });
            progress["progressToken"] = serde_json::from_str(token).unwrap_or_default();
            if let Some(message) = status.get("statusMessage").and_then(Value::as_str) {
                progress["message"] = Value::String(message.to_owned());
            }
            let text = progress.to_string();
            let notification = wire::write::notification("notifications/progress", Some(&text));
            let _ = call.downstream.outlet.send(notification).await;
        }
    }

    /// Cancels the task upstream (its call was cancelled, or failed on the way).
    fn cancel(&self) {
        let connection = self.connection.clone();
        let params = self.params();
        tokio::spawn(async move {
            if let Some(link) = connection.raw() {
                let _ = link.request("tasks/cancel", params, |_| {}).await;
            }
        });
    }
}
