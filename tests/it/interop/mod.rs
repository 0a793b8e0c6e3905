//! Real clients through the gateway. The suite (`suite`) compares what the official clients
//! get from six real servers directly and through the gateway, over every transport.
//!
//! Here, the official TypeScript and Python SDK clients, through Switchyard with two upstreams
//! (server-everything over stdio and the notes fixture over HTTP): each lists tools, calls a
//! tool, calls one with progress, reads a resource, gets a prompt and answers an elicitation.
//! The Python SDK's default client, which speaks 2026-07-28 to the gateway, does the same with
//! upstreams of an earlier era (answering their questions by retrying its calls), and every
//! kind of answer it can get is checked against the protocol's published types.

mod servers;
mod suite;

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
        "prompt": {"name": "everything__args-prompt", "args": {"city": "Paris", "state": "Ile-de-France"}},
        "sampling": {
            "tool": "everything__trigger-sampling-request", "args": {"prompt": "relayed"},
            "expect": "sampled by the client"
        }
    })
}

/// Checks that the sampling request a client was asked (`answer_sampling`'s `request`) is the
/// one server-everything writes: temperature 0.7 and no more than these fields (before, the
/// temperature arrived as 0.699999988079071, through a 32-bit float).
fn asked_as_written(steps: &serde_json::Map<String, Value>) {
    let asked = &steps["answer_sampling"]["request"];
    assert_eq!(asked["temperature"].to_string(), "0.7", "{asked}");
    let mut fields: Vec<_> = asked.as_object().unwrap().keys().collect();
    fields.sort();
    assert_eq!(
        fields,
        ["maxTokens", "messages", "systemPrompt", "temperature"],
        "{asked}"
    );
}

/// Runs a client script and checks that every step passed; the steps.
async fn run_client(
    command: &mut tokio::process::Command,
    which: &str,
) -> serde_json::Map<String, Value> {
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
    steps
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
    let steps = run_client(
        tokio::process::Command::new(python)
            .arg(client)
            .arg(gw.url())
            .arg(spec().to_string()),
        "Python SDK",
    )
    .await;
    asked_as_written(&steps);
}

/// The Python SDK's default client (`mcp.Client(url)`, 2026-07-28) through the gateway to
/// upstreams of the session era: each answer in the 2026-07-28 shape (before, every call failed
/// in the client: `resultType` missing).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_default_client_gets_answers_of_its_era_from_older_upstreams() {
    let (python, client) = deps::python();
    let modern = client.with_file_name("modern.py");
    let (_notes, gw) = two_upstreams().await;
    let spec = json!({
        "tool": {"name": "everything__echo", "args": {"message": "modern"}, "expect": "modern"},
        "resource": {"prefix": "everything+"},
        "prompt": {"name": "everything__args-prompt", "args": {"city": "Paris"}},
        "completion": {
            "prompt": "everything__completable-prompt", "argument": "department",
            "value": "En", "expect": "Engineering"
        },
        "elicitation": {"tool": "everything__trigger-elicitation-request", "expect": "Interop Tester"},
        "sampling": {
            "tool": "everything__trigger-sampling-request", "args": {"prompt": "bridged"},
            "expect": "sampled by the client"
        }
    });
    let (steps, success) = script_steps(
        tokio::process::Command::new(python)
            .arg(&modern)
            .arg(gw.url())
            .arg(spec.to_string()),
        "Python SDK (2026-07-28)",
    )
    .await;
    for step in [
        "shapes",
        "connect",
        "call_tool",
        "read_resource",
        "get_prompt",
        "complete",
        "answer_elicitation",
        "answer_sampling",
    ] {
        assert_eq!(steps[step]["ok"], true, "{step}: {}", steps[step]);
    }
    assert_eq!(steps["connect"]["protocol_version"], "2026-07-28");
    asked_as_written(&steps);
    assert!(success, "{steps:?}");
}
