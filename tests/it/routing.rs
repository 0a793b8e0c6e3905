//! Requests reach the owning upstream with the original name restored, and answers come back
//! unchanged: results of every shape, upstream errors, and clear errors for unknown names.

use rmcp::{
    ServiceError,
    model::{
        ArgumentInfo, CompleteRequestParams, ErrorCode, GetPromptRequestParams, PromptReference,
        ReadResourceRequestParams, Reference, ResourceContents, ResourceTemplateReference,
    },
};
use serde_json::json;

use crate::{
    fixtures::notes::{FIXTURE_ERROR_CODE, NotesServer},
    harness::{Client, GatewayBuilder, call, connect_client, text, two_upstreams},
};

fn rpc_error(result: Result<impl std::fmt::Debug, ServiceError>) -> rmcp::ErrorData {
    match result {
        Err(ServiceError::McpError(error)) => error,
        other => panic!("expected a JSON-RPC error, got {other:?}"),
    }
}

async fn read_text(client: &Client, uri: &str) -> (String, String) {
    let result = client
        .read_resource(ReadResourceRequestParams::new(uri))
        .await
        .unwrap();
    match &result.contents[0] {
        ResourceContents::TextResourceContents { uri, text, .. } => (uri.clone(), text.clone()),
        other => panic!("text expected, got {other:?}"),
    }
}

#[tokio::test]
async fn calls_reach_their_upstream_with_arguments_intact() {
    let (_notes, gw) = two_upstreams().await;
    let client = gw.client().await;

    let local = call(&client, "local__echo", json!({"text": "hello"}))
        .await
        .unwrap();
    assert_eq!(text(&local), "hello");
    let remote = call(&client, "remote__echo", json!({"text": "hello"}))
        .await
        .unwrap();
    assert_eq!(text(&remote), "notes: hello");

    let arguments = json!({
        "text": "ünïcödé ✓", "n": 1.5, "big": 9007199254740993_u64, "list": [1, [2, {"x": null}]],
        "nested": {"a": {"b": {"c": true}}}, "empty": {}
    });
    let inspected = call(&client, "remote__inspect", arguments.clone())
        .await
        .unwrap();
    assert_eq!(inspected.structured_content.unwrap(), arguments);
}

#[tokio::test]
async fn results_come_back_unchanged_but_for_resource_uris() {
    let (notes, gw) = two_upstreams().await;
    let client = gw.client().await;
    let direct = connect_client(&notes.url(), "direct").await;

    let through = call(&client, "remote__tool_error", json!({}))
        .await
        .unwrap();
    let expected = call(&direct, "tool_error", json!({})).await.unwrap();
    assert_eq!(
        serde_json::to_value(&through).unwrap(),
        serde_json::to_value(&expected).unwrap()
    );
    assert_eq!(through.is_error, Some(true));

    // Every block kind, structured content and _meta pass through; the URIs of linked and
    // embedded resources are mapped like listed ones, and only they.
    let through = call(&client, "remote__mixed_content", json!({}))
        .await
        .unwrap();
    let mut expected =
        serde_json::to_value(call(&direct, "mixed_content", json!({})).await.unwrap()).unwrap();
    expected["content"][3]["uri"] = json!("remote+notes://note/1");
    for i in [4, 5] {
        let uri = expected["content"][i]["resource"]["uri"]
            .as_str()
            .unwrap()
            .to_owned();
        expected["content"][i]["resource"]["uri"] = json!(format!("remote+{uri}"));
    }
    assert_eq!(serde_json::to_value(&through).unwrap(), expected);

    // What a result links to can be read back through the gateway.
    let link = through.content[3].as_resource_link().unwrap();
    assert_eq!(read_text(&client, &link.uri).await.1, "note 1");

    let structured = call(&client, "local__add", json!({"a": 2, "b": 40}))
        .await
        .unwrap();
    assert_eq!(structured.structured_content.unwrap(), json!({"sum": 42.0}));
}

#[tokio::test]
async fn upstream_json_rpc_errors_pass_through() {
    let (_notes, gw) = two_upstreams().await;
    let client = gw.client().await;
    let error = rpc_error(call(&client, "remote__fail_rpc", json!({})).await);
    assert_eq!(error.code, ErrorCode(FIXTURE_ERROR_CODE));
    assert_eq!(error.message, "fixture failure");
    assert_eq!(error.data, Some(json!({"detail": "on purpose"})));
}

#[tokio::test]
async fn prompts_resources_and_templates_are_routed() {
    let (_notes, gw) = two_upstreams().await;
    let client = gw.client().await;

    let prompt = client
        .get_prompt(
            GetPromptRequestParams::new("remote__greet")
                .with_arguments(serde_json::from_value(json!({"name": "Ada"})).unwrap()),
        )
        .await
        .unwrap();
    let message = serde_json::to_value(&prompt.messages[0]).unwrap();
    assert_eq!(message["content"]["text"], "Say hello to Ada.");

    assert_eq!(
        read_text(&client, "remote+notes://index").await,
        ("remote+notes://index".into(), "1, 2, 3".into())
    );
    assert_eq!(
        read_text(&client, "remote+notes://note/7").await,
        ("remote+notes://note/7".into(), "note 7".into()),
        "an expanded template is routed, and the URI in the contents is the one the client used"
    );
    assert_eq!(
        read_text(&client, "local+demo://greeting/Ana").await.1,
        "Hello, Ana!"
    );
}

#[tokio::test]
async fn completions_are_routed() {
    let (_notes, gw) = two_upstreams().await;
    let client = gw.client().await;
    let prompt = client
        .complete(CompleteRequestParams::new(
            Reference::Prompt(PromptReference::new("remote__greet")),
            ArgumentInfo::new("name", "al"),
        ))
        .await
        .unwrap();
    assert_eq!(prompt.completion.values, ["alice", "albert"]);
    let template = client
        .complete(CompleteRequestParams::new(
            Reference::Resource(ResourceTemplateReference::new("remote+notes://note/{id}")),
            ArgumentInfo::new("id", "2"),
        ))
        .await
        .unwrap();
    assert_eq!(template.completion.values, ["2"]);
}

#[tokio::test]
async fn unknown_names_get_errors_that_name_them() {
    let (_notes, gw) = two_upstreams().await;
    let client = gw.client().await;

    let error = rpc_error(call(&client, "remote__nope", json!({})).await);
    assert_eq!(error.code, ErrorCode::INVALID_PARAMS);
    assert!(error.message.contains("remote__nope"), "{}", error.message);
    let error = rpc_error(call(&client, "echo", json!({})).await);
    assert!(
        error.message.contains("unknown tool `echo`"),
        "{}",
        error.message
    );

    let error = rpc_error(client.get_prompt(GetPromptRequestParams::new("nope")).await);
    assert!(
        error.message.contains("unknown prompt `nope`"),
        "{}",
        error.message
    );

    for uri in ["notes://index", "elsewhere+notes://index"] {
        let error = rpc_error(
            client
                .read_resource(ReadResourceRequestParams::new(uri))
                .await,
        );
        assert_eq!(error.code, ErrorCode::RESOURCE_NOT_FOUND, "{uri}");
        assert!(error.message.contains(uri), "{}", error.message);
    }
    let error = rpc_error(
        client
            .read_resource(ReadResourceRequestParams::new("remote+notes://missing"))
            .await,
    );
    assert_eq!(
        error.code,
        ErrorCode::RESOURCE_NOT_FOUND,
        "the upstream's own answer"
    );

    let cursor = rmcp::model::PaginatedRequestParams::default().with_cursor(Some("made-up".into()));
    let error = rpc_error(client.list_tools(Some(cursor)).await);
    assert_eq!(error.code, ErrorCode::INVALID_PARAMS);
    assert!(error.message.contains("made-up"), "{}", error.message);

    // The session is still healthy after all that.
    let ok = call(&client, "remote__echo", json!({"text": "still here"}))
        .await
        .unwrap();
    assert_eq!(text(&ok), "notes: still here");
}

#[tokio::test]
async fn stateless_2026_clients_are_served() {
    let (_notes, gw) = two_upstreams().await;
    let client = gw.modern_client().await;
    let tools = client.list_all_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "remote__echo"));
    let result = call(&client, "remote__echo", json!({"text": "modern"}))
        .await
        .unwrap();
    assert_eq!(text(&result), "notes: modern");
    let result = call(&client, "local__now", json!({})).await.unwrap();
    assert!(text(&result).ends_with("UTC)"), "{}", text(&result));
    let error = rpc_error(call(&client, "nope", json!({})).await);
    assert!(error.message.contains("nope"));
}

#[tokio::test]
async fn configured_headers_reach_the_upstream_on_every_request() {
    let notes = NotesServer::start().await;
    let gw = GatewayBuilder::new()
        .upstream(
            "remote",
            &format!(
                "url = {:?}\nheaders = {{ X-Api-Key = \"key-${{env:CARGO_PKG_NAME}}\", Authorization = \"Bearer t0k\" }}",
                notes.url()
            ),
        )
        .start()
        .await;
    let client = gw.client().await;
    for (name, expected) in [
        ("x-api-key", "key-switchyard"),
        ("authorization", "Bearer t0k"),
    ] {
        let seen = call(&client, "remote__header", json!({"name": name}))
            .await
            .unwrap();
        assert_eq!(text(&seen), expected, "{name}");
    }
    // The shared connection (used by stateless clients) carries them too.
    let modern = gw.modern_client().await;
    let seen = call(&modern, "remote__header", json!({"name": "x-api-key"}))
        .await
        .unwrap();
    assert_eq!(text(&seen), "key-switchyard");
}

#[tokio::test]
async fn an_upstream_failing_mid_call_ends_the_call_with_an_error_naming_it() {
    let (notes, gw) = two_upstreams().await;
    let client = gw.client().await;
    let pending = tokio::spawn({
        let client = client.peer().clone();
        async move {
            let mut params = rmcp::model::CallToolRequestParams::new("remote__sleep");
            params = params.with_arguments(serde_json::from_value(json!({"ms": 30000})).unwrap());
            client.call_tool(params).await
        }
    });
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    notes.stop();
    let result = tokio::time::timeout(std::time::Duration::from_secs(10), pending)
        .await
        .expect("the call ends instead of hanging")
        .unwrap();
    let error = rpc_error(result);
    assert!(
        error.message.contains("upstream `remote`"),
        "{}",
        error.message
    );
    assert_eq!(error.data, Some(json!({"upstream": "remote"})));
    // The other upstream is unaffected.
    let ok = call(&client, "local__echo", json!({"text": "fine"}))
        .await
        .unwrap();
    assert_eq!(text(&ok), "fine");
}

#[tokio::test]
async fn requests_with_a_foreign_host_or_origin_are_refused() {
    let (_notes, gw) = two_upstreams().await;
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}});
    let post = |headers: &[(&str, &str)]| {
        let mut request = reqwest::Client::new()
            .post(gw.url())
            .header("accept", "application/json, text/event-stream")
            .json(&body);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.send()
    };
    // DNS rebinding: a name that resolves to this machine, but is not one of its own.
    let response = post(&[("host", "attacker.example")]).await.unwrap();
    assert_eq!(response.status(), reqwest::StatusCode::FORBIDDEN);
    // A web page of another site, in a browser on this machine.
    let response = post(&[("origin", "https://attacker.example")])
        .await
        .unwrap();
    assert_eq!(response.status(), reqwest::StatusCode::FORBIDDEN);
    // By default, pages served from the allowed (loopback) hosts may call, as may any client
    // that is not a web page.
    for headers in [&[("origin", "http://localhost:6274")][..], &[]] {
        let allowed = post(headers).await.unwrap();
        assert_eq!(allowed.status(), reqwest::StatusCode::OK, "{headers:?}");
    }
}

/// Every refusal of the transport is a status with a JSON-RPC error body that says what was
/// wrong, and the gateway goes on serving.
#[tokio::test]
async fn refusals_are_json_rpc_errors_that_say_what_was_wrong() {
    let (_notes, gw) = two_upstreams().await;
    let http = reqwest::Client::new();
    let both = "application/json, text/event-stream";
    let cases: [(&str, &str, &str, u16, i64, &str); 6] = [
        (both, "application/json", "{bad", 400, -32700, "parse error"),
        (
            both,
            "text/plain",
            "{}",
            415,
            -32000,
            "Content-Type must be application/json",
        ),
        (
            "text/html",
            "application/json",
            "{}",
            406,
            -32000,
            "must accept both",
        ),
        (
            both,
            "application/json",
            "[]",
            400,
            -32600,
            "batches are not supported",
        ),
        (
            both,
            "application/json",
            r#"{"jsonrpc":"2.0","id":1}"#,
            400,
            -32600,
            "`method`",
        ),
        (
            both,
            "application/json",
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
            400,
            -32000,
            "Session ID is required",
        ),
    ];
    for (accept, content_type, body, status, code, says) in cases {
        let response = http
            .post(gw.url())
            .header("accept", accept)
            .header("content-type", content_type)
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), status, "{body}");
        let error: serde_json::Value = response.json().await.unwrap();
        assert_eq!(error["jsonrpc"], "2.0");
        assert_eq!(error["error"]["code"], code, "{error}");
        let message = error["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{message}");
    }
    let unknown = http
        .post(gw.url())
        .header("accept", both)
        .header("mcp-session-id", "no-such-session")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), 404);
    let error: serde_json::Value = unknown.json().await.unwrap();
    assert_eq!(error["error"]["code"], -32001);
    let client = gw.client().await;
    assert!(
        !client.list_all_tools().await.unwrap().is_empty(),
        "still serving"
    );
}

/// A client that sends its request headers or body too slowly is cut off after
/// `client_timeout_seconds` (the body with a 408 and a JSON-RPC error); others are served.
#[tokio::test]
async fn slow_clients_are_cut_off() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let gw = crate::harness::GatewayBuilder::new()
        .section("[server]\nclient_timeout_seconds = 1")
        .demo("local")
        .start()
        .await;
    let read_all = async |stream: &mut tokio::net::TcpStream| {
        let mut answer = Vec::new();
        let read = stream.read_to_end(&mut answer);
        tokio::time::timeout(std::time::Duration::from_secs(10), read)
            .await
            .expect("the gateway ends the connection")
            .unwrap();
        String::from_utf8_lossy(&answer).into_owned()
    };

    let mut headers = tokio::net::TcpStream::connect(gw.addr).await.unwrap();
    headers
        .write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .await
        .unwrap();
    read_all(&mut headers).await;

    let mut body = tokio::net::TcpStream::connect(gw.addr).await.unwrap();
    let request = "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\n\
                   accept: application/json, text/event-stream\r\ncontent-length: 100\r\n\r\n{\"jsonrpc\"";
    body.write_all(request.as_bytes()).await.unwrap();
    let answer = read_all(&mut body).await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("did not arrive within 1s"), "{answer}");

    let client = gw.client().await;
    assert!(
        !client.list_all_tools().await.unwrap().is_empty(),
        "still serving"
    );
}
