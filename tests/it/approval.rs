//! Calls that wait for a person's approval (`[[policy]] approval`): the calling user asked
//! through elicitation (rmcp clients that declare it), or, for a client that cannot be asked,
//! an operator deciding through the admin API; each decision serves its own call once, and
//! is audited with who made it.

use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::{GatewayBuilder, Recorder, TestGateway, api_key, api_keys_section};

/// A gateway serving the demo server to API-key users alice, bob and carol, where calls of
/// `echo` wait for approval as `approval` (the inline table's keys) says; its audit log is
/// `{state}/audit.log`.
async fn gateway(approval: &str, state: &std::path::Path) -> TestGateway {
    GatewayBuilder::new()
        .section(&format!(
            "[audit]\nfile = {:?}\n[auth]\nscopes = []\n{}\n\
             [[policy]]\nname = \"careful\"\napproval = {{ tools = [\"demo:echo\"], {approval} }}\n",
            state.join("audit.log").display().to_string(),
            api_keys_section(&["alice", "bob", "carol"]),
        ))
        .demo("demo")
        .start()
        .await
}

/// The text of a tool result, and whether it is an error.
fn outcome(result: &rmcp::model::CallToolResult) -> (String, bool) {
    (
        crate::harness::text(result).to_owned(),
        result.is_error == Some(true),
    )
}

async fn echo<S: rmcp::Service<rmcp::RoleClient>>(
    client: &rmcp::service::RunningService<rmcp::RoleClient, S>,
    text: &str,
) -> (String, bool) {
    let result = crate::harness::call(client, "demo__echo", json!({ "text": text }))
        .await
        .unwrap();
    outcome(&result)
}

/// The `approval` records of the audit log, once it holds `count` of them (it is written
/// behind the calls).
async fn approvals_in(state: &std::path::Path, count: usize) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let records: Vec<Value> = std::fs::read_to_string(state.join("audit.log"))
            .unwrap_or_default()
            .lines()
            .map(|line| serde_json::from_str::<Value>(line).unwrap())
            .filter(|record| record["kind"] == "approval")
            .collect();
        if records.len() >= count || tokio::time::Instant::now() > deadline {
            return records;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_user_approves_or_refuses_their_own_call_through_elicitation() {
    let state = tempfile::tempdir().unwrap();
    let gw = gateway("timeout_seconds = 20", state.path()).await;
    let alice = Recorder::capable("alice")
        .connect_as(&gw.url(), &api_key("alice"))
        .await;
    assert_eq!(echo(&alice, "hello").await, ("hello".into(), false));
    let asked = alice.service().seen().approvals.clone();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert!(
        asked[0].contains("`echo` of `demo`") && asked[0].contains("hello"),
        "{asked:?}"
    );
    // A call no rule covers is not asked about.
    let sum = crate::harness::call(&alice, "demo__add", json!({"a": 1, "b": 2}))
        .await
        .unwrap();
    assert_eq!(sum.is_error, Some(false));
    assert_eq!(alice.service().seen().approvals.len(), 1);

    let bob = Recorder::capable("bob")
        .approving(false)
        .connect_as(&gw.url(), &api_key("bob"))
        .await;
    let (text, failed) = echo(&bob, "rm -rf").await;
    assert!(failed, "{text}");
    assert!(
        text.contains("was not run: it needs approval, and the user did not allow it"),
        "{text}"
    );

    let records = approvals_in(state.path(), 2).await;
    assert!(
        records.iter().any(|r| r["principal"] == "user:key:alice"
            && r["outcome"] == "allowed"
            && r["item"] == "echo"
            && r["detail"] == "by the user (elicitation)"),
        "{records:?}"
    );
    assert!(
        records
            .iter()
            .any(|r| r["principal"] == "user:key:bob" && r["outcome"] == "denied"),
        "{records:?}"
    );
    for client in [alice, bob] {
        client.cancel().await.unwrap();
    }
}

/// The calls waiting, as the admin API lists them.
async fn waiting(gw: &TestGateway) -> Vec<Value> {
    gw.admin_json("/api/approvals").await["waiting"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Waits for one call to be waiting; it.
async fn one_waiting(gw: &TestGateway) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let mut found = waiting(gw).await;
        if found.len() == 1 {
            return found.remove(0);
        }
        assert!(tokio::time::Instant::now() < deadline, "{found:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn decide(gw: &TestGateway, id: &str, body: Value) -> (u16, Value) {
    let answer = gw
        .admin_request(reqwest::Method::POST, &format!("/api/approvals/{id}"))
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = answer.status().as_u16();
    (status, answer.json().await.unwrap_or_default())
}

type Client = std::sync::Arc<rmcp::service::RunningService<rmcp::RoleClient, Recorder>>;

/// Carol, whose client declares no elicitation (she cannot approve her own call), connected.
async fn carol(gw: &TestGateway) -> Client {
    std::sync::Arc::new(
        Recorder::plain("carol")
            .connect_as(&gw.url(), &api_key("carol"))
            .await,
    )
}

/// `client`'s call of `echo` with `text`, under way.
fn echoing(client: &Client, text: &'static str) -> tokio::task::JoinHandle<(String, bool)> {
    let client = client.clone();
    tokio::spawn(async move { echo(&client, text).await })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_cannot_be_asked_waits_for_an_operator_whose_decision_serves_once() {
    let state = tempfile::tempdir().unwrap();
    let gw = gateway("mask = [\"text\"], timeout_seconds = 30", state.path()).await;
    let carol = carol(&gw).await;
    let first = echoing(&carol, "the secret words");
    let entry = one_waiting(&gw).await;
    assert_eq!(entry["principal"], "user:key:carol", "{entry}");
    assert_eq!(entry["tool"], "echo");
    assert_eq!(entry["upstream"], "demo");
    assert_eq!(entry["rule"], "careful");
    assert_eq!(entry["arguments"], json!({"text": "…"}), "masked");
    let listed = gw.admin_json("/api/status").await;
    assert_eq!(
        listed["approvals"][0]["id"], entry["id"],
        "on the status too"
    );
    assert!(!listed.to_string().contains("secret words"));
    let id = entry["id"].as_str().unwrap().to_owned();
    let digest = entry["arguments_sha256"].as_str().unwrap().to_owned();
    assert_eq!(digest.len(), 64);

    // Her own key does not open the admin API; a decision on other arguments is refused.
    let as_carol = reqwest::Client::new()
        .post(gw.admin_url(&format!("/api/approvals/{id}")))
        .bearer_auth(api_key("carol"))
        .json(&json!({"decision": "allow"}))
        .send()
        .await
        .unwrap();
    assert_eq!(as_carol.status(), 401);
    let other = json!({"decision": "allow", "arguments_sha256": "0".repeat(64)});
    assert_eq!(decide(&gw, &id, other).await.0, 409);
    assert_eq!(waiting(&gw).await.len(), 1, "still waiting");

    let allow = json!({"decision": "allow", "arguments_sha256": digest, "operator": "dana"});
    assert_eq!(decide(&gw, &id, allow.clone()).await.0, 200);
    assert_eq!(
        first.await.unwrap(),
        ("the secret words".into(), false),
        "allowed, it ran"
    );

    // The same decision again serves nothing: a second call waits under its own id.
    let second = echoing(&carol, "the secret words");
    let again = one_waiting(&gw).await;
    assert_ne!(again["id"], entry["id"]);
    assert_eq!(decide(&gw, &id, allow).await.0, 404, "not twice");
    let deny = json!({"decision": "deny", "reason": "not today"});
    let again_id = again["id"].as_str().unwrap();
    assert_eq!(decide(&gw, again_id, deny).await.0, 200);
    let (text, failed) = second.await.unwrap();
    assert!(failed && text.contains("denied it: not today"), "{text}");

    let records = approvals_in(state.path(), 2).await;
    assert!(
        records
            .iter()
            .any(|r| r["outcome"] == "allowed" && r["detail"] == "by operator dana (admin API)"),
        "{records:?}"
    );
    assert!(
        records.iter().any(
            |r| r["outcome"] == "denied" && r["detail"].as_str().unwrap().contains("not today")
        ),
        "{records:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_nobody_decides_on_is_refused_when_its_time_is_up() {
    let state = tempfile::tempdir().unwrap();
    let gw = gateway("by = \"operator\", timeout_seconds = 1", state.path()).await;
    // Alice's client could be asked, but this rule wants an operator.
    let alice = Recorder::capable("alice")
        .connect_as(&gw.url(), &api_key("alice"))
        .await;
    let (text, failed) = echo(&alice, "hello").await;
    assert!(failed, "{text}");
    assert!(text.contains("no operator decided within 1 s"), "{text}");
    assert!(alice.service().seen().approvals.is_empty(), "not asked");
    assert!(waiting(&gw).await.is_empty(), "out of the queue");
    alice.cancel().await.unwrap();
}

/// The official Python SDK's clients, asked through elicitation (its default client, of
/// 2026-07-28, through `input_required`), answer Switchyard's form.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_sdk_client_answers_the_approval_form() {
    let (python, _) = crate::deps::python();
    let script = python
        .parent()
        .and_then(|bin| bin.parent())
        .and_then(|venv| venv.parent())
        .unwrap()
        .join("approve.py");
    let state = tempfile::tempdir().unwrap();
    let gw = gateway("timeout_seconds = 30", state.path()).await;
    let cases = [
        ("alice", "yes", "default"),
        ("bob", "no", "default"),
        ("alice", "yes", "legacy"),
        ("bob", "no", "legacy"),
    ];
    for (user, allow, mode) in cases {
        let output = tokio::process::Command::new(python)
            .arg(&script)
            .arg(gw.url())
            .arg(api_key(user))
            .arg("demo__echo")
            .arg(r#"{"text": "from python"}"#)
            .arg(allow)
            .arg(mode)
            .output()
            .await
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{mode}: {stderr}");
        let answer: Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(
            answer["asked"].as_array().unwrap().len(),
            1,
            "{mode}: {answer}"
        );
        let expected = if allow == "yes" {
            json!({"is_error": false, "text": "from python"})
        } else {
            json!({"is_error": true})
        };
        assert_eq!(
            answer["is_error"], expected["is_error"],
            "{mode} {user}: {answer}"
        );
        if allow == "yes" {
            assert_eq!(answer["text"], expected["text"], "{answer}");
        } else {
            assert!(
                answer["text"]
                    .as_str()
                    .unwrap()
                    .contains("the user did not allow it"),
                "{answer}"
            );
        }
    }
}

/// The status page lists a waiting call, masked, and its Allow once button releases it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_allows_a_waiting_call_from_the_status_page() {
    let state = tempfile::tempdir().unwrap();
    let gw = gateway("mask = [\"text\"], timeout_seconds = 30", state.path()).await;
    let carol = carol(&gw).await;
    let call = echoing(&carol, "from the page");
    let entry = one_waiting(&gw).await;
    let browser = crate::browser::Browser::start().await;
    browser
        .goto(&gw.admin_url(&format!("/#token={}", crate::harness::TEST_ADMIN_TOKEN)))
        .await;
    let item = format!("#approvals li[data-id={:?}]", entry["id"].as_str().unwrap());
    assert!(
        browser.wait_for(&item, Duration::from_secs(15)).await,
        "the page lists the waiting call"
    );
    let shown = browser
        .eval(&format!(
            "return document.querySelector({item:?}).textContent;"
        ))
        .await;
    let shown = shown.as_str().unwrap();
    assert!(
        shown.contains("user:key:carol") && shown.contains("demo / echo"),
        "{shown}"
    );
    assert!(!shown.contains("from the page"), "masked: {shown}");
    browser
        .click(&format!("{item} button[data-action=\"allow\"]"))
        .await;
    assert_eq!(call.await.unwrap(), ("from the page".into(), false));
}
