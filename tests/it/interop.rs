//! The official TypeScript and Python SDK clients, through Switchyard with two upstreams
//! (server-everything over stdio and the notes fixture over HTTP): each lists tools, calls a
//! tool, calls one with progress, reads a resource, gets a prompt and answers an elicitation.

use serde_json::{Value, json};

use crate::{
    deps,
    fixtures::notes::NotesServer,
    harness::{GatewayBuilder, TestGateway},
};

async fn two_upstreams() -> (NotesServer, TestGateway) {
    let notes = NotesServer::start().await;
    let everything = deps::node_packages()
        .join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let gw = GatewayBuilder::new()
        .upstream(
            "everything",
            &format!(
                "command = \"node\"\nargs = [{:?}, \"stdio\"]\nconnect_timeout_seconds = 30",
                everything
            ),
        )
        .http("notes", &notes.url())
        .start()
        .await;
    let health = gw.health().await;
    assert_eq!(health["status"], "ok", "{health}");
    (notes, gw)
}

fn spec() -> Value {
    json!({
        "echo": {"tool": "notes__echo", "args": {"text": "interop"}, "expect": "notes: interop"},
        "progress": {
            "tool": "everything__trigger-long-running-operation",
            "args": {"duration": 1, "steps": 3},
            "steps": 3
        },
        "elicitation": {"tool": "everything__trigger-elicitation-request", "expect": "Interop Tester"},
        "resource": {"prefix": "everything+"},
        "prompt": {"name": "everything__args-prompt", "args": {"city": "Paris", "state": "Ile-de-France"}}
    })
}

/// Runs a client script and checks that every step passed.
async fn run_client(command: &mut tokio::process::Command, which: &str) {
    let output = tokio::time::timeout(std::time::Duration::from_secs(120), command.output())
        .await
        .expect("the client finishes in time")
        .expect("the client runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let summary: Value = stdout
        .lines()
        .rev()
        .find_map(|line| serde_json::from_str(line).ok())
        .unwrap_or_else(|| {
            panic!(
                "{which}: no summary\n{stdout}\n{}",
                String::from_utf8_lossy(&output.stderr)
            )
        });
    let steps = summary["steps"].as_object().expect("steps");
    for step in [
        "connect",
        "list_tools",
        "call_tool",
        "call_tool_with_progress",
        "read_resource",
        "get_prompt",
        "answer_elicitation",
    ] {
        assert_eq!(steps[step]["ok"], true, "{which} {step}: {}", steps[step]);
    }
    assert!(output.status.success(), "{which}: {summary}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typescript_sdk_client() {
    let dir = deps::node_packages();
    let (_notes, gw) = two_upstreams().await;
    run_client(
        tokio::process::Command::new("node")
            .arg(dir.join("client.mjs"))
            .arg(gw.url())
            .arg(spec().to_string()),
        "TypeScript SDK",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_client() {
    let (python, client) = deps::python();
    deps::node_packages();
    let (_notes, gw) = two_upstreams().await;
    run_client(
        tokio::process::Command::new(python)
            .arg(client)
            .arg(gw.url())
            .arg(spec().to_string()),
        "Python SDK",
    )
    .await;
}
