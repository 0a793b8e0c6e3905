//! A LangChain `MultiServerMCPClient` configuration serves as Switchyard's own: its servers
//! are served with its options mapped (transports, retries, timeouts, naming), and its
//! `outputHandling` of resources as `content` has the resources a tool result links to read
//! and inlined, through the caller's own routing and policy.

use std::time::Duration;

use serde_json::{Value, json};

use crate::{
    fixtures::notes::NotesServer,
    harness::{GatewayBuilder, SWITCHYARD, TestGateway, call, text, tool_names},
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_langchain_file_serves_its_servers_and_inlines_linked_resources() {
    let notes = NotesServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("langchain.json");
    let file = json!({
        "throwOnLoadError": true,
        "prefixToolNameWithServerName": true,
        "additionalToolNamePrefix": "",
        "useStandardContentBlocks": true,
        "defaultToolTimeout": 20000,
        "mcpServers": {
            "notes": {
                "transport": "http",
                "url": notes.url(),
                "automaticSSEFallback": false,
                "reconnect": {"enabled": true, "maxAttempts": 3, "delayMs": 100},
                "outputHandling": {"text": "content", "resource": "content"},
            },
            "local": {
                "transport": "stdio",
                "command": SWITCHYARD,
                "args": ["demo-server"],
                "stderr": "pipe",
                "restart": {"enabled": true, "maxAttempts": 2, "delayMs": 50},
            },
        },
    });
    std::fs::write(&path, file.to_string()).unwrap();
    let config = switchyard::config::load(&path).expect("a LangChain file loads");
    let notes_config = (config.upstreams.iter())
        .find(|u| u.name.as_str() == "notes")
        .unwrap();
    assert_eq!(notes_config.policy.tool_timeout, Duration::from_secs(20));
    assert_eq!(notes_config.policy.restart.max_attempts, Some(3));
    let gw = TestGateway::start(config).await;
    let client = gw.client().await;
    let names = tool_names(&client).await;
    assert!(names.contains(&"local__echo".to_owned()), "{names:?}");
    assert!(
        names.contains(&"notes__mixed_content".to_owned()),
        "{names:?}"
    );

    let result = call(&client, "notes__mixed_content", json!({}))
        .await
        .unwrap();
    let content = serde_json::to_value(&result.content).unwrap();
    assert_eq!(
        content[3],
        json!({"type": "resource", "resource": {
            "uri": "notes+notes://note/1", "mimeType": "text/plain", "text": "note 1"
        }}),
        "the link arrives inlined, read through the gateway: {content:#}"
    );
    assert_eq!(content[4]["resource"]["text"], "second note", "as it was");
    let echoed = call(&client, "local__echo", json!({"text": "hi"}))
        .await
        .unwrap();
    assert_eq!(text(&echoed), "hi");
}

/// A resource the caller may not read stays a link: inlining reads as the caller, so it
/// cannot be used to read around policy; and what would go beyond `inline_max_bytes` stays a
/// link too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inlining_reads_only_what_the_caller_may_read_and_only_so_much() {
    let notes = NotesServer::start().await;
    let upstream = |max: u32| {
        format!(
            "transport = \"streamable_http\"\nurl = {:?}\ninline_resources = true\n\
             inline_max_bytes = {max}",
            notes.url()
        )
    };
    let gw = GatewayBuilder::new()
        .upstream("notes", &upstream(1024))
        .section("[[policy]]\ndeny.resources = [\"notes:notes://note/1\"]")
        .start()
        .await;
    let client = gw.client().await;
    let result = call(&client, "notes__mixed_content", json!({}))
        .await
        .unwrap();
    let content = serde_json::to_value(&result.content).unwrap();
    assert_eq!(content[3]["type"], "resource_link", "denied: {content:#}");

    let small = GatewayBuilder::new()
        .upstream("notes", &upstream(3))
        .start()
        .await;
    let client = small.client().await;
    let result = call(&client, "notes__mixed_content", json!({}))
        .await
        .unwrap();
    let content: Value = serde_json::to_value(&result.content).unwrap();
    assert_eq!(content[3]["type"], "resource_link", "too big: {content:#}");
}
