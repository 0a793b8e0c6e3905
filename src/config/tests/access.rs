//! `[[policy]]` and `[endpoints]`: what they say, and the mistakes they are refused for.

use super::{assert_has, load, problems};
use crate::config::PrefixMode;

#[test]
fn rules_and_endpoints_as_written() {
    let config = load(
        "s.toml",
        r#"
        [[policy]]
        name = "contractors"
        who = { groups = ["contractors"], claims = { org = "acme", roles = ["a", "b"] } }
        deny = { upstreams = ["db"], tools = ["github:delete_*"] }

        [[policy]]
        allow.tools = ["*:get_*"]

        [endpoints.readonly]
        upstreams = ["github"]
        deny.prompts = ["*:*"]
        [endpoints.readonly.tools."github:get_issue"]
        name = "issue"
        description = "One issue, by number"

        [endpoints.all]
        path = "/servers/all/mcp"
        prefix_mode = "always"
        "#,
    )
    .unwrap();
    assert_eq!(config.policy.len(), 2);
    let contractors = &config.policy[0];
    assert_eq!(contractors.name, "contractors");
    assert_eq!(
        contractors.who.groups.as_deref(),
        Some(&["contractors".to_owned()][..])
    );
    assert_eq!(
        contractors.who.claims,
        [
            ("org".to_owned(), vec!["acme".to_owned()]),
            ("roles".to_owned(), vec!["a".to_owned(), "b".to_owned()])
        ]
    );
    assert_eq!(contractors.gate.deny.upstreams.as_ref().unwrap().len(), 1);
    assert!(contractors.gate.allow.tools.is_none());
    assert_eq!(config.policy[1].name, "policy[1]");
    let [readonly, all] = &config.endpoints[..] else {
        panic!("two endpoints");
    };
    assert_eq!(readonly.path, "/profiles/readonly/mcp");
    assert_eq!(readonly.gate.allow.upstreams.as_ref().unwrap().len(), 1);
    let shape = &readonly.tools[&("github".to_owned(), "get_issue".to_owned())];
    assert_eq!(shape.name.as_deref(), Some("issue"));
    assert_eq!(
        (all.path.as_str(), all.prefix_mode),
        ("/servers/all/mcp", Some(PrefixMode::Always))
    );
}

#[test]
fn mistakes_are_located() {
    let found = problems(
        "s.toml",
        r#"
        [server]
        endpoint_path = "/mcp"
        [[policy]]
        who = { principals = ["[user"] }
        deny = { tools = ["github"], resources = ["files:"] }
        [[policy]]
        name = "does nothing"
        [endpoints.one]
        path = "/mcp"
        [endpoints.two]
        path = "/oauth/x"
        [endpoints."bad name"]
        path = "relative"
        upstreams = ["a"]
        allow.upstreams = ["b"]
        prefix_mode = "sometimes"
        [endpoints.three.tools."github"]
        name = "x"
        [endpoints.three.tools."github:t"]
        name = "has space"
        [endpoints.four.tools."github:t"]
        "#,
    );
    for expected in [
        "policy[0].who.principals: `[user` is not a valid pattern",
        "policy[0].deny.tools: `github` needs the form UPSTREAM:NAME",
        "policy[0].deny.resources: `files:` names no item after the `:`",
        "policy[1]: has neither `allow`, `deny` nor `approval`",
        "endpoints.one.path: `/mcp` is already served by server.endpoint_path",
        "endpoints.two.path: `/oauth/x` is taken by Switchyard's own endpoints",
        "endpoints.\"bad name\": an endpoint's name holds only letters, digits",
        "endpoints.\"bad name\".path: `relative` must be a path starting with `/`",
        "endpoints.\"bad name\".upstreams: give the upstreams once",
        "endpoints.\"bad name\".prefix_mode: `sometimes` is not one of",
        "endpoints.three.tools.github: name one tool as \"UPSTREAM:TOOL\"",
        "endpoints.three.tools.\"github:t\".name: `has space` is not a tool name",
        "endpoints.four.tools.\"github:t\": give a `name`, a `description` or both",
    ] {
        assert_has(&found, expected);
    }
}

#[test]
fn resource_patterns_that_could_never_match_are_refused() {
    for (pattern, reason) in [
        ("notes:FILE:///x/*", "lowercase"),
        ("notes:file://Host/x", "lowercase"),
        ("notes:file:///public/../x", "`..` segments"),
    ] {
        let text = format!("[[policy]]\nallow.resources = [{pattern:?}]\n");
        let error = super::load("p.toml", &text).unwrap_err().to_string();
        assert!(error.contains(reason), "{pattern}: {error}");
    }
    assert!(
        super::load(
            "p.toml",
            "[[policy]]\nallow.resources = [\"n:file:///Public/*\"]\n"
        )
        .is_ok()
    );
}

#[test]
fn approval_rules_and_their_mistakes() {
    let config = load(
        "/etc/switchyard/switchyard.toml",
        r#"
        [[policy]]
        name = "destructive"
        who.groups = ["engineers"]
        approval = { tools = ["github:delete_*"], arguments = { force = true, branch = ["main", "release"] }, by = "operator", timeout_seconds = 30, mask = ["token"] }
        "#,
    )
    .unwrap();
    let rule = &config.policy[0];
    let approval = rule.approval.as_ref().unwrap();
    assert_eq!(approval.by, crate::policy::Approver::Operator);
    assert_eq!(approval.timeout, std::time::Duration::from_secs(30));
    assert_eq!(approval.mask, ["token"]);
    let args = serde_json::json!({"force": true, "branch": "release"});
    assert!(approval.covers("github", "delete_repo", args.as_object()));
    assert!(!approval.covers("github", "create_repo", args.as_object()));
    assert!(rule.gate.is_open(), "an approval rule hides nothing");

    let found = problems(
        "s.toml",
        r#"
        [[policy]]
        approval = { tools = ["delete_*"], upstreams = ["[x"], by = "anyone", timeout_seconds = -1 }
        "#,
    );
    for expected in [
        "policy[0].approval.tools: `delete_*` needs the form UPSTREAM:NAME",
        "policy[0].approval.upstreams: `[x` is not a valid pattern",
        "policy[0].approval.by: `anyone` is not one of `user`, `operator`",
        "policy[0].approval.timeout_seconds: must be a positive number of seconds",
    ] {
        assert_has(&found, expected);
    }
}

#[test]
fn item_rules_beside_the_passthrough_are_warned_of() {
    let text = "[server]\npassthrough_listen = \"127.0.0.1:8081\"\n\
                [[policy]]\nname = \"no-deleting\"\ndeny.tools = [\"*:delete_*\"]\n\
                [[policy]]\ndeny.upstreams = [\"db\"]\n";
    let warnings = load("w.toml", text).unwrap().warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("no-deleting") && !warnings[0].contains("policy[1]"));
    let without = text.replace("passthrough_listen = \"127.0.0.1:8081\"\n", "");
    assert!(load("w.toml", &without).unwrap().warnings().is_empty());
    // Calls that wait for approval are not held there either.
    let approving =
        format!("{text}[[policy]]\nname = \"careful\"\napproval.tools = [\"*:drop_*\"]\n");
    let warnings = load("w.toml", &approving).unwrap().warnings();
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(warnings[1].contains("careful") && warnings[1].contains("approval"));
}
