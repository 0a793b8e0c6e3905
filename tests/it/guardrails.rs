//! Guardrails on tool results (`[[guardrail]]`): what the demo server's `echo` sends back,
//! holding a fake cloud key, a card number, an e-mail address and a phone number, comes back
//! redacted, blocked or flagged as configured, and the audit log names the kinds found, never
//! a value.

use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::{GatewayBuilder, call, text};

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

    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let records = loop {
        let records: Vec<Value> = std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .map(|line| serde_json::from_str::<Value>(line).unwrap())
            .filter(|record| record["kind"] == "guardrail")
            .collect();
        if records.len() >= 3 || tokio::time::Instant::now() > deadline {
            break records;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
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
