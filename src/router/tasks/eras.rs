//! Tasks of a 2025-11-25 upstream for a 2026-07-28 client that declared the tasks extension:
//! the call creates the task the 2025-11-25 way (`params.task`) and answers with the
//! extension's `CreateTaskResult`; `tasks/get` answers with the extension's detailed task, the
//! result (or error) of an ended task inlined from the upstream's `tasks/result`; `tasks/cancel`
//! answers with the extension's empty acknowledgement. A task waiting for input shows as
//! working: the 2025-11-25 upstream asks for it on the `tasks/result` stream, which a client of
//! the extension never opens.

use bytes::Bytes;
use serde_json::{Map, Value, json};

use super::{AsTask, handle::TaskHandle, without_related_task};
use crate::{
    error::GatewayError,
    metrics::TaskEvent,
    router::{Call, ConnectionSource, Target, raw::RawRequest, timeout::Timer},
    upstream::Upstream,
    wire::{self, Answer},
};

impl<S: ConnectionSource> Call<'_, S> {
    /// A call of a task tool of a 2025-11-25 upstream by a 2026-07-28 client that declared
    /// the extension: the task is created upstream and answered the extension's way.
    pub(in crate::router) async fn translated(
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
        let handle = self.watch(&created, upstream, &connection, true);
        let mut result = modern_task(&created.fields, &handle);
        result.insert("resultType".into(), json!("task"));
        Ok(Answer::result(wire::write::response(
            self.request.id(),
            &Value::Object(result).to_string(),
        )))
    }

    /// The extension's `tasks/get` answer from a 2025-11-25 upstream's (`status`, JSON text)
    /// for the task of `handle`: an ended task's result or error is fetched and inlined.
    pub(super) async fn modern_status(
        &self,
        status: &str,
        handle: &TaskHandle,
        handle_text: &str,
        upstream: &std::sync::Arc<Upstream>,
    ) -> Result<Bytes, GatewayError> {
        let task: Value = serde_json::from_str(status)
            .map_err(|error| GatewayError::Internal(format!("a task cannot be read: {error}")))?;
        let mut detailed = modern_task(&task, handle_text);
        detailed.insert("resultType".into(), json!("complete"));
        let state = task
            .get("status")
            .and_then(Value::as_str)
            .unwrap_or_default();
        match state {
            "input_required" => {
                detailed.insert("status".into(), json!("working"));
            }
            "completed" | "failed" => {
                let (result, is_error) = self.upstream_result(handle, upstream).await?;
                let key = if is_error { "error" } else { "result" };
                if is_error {
                    detailed.insert("status".into(), json!("failed"));
                }
                detailed.insert(key.into(), result);
            }
            _ => {}
        }
        if let Some(end) = TaskEvent::of_status(state)
            && let Ok(connection) = self.source.connection(upstream).await
        {
            connection.relay().tasks.ended(&handle.task, end);
        }
        Ok(wire::write::response(
            self.request.id(),
            &Value::Object(detailed).to_string(),
        ))
    }

    /// The upstream's `tasks/result` for an ended task: its result (without the related-task
    /// `_meta`), or its error (`true`).
    async fn upstream_result(
        &self,
        handle: &TaskHandle,
        upstream: &std::sync::Arc<Upstream>,
    ) -> Result<(Value, bool), GatewayError> {
        let params = json!({ "taskId": handle.task }).to_string();
        let write = |number: i64, _: crate::router::Rewrite<'_>| -> Bytes {
            wire::write::request(
                itoa::Buffer::new().format(number),
                "tasks/result",
                Some(params.as_bytes()),
            )
            .into()
        };
        let request = RawRequest {
            upstream,
            method: "tasks/result",
            name: &handle.task,
            write: &write,
            params: &[],
            task: Some(self.bound(handle)),
        };
        let mut timer = Timer::for_task(upstream);
        let (answer, _) = self.exchange(&request, &[], &mut timer).await?;
        let payload = answer.payload();
        let text = without_related_task(payload);
        let value = serde_json::from_str(text.as_deref().unwrap_or(payload)).map_err(|error| {
            GatewayError::Internal(format!("a task's result cannot be read: {error}"))
        })?;
        Ok((value, answer.is_error))
    }
}

/// The extension's task fields from a 2025-11-25 task (`ttl` and `pollInterval` renamed,
/// the id the client's), without `resultType`.
fn modern_task(task: &Value, handle: &str) -> Map<String, Value> {
    let mut fields = Map::new();
    fields.insert("taskId".into(), json!(handle));
    for (from, to) in [
        ("status", "status"),
        ("statusMessage", "statusMessage"),
        ("createdAt", "createdAt"),
        ("lastUpdatedAt", "lastUpdatedAt"),
        ("ttl", "ttlMs"),
        ("pollInterval", "pollIntervalMs"),
    ] {
        if let Some(value) = task.get(from) {
            fields.insert(to.into(), value.clone());
        }
    }
    fields.entry("ttlMs").or_insert(Value::Null);
    fields
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_legacy_task_reads_as_the_extension_writes_it() {
        let task = json!({"taskId": "up-1", "status": "working", "statusMessage": "Reading",
            "createdAt": "2026-01-01T00:00:00Z", "lastUpdatedAt": "2026-01-01T00:00:01Z",
            "ttl": 60000, "pollInterval": 1000});
        let modern = Value::Object(modern_task(&task, "handle"));
        assert_eq!(
            modern,
            json!({"taskId": "handle", "status": "working", "statusMessage": "Reading",
                "createdAt": "2026-01-01T00:00:00Z", "lastUpdatedAt": "2026-01-01T00:00:01Z",
                "ttlMs": 60000, "pollIntervalMs": 1000})
        );
        let unlimited = modern_task(&json!({"taskId": "x", "status": "working"}), "h");
        assert_eq!(unlimited["ttlMs"], Value::Null);
    }
}
