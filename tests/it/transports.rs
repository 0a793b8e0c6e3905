//! Every upstream transport, with the official server-everything on the other end: stdio,
//! legacy HTTP+SSE and streamable HTTP, the HTTP ones found by `auto` detection.

use std::time::Duration;

use serde_json::json;

use crate::{
    fixtures::{
        everything::{self, Everything, Mode},
        legacy_sse::LegacySseServer,
    },
    harness::{GatewayBuilder, Recorder, call, eventually, text, tool_names},
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_everything_over_stdio_legacy_sse_and_streamable_http() {
    let sse = Everything::start(Mode::Sse).await;
    let http = Everything::start(Mode::StreamableHttp).await;
    let sse_port = sse.addr.port();
    let gw = GatewayBuilder::new()
        .upstream("ev-stdio", &everything::stdio_upstream())
        // No transport: `auto` probes each URL.
        .upstream(
            "ev-sse",
            &format!(
                "url = {:?}\nrestart = {{ delay_ms = 200, max_delay_ms = 500 }}",
                sse.url()
            ),
        )
        .upstream("ev-http", &format!("url = {:?}", http.url()))
        .start()
        .await;
    for (name, transport) in [
        ("ev-stdio", "stdio"),
        ("ev-sse", "sse"),
        ("ev-http", "streamable_http"),
    ] {
        let status = gw.upstream_health(name).await;
        assert_eq!(status["state"], "ready", "{status}");
        assert_eq!(status["transport"], transport, "{status}");
    }

    let client = Recorder::capable("tester").connect(&gw.url()).await;
    let tools = tool_names(&client).await;
    for prefix in ["ev-stdio", "ev-sse", "ev-http"] {
        let echo = format!("{prefix}__echo");
        assert!(tools.contains(&echo), "{echo} in {tools:?}");
        let result = call(&client, &echo, json!({"message": prefix}))
            .await
            .unwrap();
        assert_eq!(text(&result), format!("Echo: {prefix}"));
    }

    // Over legacy SSE: progress comes back on the event stream, and resources are read.
    // (rmcp's client asks for progress on every request.)
    let result = call(
        &client,
        "ev-sse__trigger-long-running-operation",
        json!({"duration": 1, "steps": 3}),
    )
    .await
    .unwrap();
    assert!(text(&result).contains("completed"), "{result:?}");
    assert!(client.service().progress_reaches(3).await);
    assert_eq!(client.service().seen().progress.len(), 3);
    let resources = client.list_all_resources().await.unwrap();
    let sse_resource = resources
        .iter()
        .find(|r| r.uri.starts_with("ev-sse+"))
        .expect("a resource of ev-sse");
    let read = client
        .read_resource(rmcp::model::ReadResourceRequestParams::new(
            sse_resource.uri.clone(),
        ))
        .await
        .unwrap();
    assert!(!read.contents.is_empty());

    // The SSE server restarts on the same port: the stream is lost, the session with it, and
    // the gateway reconnects from the start. The other transports serve throughout.
    sse.kill().await;
    let error = call(&client, "ev-sse__echo", json!({"message": "gone"}))
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("`ev-sse`"), "{error}");
    let result = call(&client, "ev-http__echo", json!({"message": "meanwhile"}))
        .await
        .unwrap();
    assert_eq!(text(&result), "Echo: meanwhile");
    let _sse = Everything::start_on(Mode::Sse, sse_port).await;
    gw.wait_state("ev-sse", "ready", Duration::from_secs(20))
        .await;
    let result = call(&client, "ev-sse__echo", json!({"message": "back"}))
        .await
        .unwrap();
    assert_eq!(text(&result), "Echo: back");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_sse_session_survives_a_lost_stream_and_carries_the_headers() {
    let server = LegacySseServer::start().await;
    let gw = GatewayBuilder::new()
        .demo("local")
        .upstream(
            "old",
            &format!(
                "transport = \"sse\"\nurl = {:?}\nheaders = {{ X-Test = \"from-config\" }}",
                server.url()
            ),
        )
        .start()
        .await;
    assert_eq!(gw.upstream_health("old").await["transport"], "sse");
    let client = gw.client().await;
    let increment = || async {
        let result = call(&client, "old__increment", json!({})).await.unwrap();
        text(&result).to_owned()
    };
    assert_eq!(increment().await, "1");
    let sessions = server.sessions();

    // The streams break; the client resumes the same sessions from the last event it saw.
    let opened = server.streams_opened();
    server.drop_streams();
    assert!(
        eventually(Duration::from_secs(10), || server.streams_opened()
            >= opened + 2)
        .await,
        "the shared and the per-client streams reopened"
    );
    assert_eq!(increment().await, "2", "the same upstream session");
    assert_eq!(server.sessions(), sessions, "no new session");
    assert_eq!(gw.state("old"), "ready");

    // Every GET and POST carried the configured header.
    let headers = server.seen_headers();
    assert!(headers.len() >= 6, "{headers:?}");
    assert!(headers.iter().all(|h| h == "from-config"), "{headers:?}");
    let result = call(&client, "local__echo", json!({"text": "other"}))
        .await
        .unwrap();
    assert_eq!(text(&result), "other");
}
