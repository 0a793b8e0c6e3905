//! The official TypeScript and Python SDK clients, through Switchyard with two upstreams
//! (server-everything over stdio and the notes fixture over HTTP): each lists tools, calls a
//! tool, calls one with progress, reads a resource, gets a prompt and answers an elicitation.

use serde_json::{Value, json};

use crate::{
    deps,
    fixtures::notes::NotesServer,
    harness::{GatewayBuilder, TestGateway, script_steps},
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
    let (steps, success) = script_steps(command, which).await;
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
    assert!(success, "{which}: {steps:?}");
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
