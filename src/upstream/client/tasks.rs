//! Tasks an upstream asks of a client (2025-11-25): a `sampling/createMessage` or
//! `elicitation/create` with `params.task` (lifted off the wire as a custom request, see
//! `augmented`), and the `tasks/get`, `tasks/result`, `tasks/cancel` and `tasks/list` that
//! follow it.
//!
//! A request to run as a task goes, whole, to the client the request concerns if that client
//! declared it runs such requests as tasks; the task id in its answer is replaced by a handle
//! of the connection's (`asked`), under which the upstream then asks about it. A client that
//! did not declare it is not sent it: the upstream gets an error that says so. On a connection
//! that declared no such tasks (one of a client that runs none), the request is served as a
//! plain one, as the protocol has a receiver that did not declare tasks do.

use rmcp::{
    ErrorData,
    model::{
        CreateMessageRequest, CreateMessageRequestParams, CustomRequest, CustomResult,
        ElicitRequest, ElicitRequestParams, ErrorCode, ServerRequest,
    },
    service::{RequestContext, RoleClient},
};
use serde_json::{Value, json};

use super::UpstreamClient;
use crate::downstream::{CLIENT_REQUESTS, TaskRequest, ask_client_raw, cannot_forward, kind};

/// How many tasks a `tasks/list` page holds (each is asked of its client).
const LIST_PAGE: usize = 20;
/// The `_meta` key that names the task a message is about.
const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

impl UpstreamClient {
    /// A request outside rmcp's model: one to run as a task, or about such a task.
    pub(super) async fn custom_request(
        &self,
        request: CustomRequest,
        context: RequestContext<RoleClient>,
    ) -> Result<CustomResult, ErrorData> {
        let CustomRequest { method, params, .. } = request;
        if let Some(asked) = TaskRequest::of_method(&method)
            && params
                .as_ref()
                .is_some_and(|params| params.get("task").is_some())
        {
            return self
                .run_as_task(asked, &method, params.unwrap_or_default(), context)
                .await;
        }
        if CLIENT_REQUESTS.contains(&method.as_str()) {
            return self.ask_plainly(&method, params, &context).await;
        }
        let params = params.unwrap_or_else(|| json!({}));
        match method.as_str() {
            "tasks/get" | "tasks/result" | "tasks/cancel" => {
                self.about_task(&method, params, &context).await
            }
            "tasks/list" => self.list_tasks(&params, &context).await,
            _ => Err(ErrorData::new(
                ErrorCode::METHOD_NOT_FOUND,
                format!("Switchyard does not pass `{method}` requests to clients"),
                None,
            )),
        }
    }

    /// Asks the client concerned to run `method` (with `params`) as a task.
    async fn run_as_task(
        &self,
        asked: TaskRequest,
        method: &str,
        mut params: Value,
        context: RequestContext<RoleClient>,
    ) -> Result<CustomResult, ErrorData> {
        let typed = typed(asked, &params)?;
        if !self.tasks.runs(asked) {
            // Served as a plain request, as a receiver that declared no tasks would serve it.
            if let Some(params) = params.as_object_mut() {
                params.remove("task");
            }
            return self.ask_plainly(method, Some(params), &context).await;
        }
        let target = self.target(&context, &typed).await?;
        if !target
            .asks
            .as_ref()
            .is_some_and(|asks| asks.tasks.runs(asked))
        {
            return Err(cannot_forward(
                kind(&typed),
                &format!(
                    "it asks for a task, and the client did not declare {}",
                    asked.capability()
                ),
            ));
        }
        self.before_asking(&typed, &target, Some(&mut params));
        let what = (kind(&typed), method);
        let answer = ask_client_raw(&target, what, Some(&params.to_string()), &context.ct).await?;
        let mut result = parse(answer.get())?;
        // A client may run it at once and answer with its result instead of a task.
        let Some(id) = result.pointer("/task/taskId").and_then(Value::as_str) else {
            return Ok(CustomResult(result));
        };
        let id = id.to_owned();
        let ttl = result.pointer("/task/ttl").and_then(Value::as_u64);
        let handle = self.relay.asked.hold(target.clone(), id.clone(), ttl);
        result["task"]["taskId"] = Value::String(handle.clone());
        if let Some(asks) = &target.asks {
            asks.reports.insert(id, context.peer.clone(), handle, ttl);
        }
        Ok(CustomResult(result))
    }

    /// `tasks/get`, `tasks/result` or `tasks/cancel` about a task the upstream knows by its
    /// handle: asked of the client that runs it, about its own id, and answered under the
    /// handle.
    async fn about_task(
        &self,
        method: &str,
        mut params: Value,
        context: &RequestContext<RoleClient>,
    ) -> Result<CustomResult, ErrorData> {
        let handle = params
            .get("taskId")
            .and_then(Value::as_str)
            .ok_or_else(|| invalid(format!("`{method}` needs a string taskId")))?
            .to_owned();
        let asked =
            self.relay.asked.get(&handle).ok_or_else(|| {
                invalid(format!("no task `{handle}` was created by a client here"))
            })?;
        let cancels = asked
            .client
            .asks
            .as_ref()
            .is_some_and(|asks| asks.tasks.cancels());
        if method == "tasks/cancel" && !cancels {
            return Err(ErrorData::new(
                ErrorCode::METHOD_NOT_FOUND,
                format!(
                    "the client that runs task `{handle}` did not declare tasks.cancel; it \
                     cannot be cancelled"
                ),
                None,
            ));
        }
        params["taskId"] = Value::String(asked.id.clone());
        let params = params.to_string();
        let answer =
            ask_client_raw(&asked.client, ("tasks", method), Some(&params), &context.ct).await?;
        let mut result = parse(answer.get())?;
        rename(&mut result, &asked.id, &handle);
        Ok(CustomResult(result))
    }

    /// `tasks/list`: the tasks clients run for this upstream, each as its client describes it
    /// now, a page at a time. A task its client no longer knows is left out.
    async fn list_tasks(
        &self,
        params: &Value,
        context: &RequestContext<RoleClient>,
    ) -> Result<CustomResult, ErrorData> {
        let after = match params.get("cursor") {
            None | Some(Value::Null) => None,
            Some(cursor) => Some(
                cursor
                    .as_str()
                    .and_then(|cursor| cursor.parse::<u64>().ok())
                    .ok_or_else(|| {
                        invalid(format!("`{cursor}` is not a cursor Switchyard gave"))
                    })?,
            ),
        };
        let (page, next) = self.relay.asked.page(after, LIST_PAGE);
        let described = page.into_iter().map(|(handle, asked)| async move {
            let params = json!({ "taskId": asked.id }).to_string();
            let what = ("tasks", "tasks/get");
            let answer = ask_client_raw(&asked.client, what, Some(&params), &context.ct).await;
            let mut task = parse(answer.ok()?.get()).ok()?;
            rename(&mut task, &asked.id, &handle);
            Some(task)
        });
        let tasks: Vec<Value> = futures::future::join_all(described)
            .await
            .into_iter()
            .flatten()
            .collect();
        let mut result = json!({ "tasks": tasks });
        if let Some(next) = next {
            result["nextCursor"] = Value::String(next.to_string());
        }
        Ok(CustomResult(result))
    }

    /// Names, in the `_meta` of a request for the client, the task it is about (a tool
    /// call's) by the handle the client knows that task by, not the upstream's id.
    pub(super) fn relate(&self, meta: &mut serde_json::Map<String, Value>) {
        let Some(related) = meta
            .get_mut(RELATED_TASK)
            .and_then(|related| related.get_mut("taskId"))
        else {
            return;
        };
        if let Some(handle) = related.as_str().and_then(|id| self.relay.tasks.handle(id)) {
            *related = Value::String(handle);
        }
    }
}

/// The typed request `params` make for `asked` (its `task` aside), for the checks made of any
/// request for a client.
pub(super) fn typed(asked: TaskRequest, params: &Value) -> Result<ServerRequest, ErrorData> {
    let malformed = |error: serde_json::Error| invalid(format!("malformed params: {error}"));
    Ok(match asked {
        TaskRequest::Sampling => {
            let params: CreateMessageRequestParams =
                serde_json::from_value(params.clone()).map_err(malformed)?;
            ServerRequest::CreateMessageRequest(CreateMessageRequest::new(params))
        }
        TaskRequest::Elicitation => {
            let params: ElicitRequestParams =
                serde_json::from_value(params.clone()).map_err(malformed)?;
            ServerRequest::ElicitRequest(ElicitRequest::new(params))
        }
    })
}

/// `value`'s mentions of the client's task id `id` (its `taskId`, and the related task of its
/// `_meta`) as `handle`.
fn rename(value: &mut Value, id: &str, handle: &str) {
    let related = format!("/_meta/{}/taskId", RELATED_TASK.replace('/', "~1"));
    for pointer in ["/taskId", related.as_str()] {
        if let Some(named) = value.pointer_mut(pointer)
            && named.as_str() == Some(id)
        {
            *named = Value::String(handle.to_owned());
        }
    }
}

fn parse(answer: &str) -> Result<Value, ErrorData> {
    serde_json::from_str(answer).map_err(|error| {
        ErrorData::internal_error(format!("the client's answer is not JSON: {error}"), None)
    })
}

fn invalid(message: String) -> ErrorData {
    ErrorData::new(ErrorCode::INVALID_PARAMS, message, None)
}
