//! A server that numbers its tasks `t-1`, `t-2`, … from each start, as many servers do, so
//! that its task ids come round again after a restart. Test support for Switchyard's task
//! handles, which must never let an old handle reach a new task that has the old one's id.
//!
//! It speaks 2026-07-28 with the tasks extension, statelessly (no upstream sessions: its task
//! ids are one namespace for every caller), at `/mcp`. Its one tool, `job`, runs as a task for
//! `seconds` and ends with `job LABEL done`; `restart` forgets every task and counts from 1
//! again, as a new process of the server would.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use rmcp::{
    ErrorData, RoleServer, ServerHandler,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ContentBlock,
        CreateTaskResult, GetTaskParams, GetTaskResult, Implementation, ListToolsResult,
        PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    },
    service::RequestContext,
    task_manager::{TaskExit, TaskManager, TaskOptions},
    transport::{
        StreamableHttpServerConfig, StreamableHttpService,
        streamable_http_server::session::local::LocalSessionManager,
    },
};
use serde_json::{Value, json};

const JOB: &str = "job";

/// One run of the server: its tasks under their numbers.
struct Run {
    manager: TaskManager,
    next: u64,
    /// `t-N` → the task manager's own id.
    ids: HashMap<String, String>,
}

impl Run {
    fn new() -> Self {
        Self {
            manager: TaskManager::new(),
            next: 1,
            ids: HashMap::new(),
        }
    }
}

/// The server, across its restarts.
#[derive(Clone)]
pub struct NumberedTasks {
    run: Arc<Mutex<Run>>,
}

impl Default for NumberedTasks {
    fn default() -> Self {
        Self::new()
    }
}

impl NumberedTasks {
    pub fn new() -> Self {
        Self {
            run: Arc::new(Mutex::new(Run::new())),
        }
    }

    /// Forgets every task (their work stops) and numbers from `t-1` again.
    pub fn restart(&self) {
        let mut run = self
            .run
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        run.manager.shutdown();
        *run = Run::new();
    }

    /// The server as an HTTP application: stateless streamable HTTP at `/mcp`, JSON answers.
    pub fn app(&self) -> axum::Router {
        let server = self.clone();
        let service = StreamableHttpService::new(
            move || Ok(server.clone()),
            Arc::new(LocalSessionManager::default()),
            StreamableHttpServerConfig::default()
                .with_legacy_session_mode(false)
                .with_json_response(true),
        );
        axum::Router::new().nest_service("/mcp", service)
    }

    /// The task manager's id of task `number`, and the manager, in this run.
    fn find(&self, number: &str) -> Result<(TaskManager, String), ErrorData> {
        let run = self
            .run
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let id = run
            .ids
            .get(number)
            .cloned()
            .ok_or_else(|| ErrorData::invalid_params(format!("no task {number}"), None))?;
        Ok((run.manager.clone(), id))
    }
}

fn text(params: &CallToolRequestParams, key: &str) -> Option<Value> {
    params.arguments.as_ref()?.get(key).cloned()
}

impl ServerHandler for NumberedTasks {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tasks()
                .build(),
        )
        .with_server_info(Implementation::new(
            "numbered-tasks",
            env!("CARGO_PKG_VERSION"),
        ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let Value::Object(schema) = json!({"type": "object", "properties": {
            "label": {"type": "string"}, "seconds": {"type": "number"}
        }}) else {
            unreachable!()
        };
        Ok(ListToolsResult::with_all_items(vec![Tool::new(
            JOB,
            "Works for `seconds`, as a task, then says `job LABEL done`",
            schema,
        )]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let label = text(&request, "label")
            .and_then(|label| label.as_str().map(str::to_owned))
            .unwrap_or_default();
        let seconds = text(&request, "seconds")
            .and_then(|seconds| seconds.as_f64())
            .unwrap_or(0.0);
        let done = CallToolResult::success(vec![ContentBlock::text(format!("job {label} done"))]);
        let declared = context
            .client_capabilities()
            .is_some_and(|capabilities| capabilities.supports_tasks());
        if !declared {
            return Ok(done.into());
        }
        let mut run = self
            .run
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut task = run.manager.spawn(TaskOptions::new(), move |context| {
            Box::pin(async move {
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs_f64(seconds.max(0.0))) => Ok(done),
                    _ = context.cancelled() => Err(TaskExit::Cancelled),
                }
            })
        });
        let number = format!("t-{}", run.next);
        run.next += 1;
        run.ids.insert(number.clone(), task.task_id.clone());
        task.task_id = number;
        Ok(CallToolResponse::Task(CreateTaskResult::new(task)))
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        let (manager, id) = self.find(&request.task_id)?;
        let mut task = manager.get_task(&id)?;
        task.task.task_id = request.task_id;
        Ok(GetTaskResult::new(task))
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let (manager, id) = self.find(&request.task_id)?;
        manager.cancel_task(&id)
    }
}
