//! Guardrails hold for results read later: a tool run as a task has its result screened when
//! the client fetches it (`tasks/result` for a 2025-11-25 client, the completed `tasks/get`
//! of a 2026-07-28 one), as the same call answered at once would be. Running a tool as a task
//! is no way around a guardrail.

use std::time::Duration;

use serde_json::{Value, json};

use super::{TOOL, gateway_with, modern, tasks_client};
use crate::fixtures::everything::{Everything, Mode};

const GUARDRAILS: &str = r#"
[[guardrail]]
name = "personal"
upstreams = ["ev"]
detect = ["email"]
action = "redact"

[[guardrail]]
name = "no-keys"
tools = ["ev:simulate-*"]
detect = ["aws_access_key"]
action = "block"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tasks_result_is_screened_as_an_answer_at_once_would_be() {
    let everything = Everything::start(Mode::StreamableHttp).await;
    let gw = gateway_with(&everything, &[], GUARDRAILS).await;

    // 2025-11-25: the TypeScript SDK's tasks client fetches the result with tasks/result.
    let steps = tasks_client(
        &gw.url(),
        json!({"tool": TOOL, "args": {"topic": "mail ada@example.org"}, "expect": "mail [REDACTED:email]"}),
    )
    .await;
    for (name, step) in &steps {
        assert_eq!(step["ok"], true, "{name}: {step}");
        assert!(
            !step.to_string().contains("ada@example.org"),
            "{name}: {step}"
        );
    }

    // 2026-07-28: the result comes inlined in the completed tasks/get.
    let url = gw.url();
    let topic = "key AKIAIOSFODNN7EXAMPLE";
    let call = json!({"name": TOOL, "arguments": {"topic": topic}});
    let created = modern(&url, "tools/call", TOOL, call.clone(), true).await;
    let task = created["result"]["taskId"].as_str().unwrap().to_owned();
    let mut done = Value::Null;
    for _ in 0..60 {
        done = modern(&url, "tasks/get", &task, json!({"taskId": task}), true).await;
        if done["result"]["status"] != "working" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let result = &done["result"]["result"];
    assert_eq!(result["isError"], true, "{done}");
    let shown = result["content"][0]["text"].as_str().unwrap_or_default();
    assert!(
        shown.contains("withheld")
            && shown.contains("aws_access_key ×")
            && shown.contains("no-keys"),
        "{done}"
    );
    assert!(!done.to_string().contains("AKIAIOSFODNN7EXAMPLE"), "{done}");

    // The same call answered at once (the client does not declare tasks) is withheld alike.
    let plain = modern(&url, "tools/call", TOOL, call, false).await;
    assert_eq!(plain["result"]["isError"], true, "{plain}");
    assert!(
        !plain.to_string().contains("AKIAIOSFODNN7EXAMPLE"),
        "{plain}"
    );
}
