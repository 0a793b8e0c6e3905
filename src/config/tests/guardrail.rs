//! `[[guardrail]]`: detectors and what they screen, policy hooks, and the mistakes they are
//! refused for.

use std::time::Duration;

use super::{assert_has, load, problems};
use crate::guardrail::{Action, Check, hook::Failure};

#[test]
fn guardrails_and_their_mistakes() {
    let config = load(
        "s.toml",
        r#"
        [[guardrail]]
        detect = ["personal", "aws_access_key", "email"]
        [[guardrail]]
        name = "strict"
        tools = ["github:*"]
        detect = ["secrets"]
        action = "block"
        "#,
    )
    .unwrap();
    let [open, strict] = config.guardrails.as_slice() else {
        panic!("two rules")
    };
    assert_eq!(open.name, "guardrail[0]");
    let Check::Detect {
        detectors,
        action,
        screen,
    } = &open.check
    else {
        panic!("detectors")
    };
    assert_eq!(*action, Action::Redact);
    assert_eq!(detectors.len(), 5, "a detector named twice is one");
    assert!(screen.results && !screen.arguments, "results, by default");
    assert!(open.calls.covers("anything", "any_tool"));
    assert!(strict.calls.covers("github", "get_file") && !strict.calls.covers("files", "read"));

    let found = problems(
        "s.toml",
        r#"
        [[guardrail]]
        tools = ["read"]
        detect = ["ssn"]
        action = "hide"
        [[guardrail]]
        name = "nothing"
        "#,
    );
    for expected in [
        "guardrail[0].tools: `read` needs the form UPSTREAM:NAME",
        "guardrail[0].detect: `ssn` is not a detector: `secrets`, `personal`, or one of",
        "guardrail[0].action: `hide` is not one of `redact`, `block`, `flag`",
        "guardrail[1].detect: is needed",
    ] {
        assert_has(&found, expected);
    }
}

#[test]
fn a_hook_as_written_and_its_defaults() {
    let config = load(
        "s.toml",
        r#"
        [[guardrail]]
        name = "corp-policy"
        upstreams = ["github"]
        screen = ["arguments", "results"]
        detect = ["secrets"]
        [[guardrail]]
        name = "hook"
        tools = ["github:*"]
        hook = { url = "https://policy.example/check", timeout_seconds = 0.5, failure = "open", after = true, headers = { Authorization = "Bearer ${env:GH_TOKEN}" } }
        [[guardrail]]
        hook.url = "http://127.0.0.1:9/check"
        "#,
    )
    .unwrap();
    let [both, hook, plain] = config.guardrails.as_slice() else {
        panic!("three rules")
    };
    let Check::Detect { screen, .. } = &both.check else {
        panic!("detectors")
    };
    assert!(screen.arguments && screen.results);
    let Check::Hook(hook) = &hook.check else {
        panic!("a hook")
    };
    assert_eq!(hook.url.as_str(), "https://policy.example/check");
    assert_eq!(hook.timeout, Duration::from_millis(500));
    assert_eq!(hook.failure, Failure::Open);
    assert!(hook.before && hook.after);
    let (name, value) = &hook.headers[0];
    assert_eq!(
        (name.as_str(), value.to_str().unwrap()),
        ("authorization", "Bearer ghp_123")
    );
    assert!(value.is_sensitive(), "a credential is kept out of logs");
    assert!(!format!("{:?}", config.guardrails).contains("ghp_123"));
    let Check::Hook(plain) = &plain.check else {
        panic!("a hook")
    };
    assert_eq!(plain.timeout, Duration::from_secs(1));
    assert_eq!(plain.failure, Failure::Closed);
    assert!(
        plain.before && !plain.after,
        "asked before calls, by default"
    );
}

#[test]
fn hook_mistakes_are_named_by_key() {
    let found = problems(
        "s.toml",
        r#"
        [[guardrail]]
        detect = ["secrets"]
        action = "block"
        hook = { url = "https://policy.example/check" }
        [[guardrail]]
        hook = { timeout_seconds = 2 }
        [[guardrail]]
        hook = { url = "ftp://policy.example", failure = "maybe", timeout_seconds = -1 }
        [[guardrail]]
        hook = { url = "https://policy.example", before = false, headers = { X-User = "${claim:sub}" } }
        [[guardrail]]
        detect = ["email"]
        screen = ["prompts"]
        "#,
    );
    for expected in [
        "guardrail[0].detect: is for detectors: a guardrail has detectors or a `hook`, not both",
        "guardrail[0].action: is for detectors",
        "guardrail[1].hook.url: is needed",
        "guardrail[2].hook.url: `ftp://policy.example` is not an http:// or https:// URL",
        "guardrail[2].hook.failure: `maybe` is not one of `closed`, `open`",
        "guardrail[2].hook.timeout_seconds: must be a positive number of seconds",
        "guardrail[3].hook: is never asked",
        "guardrail[3].hook.headers: cannot name the user's claims",
        "guardrail[4].screen[0]: `prompts` is not one of `results`, `arguments`",
    ] {
        assert_has(&found, expected);
    }
    assert!(
        !found.iter().any(|p| p.contains("guardrail[1].detect")),
        "{found:?}"
    );
}

#[test]
fn guardrails_beside_the_passthrough_are_warned_of() {
    let text = "[server]\npassthrough_listen = \"127.0.0.1:8081\"\n\
                [[guardrail]]\nname = \"corp-policy\"\nhook.url = \"http://127.0.0.1:9/\"\n";
    let warnings = load("w.toml", text).unwrap().warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("corp-policy") && warnings[0].contains("guardrails"));
    let without = text.replace("passthrough_listen = \"127.0.0.1:8081\"\n", "");
    assert!(load("w.toml", &without).unwrap().warnings().is_empty());
}
