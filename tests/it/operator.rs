//! The operator's MCP server on the admin listener: an MCP client with the admin token runs
//! the gateway through its tools (status, servers, switching an upstream off and on, a
//! reload), refusals come back as tool errors with the admin API's message, and without the
//! token, or from a page of another origin, nothing is served.

use rmcp::{
    ServiceExt,
    model::CallToolRequestParams,
    transport::{
        StreamableHttpClientTransport, streamable_http_client::StreamableHttpClientTransportConfig,
    },
};
use serde_json::{Value, json};

use crate::harness::{GatewayBuilder, TEST_ADMIN_TOKEN, text};

type Operator = rmcp::service::RunningService<rmcp::RoleClient, ()>;

async fn operate(client: &Operator, tool: &str, arguments: Value) -> (bool, Value) {
    let result = client
        .call_tool(
            CallToolRequestParams::new(tool.to_owned())
                .with_arguments(arguments.as_object().unwrap().clone()),
        )
        .await
        .unwrap_or_else(|e| panic!("{tool}: {e}"));
    let answer = serde_json::from_str(text(&result)).unwrap_or(Value::Null);
    (result.is_error != Some(true), answer)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_runs_the_gateway_from_an_mcp_client() {
    let dir = tempfile::tempdir().unwrap();
    let gw = GatewayBuilder::two_demos_on_file(dir.path()).await;
    let config = StreamableHttpClientTransportConfig::with_uri(gw.admin_url("/mcp"))
        .auth_header(TEST_ADMIN_TOKEN);
    let client =
        ().serve(StreamableHttpClientTransport::from_config(config))
            .await
            .expect("the operator's client connects");
    let info = client.peer_info().unwrap();
    assert_eq!(
        info.server_info.as_ref().unwrap().name,
        "switchyard-operator"
    );
    let mut names: Vec<String> = (client.list_all_tools().await.unwrap().into_iter())
        .map(|tool| tool.name.to_string())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "approve_tools",
            "decide_call",
            "disable",
            "enable",
            "held_tools",
            "reconnect",
            "rediscover",
            "reload",
            "servers",
            "status",
            "waiting_calls"
        ]
    );

    let (ok, status) = operate(&client, "status", json!({})).await;
    assert!(ok);
    assert_eq!(status["servers"][0]["name"], "demo", "{status}");
    let (ok, servers) = operate(&client, "servers", json!({})).await;
    assert!(ok);
    assert_eq!(servers["servers"]["other"]["state"], "ready");

    let (ok, answer) = operate(&client, "disable", json!({"name": "other"})).await;
    assert!(ok, "{answer}");
    assert_eq!(answer["enabled"], false);
    let (_, status) = operate(&client, "status", json!({})).await;
    assert_eq!(status["disabled"], json!(["other"]));
    let (ok, _) = operate(&client, "enable", json!({"name": "other"})).await;
    assert!(ok);
    let (ok, reload) = operate(&client, "reload", json!({})).await;
    assert!(ok, "{reload}");
    assert_eq!(reload["trigger"], "admin");

    let (ok, refused) = operate(&client, "reconnect", json!({"name": "nothing"})).await;
    assert!(!ok, "a tool error");
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("no upstream named `nothing`"),
        "{refused}"
    );
    let (ok, refused) = operate(&client, "approve_tools", json!({"upstream": "demo"})).await;
    assert!(!ok);
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("waits for approval")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_endpoint_refuses_calls_without_the_token_or_from_pages() {
    let gw = GatewayBuilder::new().demo("demo").start().await;
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    let http = reqwest::Client::new();
    let post = || {
        http.post(gw.admin_url("/mcp"))
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-11-25")
            .json(&list)
    };
    let bare = post().send().await.unwrap();
    assert_eq!(bare.status(), 401, "no token");
    let wrong = post().bearer_auth("not-the-token").send().await.unwrap();
    assert_eq!(wrong.status(), 401, "a wrong token");
    let page = (post().bearer_auth(TEST_ADMIN_TOKEN))
        .header("origin", "http://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 403, "a page of another origin");
    let rebound = (post().bearer_auth(TEST_ADMIN_TOKEN))
        .header("host", "rebound.evil.example:9090")
        .send()
        .await
        .unwrap();
    assert_eq!(rebound.status(), 403, "a rebound host name");

    // The main endpoint has none of it: its tools are the upstreams'.
    let client = gw.client().await;
    let names = crate::harness::tool_names(&client).await;
    assert!(
        !names
            .iter()
            .any(|name| name == "reload" || name == "disable"),
        "{names:?}"
    );
}
