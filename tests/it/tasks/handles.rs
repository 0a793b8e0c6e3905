//! Task handles over time: a task finished reads as settled to its owner alone, an old
//! handle reaches no new task of the same id once its upstream restarted (over HTTP and
//! stdio), and a task holds its place under a concurrency quota until it ends.

use std::time::Duration;

use serde_json::{Value, json};

use super::{TOOL, modern_as};
use crate::{
    deps,
    fixtures::{crashable::Crashable, everything, numbered::Numbered},
    harness::{GatewayBuilder, TestGateway, api_keys_section},
};

/// What a 2026-07-28 client gets for `tasks/get` of `task` as `user`, once it is no longer
/// `working` (or after ten seconds).
async fn settled(url: &str, user: &str, task: &str) -> Value {
    let mut last = Value::Null;
    for _ in 0..40 {
        last = on_task(url, user, "tasks/get", task).await;
        if last["result"]["status"] != "working" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    last
}

fn is_unknown_task(answer: &Value) -> bool {
    answer["error"]["code"] == -32602
        && answer["error"]["message"]
            .as_str()
            .is_some_and(|message| message.contains("unknown task"))
}

/// `method` (`tasks/get`, `tasks/cancel`) on the task of handle `task`, as `user`, from a
/// 2026-07-28 client of the tasks extension.
pub(crate) async fn on_task(url: &str, user: &str, method: &str, task: &str) -> Value {
    modern_as(url, Some(user), method, task, json!({"taskId": task}), true).await
}

/// The numbered server's `job` (as upstream `jobs`) called by `user`, working `seconds`: the
/// handle of the task it created.
pub(crate) async fn job(url: &str, user: &str, seconds: u64) -> String {
    let params = json!({"name": "jobs__job", "arguments": {"label": user, "seconds": seconds}});
    let created = modern_as(url, Some(user), "tools/call", "jobs__job", params, true).await;
    (created["result"]["taskId"].as_str())
        .unwrap_or_else(|| panic!("no task was created: {created}"))
        .to_owned()
}

/// A gateway for `users`, with the numbered server as `jobs`, and `extra` configuration.
async fn jobs_gateway(numbered: &Numbered, users: &[&str], extra: &str) -> TestGateway {
    GatewayBuilder::new()
        .section(&api_keys_section(users))
        .section(extra)
        .upstream("jobs", &numbered.upstream())
        .start()
        .await
}

/// An upstream that numbers its tasks from each start (and keeps no sessions) gives a new task
/// the id of an old one once it restarts: Alice's handle of her old task then names Bob's new
/// task upstream. Through her handle she neither sees his task nor cancels it: it is an
/// unknown task to her, and Bob's own handle works on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_old_handle_reaches_no_new_task_of_its_id_after_the_upstream_restarts() {
    let numbered = Numbered::start().await;
    let gw = jobs_gateway(&numbered, &["alice", "bob"], "").await;
    let url = gw.url();
    let alices = job(&url, "alice", 0).await;
    let done = settled(&url, "alice", &alices).await;
    assert_eq!(done["result"]["status"], "completed", "{done}");

    numbered.restart();
    let bobs = job(&url, "bob", 30).await;
    assert_ne!(alices, bobs);
    let seen = on_task(&url, "alice", "tasks/get", &alices).await;
    assert!(is_unknown_task(&seen), "Alice reads Bob's task: {seen}");
    let cancel = on_task(&url, "alice", "tasks/cancel", &alices).await;
    assert!(
        is_unknown_task(&cancel),
        "Alice cancels Bob's task: {cancel}"
    );
    let his = on_task(&url, "bob", "tasks/get", &bobs).await;
    assert_eq!(his["result"]["status"], "working", "{his}");
    let ack = on_task(&url, "bob", "tasks/cancel", &bobs).await;
    assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
}

/// A research task `user` created (through a 2026-07-28 client) on `topic`, once the
/// upstream creates one (it may still be starting): its handle.
async fn research_task(url: &str, user: &str, topic: &str) -> String {
    let mut answer = Value::Null;
    for _ in 0..40 {
        let call = json!({"name": TOOL, "arguments": {"topic": topic}});
        answer = modern_as(url, Some(user), "tools/call", TOOL, call, true).await;
        if let Some(task) = answer["result"]["taskId"].as_str() {
            return task.to_owned();
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    panic!("no task was created: {answer}");
}

/// A handle names the run of the connection its task was created on: once a stdio upstream
/// has restarted (a new process, whose task ids may come round again), an old handle is an
/// unknown task, not a question the new process answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_old_handle_is_unknown_once_a_stdio_upstream_restarted() {
    let crashable = Crashable::new();
    let command = format!(
        "'{}' '{}' stdio",
        deps::node22().display(),
        everything::entry().display()
    );
    let gw = GatewayBuilder::new()
        .section(&api_keys_section(&["alice"]))
        .upstream(
            "ev",
            &crashable.upstream_running(
                &command,
                "connect_timeout_seconds = 60\nrestart = { delay_ms = 1000 }",
            ),
        )
        .start()
        .await;
    let url = gw.url();
    let task = research_task(&url, "alice", "runs").await;
    let before = on_task(&url, "alice", "tasks/get", &task).await;
    assert!(before["result"]["status"].is_string(), "{before}");

    crashable.kill().await;
    gw.wait_state("ev", "failed", Duration::from_secs(20)).await;
    gw.wait_state("ev", "ready", Duration::from_secs(60)).await;
    // Served again (its tools listed) once a new task can be created.
    research_task(&url, "alice", "again").await;
    let after = on_task(&url, "alice", "tasks/get", &task).await;
    assert!(is_unknown_task(&after), "{after}");
}

/// A task keeps the place its call took under a `concurrent` quota until it ends: while it
/// runs, the next call is refused (before, the place was given back as soon as the task was
/// created, and a caller could run any number of tasks at once); once it has ended, there is
/// room again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_holds_its_place_under_concurrent_until_it_ends() {
    let numbered = Numbered::start().await;
    let quota = "[[quota]]\nname = \"one-job\"\nupstreams = [\"jobs\"]\nconcurrent = 1\n";
    let gw = jobs_gateway(&numbered, &["alice"], quota).await;
    let url = gw.url();
    let task = job(&url, "alice", 30).await;
    let params = json!({"name": "jobs__job", "arguments": {"seconds": 30}});
    let refused = modern_as(&url, Some("alice"), "tools/call", "jobs__job", params, true).await;
    assert_eq!(refused["error"]["code"], -32029, "{refused}");
    assert_eq!(refused["error"]["data"]["limit"], "concurrent", "{refused}");

    let ack = on_task(&url, "alice", "tasks/cancel", &task).await;
    assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    let ended = settled(&url, "alice", &task).await;
    assert_eq!(ended["result"]["status"], "cancelled", "{ended}");
    job(&url, "alice", 30).await;
}
