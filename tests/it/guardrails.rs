//! Guardrails (`[[guardrail]]`): what the demo server's `echo` sends back, holding a fake
//! cloud key, a card number, an e-mail address and a phone number, comes back redacted,
//! blocked or flagged as configured; arguments are screened before they are sent (the echo
//! shows what the upstream got); and a policy hook, a real HTTP server here, allows, denies and
//! rewrites calls and results, or fails (too slow, unreachable) closed or open. The audit log
//! names the kinds found and the decisions, never a value; `/metrics` counts them.

use std::{
    net::SocketAddr,
    path::Path,
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::{Json, Router, extract::State, routing::post};
use serde_json::{Value, json};

use crate::harness::{GatewayBuilder, api_key, api_keys_section, call, text, user_client};

const GUARDRAILS: &str = r#"
[[guardrail]]
name = "no-secrets"
tools = ["demo:echo"]
detect = ["secrets"]
action = "block"

[[guardrail]]
name = "personal"
upstreams = ["demo"]
detect = ["personal"]
action = "redact"

[[guardrail]]
name = "phones"
tools = ["demo:echo"]
detect = ["phone"]
action = "flag"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_are_redacted_blocked_or_flagged_as_configured() {
    let state = tempfile::tempdir().unwrap();
    let log = state.path().join("audit.log");
    let gw = GatewayBuilder::new()
        .section(&format!(
            "[audit]\nfile = {:?}\n{GUARDRAILS}",
            log.display().to_string()
        ))
        .demo("demo")
        .start()
        .await;
    let client = gw.client().await;
    let echo = |text: &'static str| {
        let client = &client;
        async move {
            let result = call(client, "demo__echo", json!({ "text": text }))
                .await
                .unwrap();
            (
                crate::harness::text(&result).to_owned(),
                result.is_error == Some(true),
            )
        }
    };

    let (said, failed) =
        echo("mail ada@example.org, card 4111 1111 1111 1111, call +44 20 7946 0958").await;
    assert!(!failed);
    assert_eq!(
        said,
        "mail [REDACTED:email], card [REDACTED:card_number], call [REDACTED:phone]"
    );

    let (said, failed) = echo("the key is AKIAIOSFODNN7EXAMPLE").await;
    assert!(failed, "blocked: {said}");
    assert!(
        said.contains("withheld")
            && said.contains("aws_access_key ×1")
            && said.contains("no-secrets"),
        "{said}"
    );
    assert!(!said.contains("AKIA"), "{said}");

    let (said, failed) = echo("nothing to see").await;
    assert_eq!((said.as_str(), failed), ("nothing to see", false));
    // Another tool of the upstream: only `personal` covers it, and it finds nothing.
    let sum = call(&client, "demo__add", json!({"a": 2, "b": 3}))
        .await
        .unwrap();
    assert!(text(&sum).contains('5'));

    let records = guardrail_records(&log, 3).await;
    let outcome = |what: &str| {
        records
            .iter()
            .find(|r| r["outcome"] == what)
            .unwrap_or_else(|| panic!("no {what} record: {records:?}"))["detail"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(
        outcome("redacted"),
        "guardrail personal: email ×1, card_number ×1, phone ×1"
    );
    assert_eq!(outcome("flagged"), "guardrail phones: phone ×1");
    assert_eq!(
        outcome("blocked"),
        "guardrail no-secrets: aws_access_key ×1"
    );
    for record in &records {
        let shown = record.to_string();
        assert!(
            !shown.contains("ada@") && !shown.contains("AKIA"),
            "{shown}"
        );
        assert_eq!(record["item"], "echo");
    }
    client.cancel().await.unwrap();
}

/// The `guardrail` records of the audit log at `log`, once there are `count` of them (or 10 s
/// have passed: the writer is asynchronous).
async fn guardrail_records(log: &Path, count: usize) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let records: Vec<Value> = std::fs::read_to_string(log)
            .unwrap_or_default()
            .lines()
            .map(|line| serde_json::from_str::<Value>(line).unwrap())
            .filter(|record| record["kind"] == "guardrail")
            .collect();
        if records.len() >= count || tokio::time::Instant::now() > deadline {
            return records;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `echo`'s text and whether the result says the tool failed, on any client.
async fn echo<S: rmcp::Service<rmcp::RoleClient>>(
    client: &rmcp::service::RunningService<rmcp::RoleClient, S>,
    tool: &str,
    said: &str,
) -> (String, bool) {
    let result = call(client, tool, json!({ "text": said })).await.unwrap();
    (text(&result).to_owned(), result.is_error == Some(true))
}

/// The value of the decisions counter of `guardrail` in `phase` with `outcome`, in `metrics`.
fn decisions(metrics: &str, guardrail: &str, phase: &str, outcome: &str) -> Option<f64> {
    let labels = [
        format!("guardrail=\"{guardrail}\""),
        format!("phase=\"{phase}\""),
        format!("outcome=\"{outcome}\""),
    ];
    metrics
        .lines()
        .filter(|line| line.starts_with("switchyard_guardrail_decisions_total{"))
        .find(|line| labels.iter().all(|label| line.contains(label.as_str())))
        .and_then(|line| line.rsplit(' ').next()?.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arguments_are_screened_before_they_are_sent() {
    let state = tempfile::tempdir().unwrap();
    let log = state.path().join("audit.log");
    let gw = GatewayBuilder::new()
        .section(&format!(
            r#"[audit]
file = {:?}

[[guardrail]]
name = "no-keys-out"
tools = ["demo:echo"]
detect = ["secrets"]
action = "block"
screen = ["arguments"]

[[guardrail]]
name = "no-mail-out"
upstreams = ["demo"]
detect = ["email"]
screen = ["arguments"]
"#,
            log.display().to_string()
        ))
        .http("demo", &crate::bench::demo_http().await)
        .start()
        .await;
    let client = gw.client().await;

    let (said, failed) = echo(&client, "demo__echo", "the key is AKIAIOSFODNN7EXAMPLE").await;
    assert!(failed, "refused: {said}");
    assert!(
        said.contains("no-keys-out")
            && said.contains("aws_access_key ×1")
            && !said.contains("AKIA"),
        "{said}"
    );
    // Only arguments are screened: the result, which echoes them, is not; so what comes back
    // is what the upstream got.
    let (said, failed) = echo(&client, "demo__echo", "write to ada@example.org").await;
    assert_eq!(
        (said.as_str(), failed),
        ("write to [REDACTED:email]", false)
    );

    let records = guardrail_records(&log, 2).await;
    let outcomes: Vec<(&str, &str)> = records
        .iter()
        .map(|r| {
            (
                r["outcome"].as_str().unwrap(),
                r["detail"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        outcomes,
        [
            (
                "blocked",
                "guardrail no-keys-out, on the arguments: aws_access_key ×1"
            ),
            (
                "redacted",
                "guardrail no-mail-out, on the arguments: email ×1"
            ),
        ]
    );
    let metrics = gw.metrics_text().await;
    assert_eq!(
        decisions(&metrics, "no-keys-out", "call", "blocked"),
        Some(1.0),
        "{metrics}"
    );
    assert_eq!(
        decisions(&metrics, "no-mail-out", "call", "redacted"),
        Some(1.0)
    );
    client.cancel().await.unwrap();
}

/// What a hook was asked: the request's headers and its JSON body.
type Asked = Arc<Mutex<Vec<(http::HeaderMap, Value)>>>;

/// A policy hook on 127.0.0.1: `/check` decides by what the call's `text` argument, or its
/// result's text, holds (`deny`, `rewrite`, `break` for arguments the tool's schema refuses;
/// `hide`, `swap` in results), and allows the rest; `/slow` answers after 5 s, `/error` with
/// HTTP 500, `/huge` with 2 MiB.
struct PolicyHook {
    addr: SocketAddr,
    asked: Asked,
}

impl PolicyHook {
    async fn start() -> Self {
        let asked = Asked::default();
        let app = Router::new()
            .route("/check", post(decide))
            .route(
                "/slow",
                post(|| async {
                    tokio::time::sleep(Duration::from_secs(5)).await;
                    Json(json!({"decision": "allow"}))
                }),
            )
            .route(
                "/error",
                post(|| async { (http::StatusCode::INTERNAL_SERVER_ERROR, "down") }),
            )
            .route(
                "/huge",
                post(|| async {
                    let reason = "x".repeat(2 * 1024 * 1024);
                    Json(json!({"decision": "deny", "reason": reason}))
                }),
            )
            .with_state(asked.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { addr, asked }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn asked(&self) -> Vec<(http::HeaderMap, Value)> {
        self.asked.lock().unwrap().clone()
    }
}

async fn decide(
    State(asked): State<Asked>,
    headers: http::HeaderMap,
    Json(question): Json<Value>,
) -> Json<Value> {
    asked.lock().unwrap().push((headers, question.clone()));
    let decision = if question["phase"] == "call" {
        let text = question["arguments"]["text"].as_str().unwrap_or_default();
        match () {
            _ if text.contains("deny") => json!({"decision": "deny", "reason": "no denying today"}),
            _ if text.contains("rewrite") => {
                json!({"decision": "rewrite", "arguments": {"text": "rewritten by policy"}})
            }
            _ if text.contains("break") => json!({"decision": "rewrite", "arguments": {"text": 5}}),
            _ => json!({"decision": "allow"}),
        }
    } else {
        let text = question["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default();
        match () {
            _ if text.contains("hide") => json!({"decision": "deny", "reason": "not for models"}),
            _ if text.contains("swap") => json!({"decision": "rewrite", "result": {
                "content": [{"type": "text", "text": "result rewritten"}]
            }}),
            _ => json!({"decision": "allow"}),
        }
    };
    Json(decision)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_hook_allows_denies_and_rewrites_calls_and_results() {
    let hook = PolicyHook::start().await;
    let state = tempfile::tempdir().unwrap();
    let log = state.path().join("audit.log");
    let gw = GatewayBuilder::new()
        .section(&format!(
            r#"[audit]
file = {:?}
{}
[[guardrail]]
name = "corp-policy"
upstreams = ["demo", "local"]
hook = {{ url = "{}", after = true, headers = {{ Authorization = "Bearer hook-token" }} }}
"#,
            log.display().to_string(),
            api_keys_section(&["alice"]),
            hook.url("/check"),
        ))
        // The raw path (streamable HTTP) and the typed one (stdio).
        .http("demo", &crate::bench::demo_http().await)
        .demo("local")
        .start()
        .await;
    let client = user_client(&gw.url(), "alice", false).await;

    assert_eq!(
        echo(&client, "demo__echo", "hello").await,
        ("hello".into(), false)
    );
    let (said, failed) = echo(&client, "demo__echo", "please deny this").await;
    assert!(failed, "{said}");
    assert!(
        said.contains("corp-policy")
            && said.contains("no denying today")
            && !said.contains("please"),
        "{said}"
    );
    for tool in ["demo__echo", "local__echo"] {
        let got = echo(&client, tool, "please rewrite this").await;
        assert_eq!(
            got,
            ("rewritten by policy".into(), false),
            "{tool}: the upstream got the hook's arguments"
        );
    }
    let (said, failed) = echo(&client, "demo__echo", "please break this").await;
    assert!(
        failed && said.contains("invalid arguments"),
        "checked against the schema: {said}"
    );
    assert_eq!(
        echo(&client, "demo__echo", "swap").await,
        ("result rewritten".into(), false)
    );
    let (said, failed) = echo(&client, "local__echo", "hide this").await;
    assert!(failed, "{said}");
    assert!(
        said.contains("withheld") && said.contains("not for models") && !said.contains("hide this"),
        "{said}"
    );

    let asked = hook.asked();
    for (headers, _) in &asked {
        let authorization: Vec<_> = headers.get_all("authorization").iter().collect();
        assert_eq!(
            authorization,
            ["Bearer hook-token"],
            "the hook's own header, never the user's"
        );
        assert!(!format!("{headers:?}").contains(&api_key("alice")));
    }
    let questions: Vec<&Value> = asked.iter().map(|(_, question)| question).collect();
    assert_eq!(
        questions[0],
        &json!({"phase": "call", "user": "user:key:alice", "upstream": "demo", "tool": "echo", "arguments": {"text": "hello"}})
    );
    assert_eq!(questions[1]["phase"], "result");
    assert_eq!(questions[1]["result"]["content"][0]["text"], "hello");
    // A denied call is never sent, so its result is never asked about.
    assert_eq!(questions[2]["arguments"]["text"], "please deny this");
    assert_eq!(questions[3]["arguments"]["text"], "please rewrite this");
    assert_eq!(questions[4]["phase"], "result");
    assert_eq!(
        questions[4]["arguments"]["text"], "rewritten by policy",
        "what was sent"
    );

    let outcomes: Vec<String> = guardrail_records(&log, 12)
        .await
        .iter()
        .map(|record| {
            let shown = record.to_string();
            assert!(
                !shown.contains("please") && !shown.contains("hook-token"),
                "{shown}"
            );
            format!(
                "{} {}",
                record["outcome"].as_str().unwrap(),
                record["detail"].as_str().unwrap()
            )
        })
        .collect();
    for expected in [
        "allowed guardrail corp-policy, call hook",
        "allowed guardrail corp-policy, result hook",
        "denied guardrail corp-policy, call hook: no denying today",
        "rewritten guardrail corp-policy, call hook",
        "rewritten guardrail corp-policy, result hook",
        "denied guardrail corp-policy, result hook: not for models",
    ] {
        assert!(
            outcomes.iter().any(|o| o == expected),
            "no {expected:?} in {outcomes:#?}"
        );
    }
    let metrics = gw.metrics_text().await;
    assert_eq!(
        decisions(&metrics, "corp-policy", "call", "denied"),
        Some(1.0),
        "{metrics}"
    );
    assert_eq!(
        decisions(&metrics, "corp-policy", "call", "rewritten"),
        Some(3.0)
    );
    assert_eq!(
        decisions(&metrics, "corp-policy", "result", "rewritten"),
        Some(1.0)
    );
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_that_fails_refuses_the_call_when_closed_and_lets_it_through_when_open() {
    // Fails: too slow, unreachable, HTTP 500, an answer over 1 MiB.
    let hook = PolicyHook::start().await;
    let closed_port = crate::harness::closed_port().await;
    let state = tempfile::tempdir().unwrap();
    let log = state.path().join("audit.log");
    let gw = GatewayBuilder::new()
        .section(&format!(
            r#"[audit]
file = {:?}

[[guardrail]]
name = "slow-closed"
tools = ["demo:echo"]
hook = {{ url = "{slow}", timeout_seconds = 0.3, headers = {{ Authorization = "Bearer hook-token" }} }}

[[guardrail]]
name = "slow-open"
tools = ["demo:add"]
hook = {{ url = "{slow}", timeout_seconds = 0.3, failure = "open" }}

[[guardrail]]
name = "gone"
tools = ["demo:text_stats"]
hook.url = "http://127.0.0.1:{closed_port}/check?key=url-secret"

[[guardrail]]
name = "erring"
tools = ["demo:now"]
hook.url = "{error}"

[[guardrail]]
name = "too-much"
upstreams = ["other"]
hook = {{ url = "{huge}", before = false, after = true }}
"#,
            log.display().to_string(),
            slow = hook.url("/slow"),
            error = hook.url("/error"),
            huge = hook.url("/huge"),
        ))
        .http("demo", &crate::bench::demo_http().await)
        .http("other", &crate::bench::demo_http().await)
        .start()
        .await;
    let client = gw.client().await;

    let (said, failed) = echo(&client, "demo__echo", "hello").await;
    assert!(failed, "{said}");
    assert!(
        said.contains("slow-closed") && said.contains("did not answer within 0.3 s"),
        "{said}"
    );
    assert!(
        !said.contains("hook-token") && !said.contains("127.0.0.1"),
        "{said}"
    );
    let sum = call(&client, "demo__add", json!({"a": 2, "b": 3}))
        .await
        .unwrap();
    assert!(
        sum.is_error != Some(true) && text(&sum).contains('5'),
        "open: {sum:?}"
    );
    let stats = call(&client, "demo__text_stats", json!({"text": "a b"}))
        .await
        .unwrap();
    let said = text(&stats);
    assert!(
        stats.is_error == Some(true) && said.contains("could not be reached"),
        "{said}"
    );
    assert!(!said.contains("url-secret"), "{said}");

    let now = call(&client, "demo__now", json!({})).await.unwrap();
    assert!(
        now.is_error == Some(true) && text(&now).contains("answered HTTP 500"),
        "{now:?}"
    );
    // Asked after the call only: the result is withheld.
    let (said, failed) = echo(&client, "other__echo", "hello").await;
    assert!(
        failed && said.contains("withheld") && said.contains("larger than"),
        "{said}"
    );

    let records = guardrail_records(&log, 5).await;
    let outcome = |name: &str| {
        (records.iter())
            .find(|r| {
                r["detail"]
                    .as_str()
                    .unwrap()
                    .starts_with(&format!("guardrail {name},"))
            })
            .map(|r| r["outcome"].as_str().unwrap().to_owned())
    };
    assert_eq!(outcome("slow-closed").as_deref(), Some("failed_closed"));
    assert_eq!(outcome("slow-open").as_deref(), Some("failed_open"));
    assert_eq!(outcome("gone").as_deref(), Some("failed_closed"));
    assert_eq!(outcome("erring").as_deref(), Some("failed_closed"));
    assert_eq!(outcome("too-much").as_deref(), Some("failed_closed"));
    assert!(!format!("{records:?}").contains("url-secret"));
    let metrics = gw.metrics_text().await;
    assert_eq!(
        decisions(&metrics, "slow-open", "call", "failed_open"),
        Some(1.0),
        "{metrics}"
    );
    client.cancel().await.unwrap();
}
