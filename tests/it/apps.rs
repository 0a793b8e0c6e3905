//! MCP Apps through the gateway: a server built on the official Python SDK's Apps extension,
//! whose tool names its interface (`ui://…`, in `_meta.ui` and in the older flat keys). Through
//! the gateway the tool names its interface by the URI the gateway lists it under (before,
//! the advertised URI could not be read: `-32002 unknown resource`), reading that URI gives the
//! interface as the server serves it (its CSP and permissions verbatim), and the gateway
//! advertises the extension to clients of both eras.

use rmcp::{
    ServiceExt,
    model::{ReadResourceRequestParams, ResourceContents},
    transport::TokioChildProcess,
};
use serde_json::{Value, json};

use crate::{deps, harness::GatewayBuilder};

const INTERFACE: &str = "ui://widget/clock.html";

/// The `_meta` of a resource read's first contents, and the contents as JSON.
fn first_contents(contents: &[ResourceContents]) -> Value {
    serde_json::to_value(&contents[0]).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_apps_interface_is_read_through_the_gateway_where_its_tool_says() {
    let (python, client) = deps::python();
    let server = client.with_file_name("apps_server.py");
    let gw = GatewayBuilder::new()
        .upstream(
            "probe",
            &format!("command = {python:?}\nargs = [{server:?}]\nconnect_timeout_seconds = 30"),
        )
        .demo("demo")
        .start()
        .await;

    // Directly, as the server serves it.
    let mut command = tokio::process::Command::new(python);
    command.arg(&server);
    let direct = ().serve(TokioChildProcess::new(command).unwrap()).await.unwrap();
    let tools = direct.list_all_tools().await.unwrap();
    let tool = tools.iter().find(|t| t.name == "clock").unwrap();
    let direct_tool = serde_json::to_value(tool).unwrap();
    assert_eq!(direct_tool["_meta"]["ui"]["resourceUri"], INTERFACE);
    let read = direct
        .read_resource(ReadResourceRequestParams::new(INTERFACE))
        .await
        .unwrap();
    let direct_contents = first_contents(&read.contents);
    direct.cancel().await.unwrap();

    // Through the gateway: the tool names the interface as the gateway lists it.
    let client = gw.client().await;
    let advertised = client
        .peer_info()
        .and_then(|info| info.capabilities.extensions.clone())
        .unwrap_or_default();
    assert!(
        advertised.contains_key("io.modelcontextprotocol/ui"),
        "{advertised:?}"
    );
    let tools = client.list_all_tools().await.unwrap();
    let tool = tools.iter().find(|t| t.name == "probe__clock").unwrap();
    let shown = serde_json::to_value(tool).unwrap();
    let mapped = format!("probe+{INTERFACE}");
    let meta = &shown["_meta"];
    assert_eq!(meta["ui"]["resourceUri"], mapped.as_str(), "{shown}");
    assert_eq!(meta["ui"]["visibility"], json!(["model", "app"]), "{shown}");
    assert_eq!(meta["ui/resourceUri"], mapped.as_str(), "{shown}");
    assert_eq!(meta["openai/outputTemplate"], mapped.as_str(), "{shown}");
    // All else as the server wrote it.
    let mut unmapped = shown.clone();
    unmapped["name"] = json!("clock");
    for key in ["ui/resourceUri", "openai/outputTemplate"] {
        unmapped["_meta"][key] = json!(INTERFACE);
    }
    unmapped["_meta"]["ui"]["resourceUri"] = json!(INTERFACE);
    assert_eq!(unmapped, direct_tool);

    // The advertised URI reads, and the interface is the server's, its `_meta` verbatim.
    let listed = client.list_all_resources().await.unwrap();
    assert!(listed.iter().any(|r| r.uri == mapped), "{listed:?}");
    let read = client
        .read_resource(ReadResourceRequestParams::new(mapped.clone()))
        .await
        .unwrap();
    let mut contents = first_contents(&read.contents);
    assert_eq!(contents["uri"], mapped.as_str());
    contents["uri"] = json!(INTERFACE);
    assert_eq!(contents, direct_contents);
    assert_eq!(contents["mimeType"], "text/html;profile=mcp-app");
    assert_eq!(
        contents["_meta"]["ui"]["csp"]["connectDomains"],
        json!(["https://api.example.com"])
    );
    client.cancel().await.unwrap();

    // A 2026-07-28 client is told of the extension at discovery.
    let modern = gw.modern_client().await;
    let advertised = modern
        .peer_info()
        .and_then(|info| info.capabilities.extensions.clone())
        .unwrap_or_default();
    assert!(
        advertised.contains_key("io.modelcontextprotocol/ui"),
        "{advertised:?}"
    );
    modern.cancel().await.unwrap();
}
