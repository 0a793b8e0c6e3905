//! The interop suite: six real servers (see `servers`), each over stdio, streamable HTTP and
//! legacy SSE, listed and called by the official clients (the Python SDK's in both of its
//! modes, the TypeScript SDK's, and the MCP Inspector's CLI) directly and through the gateway.
//! What a client gets through the gateway is what it gets directly, but for what is documented
//! to differ: tool names carry the upstream's prefix, and a 2026-07-28 client's results say
//! their `resultType`.

use std::path::Path;

use serde_json::{Value, json};

use super::servers::{Server, Transport, six};
use crate::{deps, harness::GatewayBuilder};

/// The `_meta` key of the server that made a result.
const SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

/// Runs a client script, `program` with `args`: the JSON it printed last.
async fn printed(program: &Path, args: &[String], home: &Path) -> Value {
    let output = tokio::time::timeout(
        std::time::Duration::from_secs(180),
        tokio::process::Command::new(program)
            .args(args)
            .env("HOME", home)
            .output(),
    )
    .await
    .expect("the client finishes in time")
    .expect("the client runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    serde_json::from_str(stdout.trim())
        .or_else(|_| {
            (stdout.lines().rev())
                .find_map(|line| serde_json::from_str(line).ok())
                .ok_or(())
        })
        .unwrap_or_else(|_| {
            panic!(
                "{} printed no JSON:\n{stdout}\n{}",
                program.display(),
                String::from_utf8_lossy(&output.stderr)
            )
        })
}

/// `target` (as `Instance::target` gives it) with a label and the call to make.
fn labelled(label: &str, target: &Value, tool: &str, arguments: &Value) -> Value {
    let mut target = target.clone();
    target["label"] = label.into();
    target["call"] = json!({"name": tool, "arguments": arguments});
    target
}

/// What a client got directly or (`through`) through the gateway, made comparable: the tools
/// of `upstream` under their own names, and results without `resultType`.
fn comparable(got: &Value, upstream: &str, through: bool) -> Value {
    assert!(got.get("error").is_none(), "{got}");
    let prefix = format!("{upstream}__");
    let tools: Vec<Value> = (got["tools"].as_array().expect("tools").iter())
        .filter_map(|tool| {
            let mut tool = tool.clone();
            if through {
                let name = tool["name"].as_str()?.strip_prefix(&prefix)?.to_owned();
                tool["name"] = name.into();
            }
            Some(tool)
        })
        .collect();
    // A 2026-07-28 result says its type (the SDKs' models give the others the default one),
    // and may name the server that made it: through the gateway, the gateway.
    let mut call = got["call"].clone();
    if let Some(call) = call.as_object_mut() {
        call.remove("resultType");
        if through && let Some(meta) = call.get_mut("_meta").and_then(Value::as_object_mut) {
            if let Some(server) = meta.remove(SERVER_INFO) {
                assert_eq!(server["name"], "switchyard", "{got}");
            }
            if meta.is_empty() {
                call.remove("_meta");
            }
        }
    }
    json!({"tools": tools, "call": call})
}

/// Fails with where `through` differs from `direct` (JSON pointers and both values), if it
/// does.
fn same(through: &Value, direct: &Value, what: &str) {
    let mut differences = Vec::new();
    differ("", through, direct, &mut differences);
    assert!(
        differences.is_empty(),
        "{what}: through the gateway differs from directly:\n{}",
        differences.join("\n")
    );
}

fn differ(at: &str, through: &Value, direct: &Value, out: &mut Vec<String>) {
    match (through, direct) {
        (Value::Object(a), Value::Object(b)) => {
            for key in a.keys().chain(b.keys().filter(|key| !a.contains_key(*key))) {
                let (x, y) = (
                    a.get(key).unwrap_or(&Value::Null),
                    b.get(key).unwrap_or(&Value::Null),
                );
                differ(&format!("{at}/{key}"), x, y, out);
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (n, (x, y)) in a.iter().zip(b).enumerate() {
                differ(&format!("{at}/{n}"), x, y, out);
            }
        }
        (a, b) if a != b => out.push(format!("{at}: {a} (through) != {b} (directly)")),
        _ => {}
    }
}

/// The Inspector CLI's answer to a call of `tool` with `arguments`, on `target`.
async fn inspector(target: &Value, tool: &str, arguments: &Value, home: &Path) -> Value {
    let cli = deps::node_packages()
        .join("node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js");
    let mut args = vec![cli.display().to_string(), "--cli".into()];
    match target["transport"].as_str() {
        Some("stdio") => {
            for (name, value) in target["env"].as_object().into_iter().flatten() {
                args.extend(["-e".into(), format!("{name}={}", value.as_str().unwrap())]);
            }
            args.push(target["command"].as_str().unwrap().into());
            args.extend(
                (target["args"].as_array().unwrap().iter()).map(|a| a.as_str().unwrap().to_owned()),
            );
        }
        Some(transport) => {
            let transport = if transport == "sse" { "sse" } else { "http" };
            args.extend([
                target["url"].as_str().unwrap().into(),
                "--transport".into(),
                transport.into(),
            ]);
        }
        None => panic!("no transport in {target}"),
    }
    args.extend([
        "--method".into(),
        "tools/call".into(),
        "--tool-name".into(),
        tool.into(),
    ]);
    for (name, value) in arguments.as_object().unwrap() {
        let value = match value {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        };
        args.extend(["--tool-arg".into(), format!("{name}={value}")]);
    }
    printed(&deps::node22(), &args, home).await
}

/// `server` over each transport, directly and through the gateway, with each client.
async fn through_as_directly(pick: &str) {
    let scratch = tempfile::tempdir().unwrap();
    let home = scratch.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let servers = six(scratch.path());
    let server: &Server = servers.iter().find(|s| s.name == pick).unwrap();
    let (python, _) = deps::python();
    let compare_py = deps::python().1.with_file_name("compare.py");
    let compare_js = deps::node_packages().join("compare.mjs");
    let (tool, arguments) = &server.call;
    let prefixed = format!("{}__{tool}", server.name);
    for transport in Transport::ALL {
        let what = format!("{} over {}", server.name, transport.key());
        let direct = server.start(transport).await;
        let behind = server.start(transport).await;
        let gw = GatewayBuilder::new()
            .upstream(server.name, &behind.upstream)
            .start()
            .await;
        let health = gw.health().await;
        assert_eq!(health["status"], "ok", "{what}: {health}");
        let gateway = json!({"transport": "http", "url": gw.url()});
        let targets = [
            labelled("direct", &direct.target, tool, arguments),
            labelled("gateway", &gateway, &prefixed, arguments),
        ];

        let legacy = json!({"client": "legacy", "targets": targets}).to_string();
        let py = printed(python, &[compare_py.display().to_string(), legacy], &home).await;
        let direct_py = comparable(&py["direct"], server.name, false);
        let through_py = comparable(&py["gateway"], server.name, true);
        same(
            &through_py,
            &direct_py,
            &format!("{what}: the Python SDK's session client"),
        );

        let ts_spec = json!({"targets": targets}).to_string();
        let ts = printed(
            &deps::node22(),
            &[compare_js.display().to_string(), ts_spec],
            &home,
        )
        .await;
        let (direct_ts, through_ts) = (
            comparable(&ts["direct"], server.name, false),
            comparable(&ts["gateway"], server.name, true),
        );
        same(
            &through_ts,
            &direct_ts,
            &format!("{what}: the TypeScript SDK's client"),
        );

        let direct_cli = inspector(&direct.target, tool, arguments, &home).await;
        let through_cli = inspector(&gateway, &prefixed, arguments, &home).await;
        same(
            &through_cli,
            &direct_cli,
            &format!("{what}: the Inspector's CLI"),
        );

        // The default client speaks 2026-07-28 to the gateway: the same tools and results.
        let modern = json!({"client": "modern", "targets": [targets[1].clone()]}).to_string();
        let py = printed(python, &[compare_py.display().to_string(), modern], &home).await;
        let through_modern = comparable(&py["gateway"], server.name, true);
        let modern_client = format!("{what}: the Python SDK's default client");
        same(
            &through_modern["tools"],
            &direct_py["tools"],
            &modern_client,
        );
        // One process answers every client over SSE, and a stateful server counts calls.
        if !(server.stateful && transport == Transport::Sse) {
            same(&through_modern["call"], &direct_py["call"], &modern_client);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_everything_through_the_gateway_as_directly() {
    through_as_directly("everything").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_filesystem_through_the_gateway_as_directly() {
    through_as_directly("filesystem").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_memory_through_the_gateway_as_directly() {
    through_as_directly("memory").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_sequential_thinking_through_the_gateway_as_directly() {
    through_as_directly("thinking").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_server_time_through_the_gateway_as_directly() {
    through_as_directly("time").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_server_git_through_the_gateway_as_directly() {
    through_as_directly("git").await;
}
