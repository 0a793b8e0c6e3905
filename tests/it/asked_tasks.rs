//! Tasks an upstream asks of a client, with the official server-everything, whose
//! `trigger-sampling-request-async` and `trigger-elicitation-request-async` tools send a
//! task-augmented request to the client, poll it with `tasks/get` and fetch it with
//! `tasks/result`. The client is the official TypeScript SDK with a task store. Through a
//! connection of its own (`per_client`) the client's declaration reaches the upstream; through
//! a connection shared by all, Switchyard declares it, and a client that did not is refused
//! with an error that says why. The task ids the upstream sees are Switchyard's handles, never
//! the client's own.

use serde_json::{Value, json};

use crate::{
    deps,
    fixtures::{
        everything::{self, Everything, Mode},
        task_asker,
    },
    harness::{GatewayBuilder, TestGateway},
};

const SAMPLING: &str = "ev__trigger-sampling-request-async";
const ELICITATION: &str = "ev__trigger-elicitation-request-async";

/// A gateway in front of one upstream, `name`, configured by `body`.
async fn gateway(name: &str, body: &str) -> TestGateway {
    GatewayBuilder::new().upstream(name, body).start().await
}

/// Runs the TypeScript client against `gw` (declaring it runs sampling and elicitation as
/// tasks if `tasks`), calling `tools`: what it printed.
async fn client(gw: &TestGateway, tasks: bool, tools: &[&str]) -> Value {
    let args =
        json!({ SAMPLING: { "prompt": "the tides" }, "asker__probe": { "task": "made-up" } });
    client_with(gw, json!({ "tools": tools, "tasks": tasks, "args": args })).await
}

/// Runs the TypeScript client against `gw` with `spec`: what it printed.
async fn client_with(gw: &TestGateway, spec: Value) -> Value {
    let script = deps::node_packages().join("asked-tasks-client.mjs");
    let output = tokio::time::timeout(
        std::time::Duration::from_secs(120),
        tokio::process::Command::new(deps::node22())
            .arg(script)
            .arg(gw.url())
            .arg(spec.to_string())
            .output(),
    )
    .await
    .expect("the client finishes in time")
    .expect("the client runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let printed = stdout
        .lines()
        .rev()
        .find_map(|line| serde_json::from_str::<Value>(line).ok());
    let printed = printed.unwrap_or_else(|| {
        panic!(
            "no summary\n{stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    assert!(printed.get("error").is_none(), "{printed}");
    printed
}

fn listed(printed: &Value, tool: &str) -> bool {
    printed["listed"]
        .as_array()
        .is_some_and(|tools| tools.iter().any(|name| name == tool))
}

/// The text of the call of `tool`, which must have succeeded.
fn answered<'a>(printed: &'a Value, tool: &str) -> &'a str {
    let call = &printed["calls"][tool];
    assert_eq!(call["isError"], false, "{tool}: {printed}");
    call["text"].as_str().unwrap_or_default()
}

/// The client ran both requests as tasks, and the upstream polled them under handles that
/// are not the client's ids.
fn ran_as_tasks(printed: &Value) {
    let sampled = answered(printed, SAMPLING);
    assert!(
        sampled.contains("[COMPLETED] Async sampling completed"),
        "{sampled}"
    );
    assert!(sampled.contains("sampled by the client"), "{sampled}");
    assert!(sampled.contains("the tides"), "{sampled}");
    assert!(
        sampled.contains("Poll 1: working"),
        "polled while it ran: {sampled}"
    );
    let elicited = answered(printed, ELICITATION);
    assert!(elicited.contains("[COMPLETED]"), "{elicited}");
    let created = printed["store"]["created"].as_array().expect("created");
    assert_eq!(created.len(), 2, "{printed}");
    for task in created {
        let id = task["taskId"].as_str().unwrap();
        assert!(
            !sampled.contains(id) && !elicited.contains(id),
            "the upstream never sees the client's task id {id}: {printed}"
        );
    }
    assert!(
        sampled.contains("Task created: "),
        "the upstream saw a task: {sampled}"
    );
}

fn refused(printed: &Value, tool: &str) -> String {
    let call = &printed["calls"][tool];
    let said = call["error"]
        .as_str()
        .or_else(|| {
            (call["isError"] == true)
                .then(|| call["text"].as_str())
                .flatten()
        })
        .unwrap_or_else(|| panic!("{tool} must fail: {printed}"));
    said.to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_runs_tasks_runs_an_upstreams_sampling_and_elicitation_as_tasks() {
    let everything = Everything::start(Mode::StreamableHttp).await;
    let gw = gateway(
        "ev",
        &format!("url = {:?}\nsession = \"per_client\"", everything.url()),
    )
    .await;
    // The upstream offers these tools only to a client that declared it runs such tasks: on
    // the client's own connection, that declaration is the client's.
    let printed = client(&gw, true, &[SAMPLING, ELICITATION]).await;
    assert!(listed(&printed, SAMPLING), "{printed}");
    ran_as_tasks(&printed);
}

/// Through a connection shared by all clients, a client that runs tasks runs them; one that
/// does not is not listed the tools that need it, as the upstream would not list them to it
/// directly, and they are unknown to it.
async fn shared_by_a_client_that_runs_tasks_and_one_that_does_not(gw: &TestGateway) {
    let printed = client(gw, true, &[SAMPLING, ELICITATION]).await;
    ran_as_tasks(&printed);
    let plain = client(gw, false, &[SAMPLING]).await;
    assert!(!listed(&plain, SAMPLING), "{plain}");
    let said = refused(&plain, SAMPLING);
    assert!(said.contains("unknown tool"), "{said}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_shared_connection_a_client_that_did_not_declare_tasks_is_refused_clearly() {
    let everything = Everything::start(Mode::StreamableHttp).await;
    let gw = gateway(
        "ev",
        &format!("url = {:?}\nsession = \"shared\"", everything.url()),
    )
    .await;
    shared_by_a_client_that_runs_tasks_and_one_that_does_not(&gw).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_stdio_an_upstreams_tasks_run_at_the_client_as_over_http() {
    // One process shared by every client (the default for stdio).
    let gw = gateway("ev", &everything::stdio_upstream()).await;
    shared_by_a_client_that_runs_tasks_and_one_that_does_not(&gw).await;
}

/// What the upstream saw of the tasks it asked for: their ids are handles (never the client's
/// own), the client's status notification reached it under the handle, `tasks/get`,
/// `tasks/list`, `tasks/result` and `tasks/cancel` reached the client and came back under the
/// handle, and an id it never got names no task.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_upstream_follows_a_clients_task_under_a_handle_of_its_own() {
    let asker = task_asker::serve().await;
    let gw = gateway("asker", &format!("url = {:?}", asker.url())).await;
    let printed = client(&gw, true, &["asker__ask", "asker__cancel", "asker__probe"]).await;
    let seen = |tool: &str| -> Value {
        serde_json::from_str(answered(&printed, tool)).unwrap_or_else(|_| panic!("{printed}"))
    };
    let created = printed["store"]["created"].as_array().expect("created");
    let ids: Vec<&str> = created
        .iter()
        .filter_map(|t| t["taskId"].as_str())
        .collect();
    assert_eq!(ids.len(), 2, "{printed}");

    let ask = seen("asker__ask");
    let handle = ask["created"]["task"]["taskId"].as_str().expect("a task");
    assert_eq!(ask["created"]["task"]["status"], "working", "{ask}");
    assert!(
        !ids.contains(&handle),
        "the upstream sees a handle, not {ids:?}: {ask}"
    );
    assert_eq!(
        ask["notified"], true,
        "the status notification went upstream: {ask}"
    );
    assert_eq!(ask["get"]["taskId"], handle, "{ask}");
    assert_eq!(ask["get"]["status"], "completed", "{ask}");
    let listed = ask["list"]["tasks"].as_array().expect("a list");
    assert!(listed.iter().any(|t| t["taskId"] == handle), "{ask}");
    assert!(
        listed
            .iter()
            .all(|t| !ids.contains(&t["taskId"].as_str().unwrap_or("")))
    );
    let result = &ask["result"];
    assert_eq!(
        result["content"]["text"], "sampled by the client: tides",
        "{ask}"
    );
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/related-task"]["taskId"], handle,
        "{ask}"
    );

    let cancel = seen("asker__cancel");
    assert_eq!(cancel["cancel"]["status"], "cancelled", "{cancel}");
    assert_eq!(
        cancel["cancel"]["taskId"],
        cancel["created"]["task"]["taskId"]
    );

    let probe = seen("asker__probe");
    let error = probe["get"]["error"].as_str().unwrap_or_default();
    assert!(error.contains("no task `made-up`"), "{probe}");
}

/// A question an upstream asks while a tool call runs as a task names that task as the client
/// knows it: Switchyard's task id, not the upstream's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_about_a_task_names_the_task_the_client_knows() {
    let everything = Everything::start(Mode::StreamableHttp).await;
    let gw = gateway("ev", &format!("url = {:?}", everything.url())).await;
    let research = "ev__simulate-research-query";
    let spec = json!({
        "tools": [],
        "tasks": true,
        "task_calls": [{ "name": research, "args": { "topic": "python", "ambiguous": true } }],
    });
    let printed = client_with(&gw, spec).await;
    let task = &printed["tasks"][research];
    let id = task["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("{printed}"));
    assert!(
        task["text"]
            .as_str()
            .unwrap_or_default()
            .contains("Research Report"),
        "{printed}"
    );
    assert_eq!(printed["store"]["elicited"], json!([id]), "{printed}");
}
