//! Policy and virtual endpoints, through real clients: what a user may not use is absent from
//! their lists and answered as unknown, for session and stateless clients alike; a virtual
//! endpoint serves its subset under its own names; sessions stay at the endpoint that opened
//! them.

use rmcp::model::{CallToolRequestParams, GetPromptRequestParams, ReadResourceRequestParams};
use serde_json::json;

use crate::harness::{
    Client, GatewayBuilder, INITIALIZE, TestGateway, api_key, post_mcp, tool_names, user_client,
};

/// alice is staff, bob a contractor, carol neither.
fn users() -> String {
    [("alice", "staff"), ("bob", "contractors"), ("carol", "")]
        .iter()
        .map(|(user, group)| {
            format!(
                "[auth.api_keys.{user}]\nsha256 = {:?}\ngroups = [{}]\n",
                switchyard::config::hash_api_key(&api_key(user)),
                if group.is_empty() {
                    String::new()
                } else {
                    format!("{group:?}")
                }
            )
        })
        .collect()
}

const POLICY: &str = r#"
[[policy]]
name = "contractors"
who.groups = ["contractors"]
deny.upstreams = ["other"]
deny.tools = ["demo:slow_task", "demo:incr*"]
deny.resources = ["demo:demo://greeting/*"]

[[policy]]
name = "no prompts for carol"
who.principals = ["user:key:carol"]
allow.prompts = []

[endpoints.readonly]
upstreams = ["demo"]
prefix_mode = "never"
allow.tools = ["demo:add", "demo:echo"]
[endpoints.readonly.tools."demo:add"]
name = "sum"
description = "Adds a and b"
"#;

async fn gateway() -> TestGateway {
    GatewayBuilder::new()
        .section(&format!("{}{POLICY}", users()))
        .demo("demo")
        .demo("other")
        .start()
        .await
}

/// The error a call of tool `name` gets, with the name taken out of its message.
async fn call_error(client: &Client, name: &str) -> (i32, String) {
    let error = client
        .call_tool(CallToolRequestParams::new(name.to_owned()))
        .await
        .expect_err("the call is refused");
    let rmcp::ServiceError::McpError(error) = error else {
        panic!("not a JSON-RPC error: {error}");
    };
    (error.code.0, error.message.replace(name, "NAME"))
}

#[tokio::test]
async fn what_a_user_may_not_use_is_absent_and_unknown() {
    let gw = gateway().await;
    let alice = user_client(&gw.url(), "alice", false).await;
    let everything = tool_names(&alice).await;
    assert!(everything.contains(&"demo__slow_task".to_owned()));
    assert!(everything.contains(&"other__echo".to_owned()));

    for modern in [false, true] {
        let bob = user_client(&gw.url(), "bob", modern).await;
        let tools = tool_names(&bob).await;
        let expected: Vec<_> = everything
            .iter()
            .filter(|t| {
                t.starts_with("demo__") && *t != "demo__slow_task" && !t.starts_with("demo__incr")
            })
            .cloned()
            .collect();
        assert_eq!(tools, expected, "modern: {modern}");
        // Denied answers exactly as unknown: as a made-up name of the same words, whose
        // closest names (looked up among the tools bob sees) are the same.
        for (denied, made_up) in [
            ("demo__slow_task", "demo__task_slow"),
            ("other__echo", "echo__other"),
        ] {
            let refused = call_error(&bob, denied).await;
            assert_eq!(refused, call_error(&bob, made_up).await);
            assert!(refused.1.starts_with("unknown tool `NAME`"), "{refused:?}");
            // The closest names are tools he may call, never the hidden ones.
            let (_, closest) = refused.1.split_once("the closest: ").expect(&refused.1);
            for name in closest.split(", ") {
                let name = name.trim_matches('`').to_owned();
                assert!(tools.contains(&name), "{name} in {refused:?}");
            }
        }
        let unknown = call_error(&bob, "demo__no_such_tool").await;
        assert!(unknown.1.contains("NAME"), "{unknown:?}");
        let result = bob
            .call_tool(
                CallToolRequestParams::new("demo__echo")
                    .with_arguments(json!({"text": "hi"}).as_object().unwrap().clone()),
            )
            .await
            .unwrap();
        assert_eq!(crate::harness::text(&result), "hi");
        // Resources: the greeting template is gone, reading through it is refused.
        let templates = bob.list_all_resource_templates().await.unwrap();
        assert!(templates.is_empty(), "{templates:?}");
        let read = |uri: &str| bob.read_resource(ReadResourceRequestParams::new(uri.to_owned()));
        let refused = read("demo+demo://greeting/bob").await.unwrap_err();
        let never = read("nowhere+x://y").await.unwrap_err();
        assert_eq!(
            refused
                .to_string()
                .replace("demo+demo://greeting/bob", "URI"),
            never.to_string().replace("nowhere+x://y", "URI")
        );
        assert!(read("other+demo://about").await.is_err());
        assert!(read("demo+demo://about").await.is_ok());
        bob.cancel().await.unwrap();
    }
    let greeting = alice
        .read_resource(ReadResourceRequestParams::new("demo+demo://greeting/alice"))
        .await;
    assert!(greeting.is_ok());

    // carol: tools as everyone, no prompts at all.
    let carol = user_client(&gw.url(), "carol", false).await;
    assert_eq!(tool_names(&carol).await, everything);
    assert!(carol.list_all_prompts().await.unwrap().is_empty());
    let prompt = GetPromptRequestParams::new("demo__summarize")
        .with_arguments(json!({"text": "t"}).as_object().unwrap().clone());
    assert!(carol.get_prompt(prompt.clone()).await.is_err());
    assert!(!alice.list_all_prompts().await.unwrap().is_empty());
    assert!(alice.get_prompt(prompt).await.is_ok());
}

#[tokio::test]
async fn a_virtual_endpoint_serves_its_subset_under_its_names() {
    let gw = gateway().await;
    let readonly = gw.url_at("/profiles/readonly/mcp");
    for modern in [false, true] {
        let alice = user_client(&readonly, "alice", modern).await;
        let mut names = tool_names(&alice).await;
        names.sort();
        assert_eq!(names, ["echo", "sum"]);
        let tools = alice.list_all_tools().await.unwrap();
        let sum = tools.iter().find(|t| t.name == "sum").unwrap();
        assert_eq!(sum.description.as_deref(), Some("Adds a and b"));
        let sum = alice
            .call_tool(
                CallToolRequestParams::new("sum")
                    .with_arguments(json!({"a": 2, "b": 3}).as_object().unwrap().clone()),
            )
            .await
            .unwrap();
        assert_eq!(sum.structured_content, Some(json!({"sum": 5.0})));
        // The upstream's own name, and everything else, are unknown here.
        for name in ["add", "demo__add", "now", "other__echo"] {
            assert!(
                alice
                    .call_tool(CallToolRequestParams::new(name.to_owned()))
                    .await
                    .is_err(),
                "{name}"
            );
        }
        alice.cancel().await.unwrap();
    }

    // A session stays at the endpoint that opened it.
    let bearer = format!("Bearer {}", api_key("alice"));
    let opened = post_mcp(&gw, Some(&bearer), None, INITIALIZE).await;
    let session = opened.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let elsewhere = reqwest::Client::new()
        .post(&readonly)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("authorization", &bearer)
        .header("mcp-session-id", &session)
        .body(r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(elsewhere.status(), 404);

    // Paths no endpoint serves are not found.
    let nowhere = reqwest::Client::new()
        .post(gw.url_at("/profiles/nope/mcp"))
        .body(INITIALIZE)
        .send()
        .await
        .unwrap();
    assert_eq!(nowhere.status(), 404);
}
