//! The tasks-extension tools of the conformance fixture (2026-07-28, SEP-2663): tools that run
//! as tasks for clients that declared the extension, on rmcp's `TaskManager`, which answers
//! `tasks/get`, `tasks/update` and `tasks/cancel`. A client that did not declare it gets the
//! optional ones run at once and a `-32021` error from the required ones.

use std::time::Duration;

use rmcp::{
    ErrorData,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ContentBlock,
        CreateTaskResult, InputRequests, InputRequiredResult, Tool,
    },
    task_manager::{TaskContext, TaskExit, TaskFuture, TaskManager, TaskOptions},
};
use serde_json::Value;

use crate::mrtr::{accepted_name, ask_confirmation, ask_name, confirmed};

const GREET: &str = "greet";
const SLOW: &str = "slow_compute";
const FAILING: &str = "failing_job";
const PROTOCOL_ERROR: &str = "protocol_error_job";
const CONFIRM: &str = "confirm_delete";
const MULTI: &str = "multi_input";
const WITH_TASK: &str = "test_tool_with_task";

/// Each tool: name, description, input schema, and whether it must run as a task.
const TOOLS: [(&str, &str, &str, bool); 7] = [
    (
        GREET,
        "Greets at once (never a task)",
        r#"{"type":"object","properties":{"name":{"type":"string"}}}"#,
        false,
    ),
    (
        SLOW,
        "Sleeps `seconds`, as a task when it can",
        r#"{"type":"object","properties":{"seconds":{"type":"number"},"label":{"type":"string"}}}"#,
        false,
    ),
    (
        FAILING,
        "A task whose tool reports a failure after a second",
        r#"{"type":"object","properties":{}}"#,
        true,
    ),
    (
        PROTOCOL_ERROR,
        "A task that fails with a protocol error",
        r#"{"type":"object","properties":{}}"#,
        false,
    ),
    (
        CONFIRM,
        "A task that asks for confirmation before it deletes",
        r#"{"type":"object","properties":{"filename":{"type":"string"}}}"#,
        true,
    ),
    (
        MULTI,
        "A task that asks two questions at once",
        r#"{"type":"object","properties":{}}"#,
        true,
    ),
    (
        WITH_TASK,
        "Asks for a name, then greets as a task",
        r#"{"type":"object","properties":{}}"#,
        true,
    ),
];

pub fn is_task_tool(name: &str) -> bool {
    TOOLS.iter().any(|(tool, ..)| *tool == name)
}

pub fn tools() -> Vec<Tool> {
    TOOLS
        .iter()
        .map(|(name, description, schema, _)| {
            let Ok(Value::Object(schema)) = serde_json::from_str(schema) else {
                unreachable!("the schemas are objects")
            };
            Tool::new(*name, *description, schema)
        })
        .collect()
}

fn text(text: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(text)])
}

fn number(params: &CallToolRequestParams, key: &str) -> f64 {
    params
        .arguments
        .as_ref()
        .and_then(|arguments| arguments.get(key))
        .and_then(Value::as_f64)
        .unwrap_or(0.0)
}

fn string(params: &CallToolRequestParams, key: &str) -> String {
    params
        .arguments
        .as_ref()
        .and_then(|arguments| arguments.get(key))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// Sleeps `seconds`, or ends as cancelled if the task is cancelled first.
async fn work(context: &TaskContext, seconds: f64) -> Result<(), TaskExit> {
    tokio::select! {
        _ = tokio::time::sleep(Duration::from_secs_f64(seconds.max(0.0))) => Ok(()),
        _ = context.cancelled() => Err(TaskExit::Cancelled),
    }
}

/// Calls task tool `params.name` for a client that can (`capabilities`) or cannot take a task.
pub async fn call(
    manager: &TaskManager,
    params: &CallToolRequestParams,
    capabilities: &ClientCapabilities,
) -> Result<CallToolResponse, ErrorData> {
    let name = params.name.as_ref();
    let required = TOOLS
        .iter()
        .any(|(tool, .., required)| *tool == name && *required);
    let declared = capabilities.supports_tasks();
    if name == GREET {
        return Ok(text(format!("Hello, {}!", string(params, "name"))).into());
    }
    if !declared {
        if required {
            return Err(ErrorData::missing_required_client_capability(
                ClientCapabilities::builder().enable_tasks().build(),
            ));
        }
        return match name {
            SLOW => {
                tokio::time::sleep(Duration::from_secs_f64(number(params, "seconds").max(0.0)))
                    .await;
                Ok(text(format!("computed {}", string(params, "label"))).into())
            }
            _ => Err(ErrorData::internal_error("the job crashed", None)),
        };
    }
    let spawn = |make: Box<dyn FnOnce(TaskContext) -> TaskFuture>| {
        let task = manager.spawn(TaskOptions::new().with_poll_interval_ms(200), make);
        Ok(CallToolResponse::Task(CreateTaskResult::new(task)))
    };
    match name {
        SLOW => {
            let (seconds, label) = (number(params, "seconds"), string(params, "label"));
            spawn(Box::new(move |context| {
                Box::pin(async move {
                    work(&context, seconds).await?;
                    Ok(text(format!("computed {label}")))
                })
            }))
        }
        FAILING => spawn(Box::new(|context| {
            Box::pin(async move {
                work(&context, 1.0).await?;
                Ok(CallToolResult::error(vec![ContentBlock::text(
                    "the job failed",
                )]))
            })
        })),
        PROTOCOL_ERROR => spawn(Box::new(|context| {
            Box::pin(async move {
                work(&context, 0.3).await?;
                Err(TaskExit::Error(ErrorData::internal_error(
                    "the job crashed",
                    None,
                )))
            })
        })),
        CONFIRM => {
            let filename = string(params, "filename");
            spawn(Box::new(move |context| {
                Box::pin(async move {
                    let answer = context.request_input("confirm", ask_confirmation()).await?;
                    Ok(match confirmed(&answer) {
                        Some(true) => text(format!("deleted {filename}")),
                        _ => text(format!("kept {filename}")),
                    })
                })
            }))
        }
        MULTI => spawn(Box::new(|context| {
            Box::pin(async move {
                let (name, confirmation) = tokio::join!(
                    context.request_input("name", ask_name("What is your name?")),
                    context.request_input("confirm", ask_confirmation()),
                );
                let (name, confirmation) = (name?, confirmation?);
                Ok(text(format!(
                    "name: {}, confirmed: {}",
                    accepted_name(&name).unwrap_or_default(),
                    confirmed(&confirmation).unwrap_or(false)
                )))
            })
        })),
        WITH_TASK => {
            let answer = params
                .input_responses
                .as_ref()
                .and_then(|responses| responses.get("user_name"))
                .and_then(accepted_name);
            let Some(user) = answer else {
                return Ok(CallToolResponse::InputRequired(InputRequiredResult::new(
                    Some(InputRequests::from([(
                        "user_name".to_owned(),
                        ask_name("What is your name?"),
                    )])),
                    None,
                )));
            };
            spawn(Box::new(move |context| {
                Box::pin(async move {
                    work(&context, 0.3).await?;
                    Ok(text(format!("Hello, {user}! (from a task)")))
                })
            }))
        }
        other => Err(ErrorData::invalid_params(
            format!("unknown tool `{other}`"),
            None,
        )),
    }
}
