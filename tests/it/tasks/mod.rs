//! Tasks through the gateway, with the official server-everything (over streamable HTTP) and
//! its task-only tool `simulate-research-query`: a tasks-capable TypeScript SDK client creates,
//! polls, fetches, lists and cancels tasks and hears how they go, and no other user can use its
//! task ids; a client that does not speak tasks gets the research in one call, with progress,
//! and cancelling that call cancels the task upstream; a task created through one replica is
//! finished through another. Over stdio, tasks work as over HTTP.

use std::time::Duration;

use serde_json::{Value, json};

use crate::{
    deps,
    fixtures::{
        everything::{self, Everything, Mode},
        redis::RedisServer,
    },
    harness::{
        GatewayBuilder, Recorder, TestGateway, api_key, api_keys_section, script_steps, text,
    },
    replicas::cluster::{Cluster, post, raw_session},
};

const TOOL: &str = "ev__simulate-research-query";

/// Runs the TypeScript tasks client against `url` with `spec`: its steps.
async fn tasks_client(url: &str, spec: Value) -> serde_json::Map<String, Value> {
    let script = deps::node_packages().join("tasks-client.mjs");
    let mut command = tokio::process::Command::new(deps::node22());
    command.arg(script).arg(url).arg(spec.to_string());
    script_steps(&mut command, "the tasks client").await.0
}

fn bearer(user: &str) -> Value {
    json!({ "authorization": format!("Bearer {}", api_key(user)) })
}

async fn gateway_for(everything: &Everything, users: &[&str]) -> TestGateway {
    gateway_with(everything, users, "").await
}

/// `gateway_for`, with `section` in its configuration too.
async fn gateway_with(everything: &Everything, users: &[&str], section: &str) -> TestGateway {
    let mut builder = GatewayBuilder::new().section(section);
    if !users.is_empty() {
        builder = builder.section(&api_keys_section(users));
    }
    builder
        .upstream("ev", &format!("url = {:?}", everything.url()))
        .start()
        .await
}

/// The value of the `/metrics` line that starts with `prefix`.
async fn metric(gw: &TestGateway, prefix: &str) -> f64 {
    let scrape = gw.metrics_text().await;
    scrape
        .lines()
        .find(|line| line.starts_with(prefix))
        .and_then(|line| line.rsplit(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no `{prefix}` in:\n{scrape}"))
}

/// Alice's client runs a task from start to end, and cancels another; Bob cannot ask after
/// her task: its id is as unknown to him as a made-up one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tasks_client_runs_a_task_only_tool_and_no_one_else_can_touch_its_tasks() {
    let everything = Everything::start(Mode::StreamableHttp).await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.log");
    let audit = format!("[audit]\nfile = {:?}", log.display().to_string());
    let gw = gateway_with(&everything, &["alice", "bob"], &audit).await;
    let steps = tasks_client(
        &gw.url(),
        json!({"tool": TOOL, "args": {"topic": "tides"}, "expect": "Research Report: tides",
               "headers": bearer("alice")}),
    )
    .await;
    for (name, step) in &steps {
        assert_eq!(step["ok"], true, "{name}: {step}");
    }
    for step in [
        "capabilities",
        "list_tools",
        "create",
        "poll",
        "result",
        "list",
        "cancel",
        "notifications",
    ] {
        assert!(steps.contains_key(step), "{step} ran: {steps:?}");
    }
    let seen = steps["poll"]["seen"].as_array().unwrap();
    assert!(seen.len() >= 2, "the status moved on: {seen:?}");
    assert_eq!(steps["result"]["related"], true, "{}", steps["result"]);
    let task = steps["task_id"]["taskId"].as_str().unwrap().to_owned();

    let probe = |user: &'static str, id: String| {
        let url = gw.url();
        async move {
            let steps = tasks_client(&url, json!({"probe": id, "headers": bearer(user)})).await;
            steps["probe"].clone()
        }
    };
    let theirs = probe("bob", task.clone()).await;
    let made_up = probe("bob", "made-up-task".into()).await;
    assert_eq!(theirs["refused"], true, "{theirs}");
    assert_eq!(theirs["code"], -32602, "{theirs}");
    assert_eq!(
        theirs["message"], made_up["message"],
        "another user's task reads as unknown"
    );
    assert_eq!(probe("alice", task).await["refused"], false);

    let counted = |event: &'static str| {
        let gw = &gw;
        async move {
            metric(
                gw,
                &format!(r#"switchyard_tasks_total{{event="{event}",upstream="ev"}}"#),
            )
            .await
        }
    };
    assert_eq!(counted("created").await, 2.0);
    assert_eq!(counted("completed").await, 1.0);
    assert_eq!(counted("cancelled").await, 1.0);

    // The audit log has each task's creation and how it ended, under alice's name.
    let mut records: Vec<Value> = Vec::new();
    for _ in 0..50 {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        records = text
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        if records.iter().any(|r| r["kind"] == "tasks/cancel") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let of = |kind: &str, outcome: &str| {
        (records.iter())
            .filter(|r| r["kind"] == kind && r["outcome"] == outcome)
            .count()
    };
    assert_eq!(of("tools/call", "task_created"), 2, "{records:#?}");
    assert_eq!(of("tasks/result", "ok"), 1, "{records:#?}");
    assert_eq!(of("tasks/cancel", "cancelled"), 1, "{records:#?}");
    let created = (records.iter())
        .find(|r| r["outcome"] == "task_created")
        .unwrap();
    assert_eq!(created["principal"], "user:key:alice");
    assert_eq!(created["upstream"], "ev");
    assert!(created["detail"].as_str().is_some_and(|id| !id.is_empty()));
}

/// server-everything over stdio: its task-only tool is listed with `execution`, runs as a task
/// for a tasks client (created, polled, fetched, listed, cancelled, heard of), and as one call
/// for a client without tasks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_run_over_stdio_as_over_http() {
    let gw = GatewayBuilder::new()
        .upstream("ev", &everything::stdio_upstream())
        .start()
        .await;
    let steps = tasks_client(
        &gw.url(),
        json!({"tool": TOOL, "args": {"topic": "pipes"}, "expect": "Research Report: pipes"}),
    )
    .await;
    for (name, step) in &steps {
        assert_eq!(step["ok"], true, "{name}: {step}");
    }
    assert!(steps.contains_key("notifications"), "{steps:?}");

    let recorder = Recorder::plain("no-tasks");
    let client = recorder.clone().connect(&gw.url()).await;
    let result = crate::harness::call(&client, TOOL, json!({"topic": "streams"}))
        .await
        .expect("the call is answered");
    assert!(
        text(&result).contains("Research Report: streams"),
        "{}",
        text(&result)
    );
    assert!(recorder.progress_reaches(1).await, "progress on the way");
    client.cancel().await.unwrap();
}

/// A 2026-07-28 request: its lifecycle `_meta` (declaring the tasks extension if `tasks`) and
/// its SEP-2243 headers; the answer's message.
async fn modern(url: &str, method: &str, name: &str, params: Value, tasks: bool) -> Value {
    modern_as(url, None, method, name, params, tasks).await
}

/// `modern`, as `user` (with their API key) if one is given.
async fn modern_as(
    url: &str,
    user: Option<&str>,
    method: &str,
    name: &str,
    mut params: Value,
    tasks: bool,
) -> Value {
    let extensions = if tasks {
        json!({"io.modelcontextprotocol/tasks": {}})
    } else {
        json!({})
    };
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"extensions": extensions},
        "io.modelcontextprotocol/clientInfo": {"name": "modern-test", "version": "1"}
    });
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let mut request = reqwest::Client::new().post(url);
    if let Some(user) = user {
        request = request.bearer_auth(api_key(user));
    }
    let response = request
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method)
        .header("mcp-name", name)
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    data(&response.text().await.unwrap())
}

/// A 2026-07-28 client that declared the tasks extension gets the tasks of a 2025-11-25
/// upstream in its own era's shape: a `CreateTaskResult`, `tasks/get` with the result inlined
/// once it ended, `tasks/cancel` acknowledged; `tasks/result` and `tasks/list` are not of its
/// era. One that did not declare it gets the research in one call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2026_client_gets_a_2025_upstreams_tasks_in_its_own_era() {
    let everything = Everything::start(Mode::StreamableHttp).await;
    let gw = gateway_for(&everything, &[]).await;
    let url = gw.url();
    let call = json!({"name": TOOL, "arguments": {"topic": "eras"}});
    let created = modern(&url, "tools/call", TOOL, call.clone(), true).await;
    let result = &created["result"];
    assert_eq!(result["resultType"], "task", "{created}");
    assert!(
        result.get("task").is_none() && result.get("ttl").is_none(),
        "{created}"
    );
    assert!(
        result["ttlMs"].is_u64() && result["pollIntervalMs"].is_u64(),
        "{created}"
    );
    let task = result["taskId"].as_str().unwrap().to_owned();

    let mut last = Value::Null;
    for _ in 0..60 {
        last = modern(&url, "tasks/get", &task, json!({"taskId": task}), true).await;
        if last["result"]["status"] == "completed" {
            break;
        }
        assert_eq!(last["result"]["status"], "working", "{last}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let done = &last["result"];
    assert_eq!(done["status"], "completed", "{last}");
    assert_eq!(done["resultType"], "complete");
    assert_eq!(done["taskId"], task.as_str());
    let report = done["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(report.contains("Research Report: eras"), "{last}");
    assert!(done["result"].get("_meta").is_none(), "{last}");

    let other = modern(&url, "tools/call", TOOL, call.clone(), true).await;
    let other = other["result"]["taskId"].as_str().unwrap().to_owned();
    let ack = modern(&url, "tasks/cancel", &other, json!({"taskId": other}), true).await;
    assert_eq!(ack["result"], json!({"resultType": "complete"}), "{ack}");
    let cancelled = modern(&url, "tasks/get", &other, json!({"taskId": other}), true).await;
    assert_eq!(cancelled["result"]["status"], "cancelled", "{cancelled}");

    let listed = modern(&url, "tasks/list", "", json!({}), true).await;
    assert_eq!(listed["error"]["code"], -32601, "{listed}");
    let undeclared = modern(&url, "tasks/get", &task, json!({"taskId": task}), false).await;
    assert_eq!(undeclared["error"]["code"], -32021, "{undeclared}");
    let plain = modern(&url, "tools/call", TOOL, call, false).await;
    let text = plain["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("Research Report: eras"), "{plain}");
}

/// A caller may have 64 tasks running through one upstream connection: the next task-creating
/// call is refused with a clear error (and creates nothing upstream); once one ends, there is
/// room again. The 64 are made at once: a task of this tool ends after about 4 s, and made one
/// after another on a loaded machine, the first could end before the last is made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_per_caller_are_bounded() {
    let everything = Everything::start(Mode::StreamableHttp).await;
    let gw = gateway_for(&everything, &[]).await;
    let url = gw.url();
    let session = raw_session(&url).await;
    let create = |id: u64| {
        let (url, session) = (url.clone(), session.clone());
        async move {
            let (_, body) = post(
                &url,
                Some(&session),
                json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
                    "name": TOOL, "arguments": {"topic": "flood"}, "task": {"ttl": 60000}}}),
            )
            .await;
            data(&body)
        }
    };
    let created = futures::future::join_all((0..64).map(&create)).await;
    let tasks: Vec<String> = (created.iter().enumerate())
        .map(|(id, created)| {
            let task = created["result"]["task"]["taskId"].as_str();
            task.unwrap_or_else(|| panic!("task {id}: {created}"))
                .to_owned()
        })
        .collect();
    let refused = create(64).await;
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("too many tasks"), "{refused}");
    assert_eq!(
        metric(
            &gw,
            r#"switchyard_tasks_total{event="created",upstream="ev"}"#
        )
        .await,
        64.0
    );

    let (_, body) = post(
        &url,
        Some(&session),
        json!({"jsonrpc": "2.0", "id": 100, "method": "tasks/cancel",
               "params": {"taskId": tasks[0]}}),
    )
    .await;
    assert_eq!(data(&body)["result"]["status"], "cancelled", "{body}");
    assert!(create(101).await["result"]["task"]["taskId"].is_string());
}

/// A client that does not speak tasks calls the task-only tool plainly: one call that returns
/// the research, with the task's progress on the way. Cancelling such a call cancels the
/// task upstream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_without_tasks_gets_the_result_in_one_call() {
    let everything = Everything::start(Mode::StreamableHttp).await;
    let gw = gateway_for(&everything, &[]).await;
    let recorder = Recorder::plain("no-tasks");
    let client = recorder.clone().connect(&gw.url()).await;
    let result = crate::harness::call(&client, TOOL, json!({"topic": "glaciers"}))
        .await
        .expect("the call is answered");
    assert!(
        text(&result).contains("Research Report: glaciers"),
        "{}",
        text(&result)
    );
    assert!(
        result.meta.is_none(),
        "no upstream task id: {:?}",
        result.meta
    );
    assert!(recorder.progress_reaches(2).await, "progress on the way");
    let progress = recorder.seen().progress.clone();
    assert!(
        progress
            .iter()
            .any(|(_, _, message)| message.as_deref() == Some("Generating report...")),
        "{progress:?}"
    );

    client.cancel().await.unwrap();

    // A call cancelled on the way: its task ends upstream as cancelled, and the caller's task
    // list (which it may ask for, though it never created a task itself) says so.
    let url = gw.url();
    let session = raw_session(&url).await;
    let call = {
        let (url, session) = (url.clone(), session.clone());
        tokio::spawn(async move {
            post(
                &url,
                Some(&session),
                json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                       "params": {"name": TOOL, "arguments": {"topic": "cancelled"}}}),
            )
            .await
        })
    };
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (status, _) = post(
        &url,
        Some(&session),
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
               "params": {"requestId": 7, "reason": "changed my mind"}}),
    )
    .await;
    assert_eq!(status, 202);
    let _ = call.await;
    let mut statuses = Vec::new();
    for _ in 0..40 {
        statuses = listed_statuses(&url, &session).await;
        if statuses.iter().any(|status| status == "cancelled") {
            return;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    panic!("the task was not cancelled upstream: {statuses:?}");
}

/// What `tasks/list` in `session` says of the caller's tasks: their statuses.
async fn listed_statuses(url: &str, session: &str) -> Vec<String> {
    let (_, body) = post(
        url,
        Some(session),
        json!({"jsonrpc": "2.0", "id": 5, "method": "tasks/list", "params": {}}),
    )
    .await;
    let answer = data(&body);
    answer["result"]["tasks"]
        .as_array()
        .unwrap_or_else(|| panic!("a task list: {answer}"))
        .iter()
        .filter_map(|task| Some(task["status"].as_str()?.to_owned()))
        .collect()
}

/// The JSON-RPC message in a POST's answer (JSON, or the last event of a stream).
fn data(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|_| {
        body.lines()
            .rev()
            .filter_map(|line| line.strip_prefix("data: "))
            .find_map(|line| serde_json::from_str::<Value>(line).ok())
            .unwrap_or_else(|| panic!("no message in {body}"))
    })
}

/// A task created through one replica is polled and finished through another, after the first
/// has shut down: the handle opens on every replica, which asks after the task in the upstream
/// session it lives in (which the leaving replica did not end).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_created_through_one_replica_is_finished_through_another() {
    let redis = RedisServer::start().await;
    let everything = Everything::start(Mode::StreamableHttp).await;
    let url = everything.url();
    let mut cluster =
        Cluster::start_with(&redis, 300, |_| format!("[upstreams.ev]\nurl = {url:?}\n")).await;
    cluster.wait_ready("ev", Duration::from_secs(30)).await;
    let first = format!("http://{}/mcp", cluster.replicas[0].addr);
    let second = format!("http://{}/mcp", cluster.replicas[1].addr);

    let session = raw_session(&first).await;
    let (status, body) = post(
        &first,
        Some(&session),
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": TOOL, "arguments": {"topic": "replicas"}, "task": {"ttl": 60000}}}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let created = data(&body);
    let task = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {created}"))
        .to_owned();
    let leaving = cluster.replicas.remove(0);
    leaving.signal("TERM");
    assert!(
        leaving.exit_within(Duration::from_secs(20)).is_some(),
        "the first replica shuts down"
    );

    let mut statuses = Vec::new();
    for n in 0..60 {
        let (_, body) = post(
            &second,
            Some(&session),
            json!({"jsonrpc": "2.0", "id": 10 + n, "method": "tasks/get",
                   "params": {"taskId": task}}),
        )
        .await;
        let answer = data(&body);
        let status = answer["result"]["status"]
            .as_str()
            .unwrap_or_else(|| panic!("a status: {answer}"))
            .to_owned();
        assert_eq!(answer["result"]["taskId"], task.as_str());
        statuses.push(status.clone());
        if status == "completed" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_eq!(
        statuses.last().map(String::as_str),
        Some("completed"),
        "{statuses:?}"
    );
    let (_, body) = post(
        &second,
        Some(&session),
        json!({"jsonrpc": "2.0", "id": 99, "method": "tasks/result", "params": {"taskId": task}}),
    )
    .await;
    let answer = data(&body);
    let report = answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(report.contains("Research Report: replicas"), "{answer}");
    assert_eq!(
        answer["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        task.as_str()
    );
}

mod guarded;
mod handles;

pub(crate) use handles::{job, on_task};
