//! OpenTelemetry traces: a client's trace goes through the gateway binary to a streamable-HTTP
//! upstream and to a stdio one, and arrives at a real OTLP/HTTP receiver as one trace with the
//! client's trace id — the gateway's server span under the client's, its upstream-call span
//! under that — while each upstream is handed the upstream-call span's context (a header on
//! HTTP, `params._meta.traceparent` on both). A client's "not sampled" is obeyed, and nothing
//! of the arguments or the session id reaches a span.

use std::time::Duration;

use serde_json::{Value, json};

use crate::{
    deps,
    fixtures::{
        otlp::{CLIENT, OtlpReceiver, ReceivedSpan, SERVER},
        scripted::Scripted,
    },
    harness::GatewayProcess,
    replicas::cluster::raw_session,
};

const SECRET_ARGUMENT: &str = "sk-do-not-trace-0123456789";

fn tools() -> Value {
    json!({"tools": [{"name": "plain", "inputSchema": {"type": "object"}}]})
}

/// A tool call in `session`, with `headers` and `meta`: the answer's JSON-RPC message.
async fn call(
    url: &str,
    session: &str,
    tool: &str,
    headers: &[(&str, &str)],
    meta: Option<Value>,
) -> Value {
    let mut params = json!({"name": tool, "arguments": {"key": SECRET_ARGUMENT}});
    if let Some(meta) = meta {
        params["_meta"] = meta;
    }
    let mut request = reqwest::Client::new()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2025-11-25")
        .header("mcp-session-id", session)
        .body(
            json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params})
                .to_string(),
        );
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), 200);
    let body = response.text().await.unwrap();
    body.lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .find_map(|line| serde_json::from_str(line).ok())
        .unwrap_or_else(|| panic!("no answer in {body}"))
}

/// The trace and parent span ids a `traceparent` names.
fn ids(traceparent: &str) -> (String, String, String) {
    let parts: Vec<&str> = traceparent.split('-').collect();
    assert_eq!(parts.len(), 4, "{traceparent}");
    (parts[1].into(), parts[2].into(), parts[3].into())
}

fn one<'a>(spans: &'a [ReceivedSpan], kind: i32, what: &str) -> &'a ReceivedSpan {
    let found: Vec<&ReceivedSpan> = spans.iter().filter(|span| span.kind == kind).collect();
    assert_eq!(found.len(), 1, "one {what} span: {spans:#?}");
    found[0]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clients_trace_goes_through_to_http_and_stdio_upstreams_and_to_the_collector() {
    let receiver = OtlpReceiver::start().await;
    let http = Scripted::start(tools()).await;
    let dir = tempfile::tempdir().unwrap();
    let lists = dir.path().join("tools.json");
    std::fs::write(&lists, tools().to_string()).unwrap();
    let config = dir.path().join("switchyard.toml");
    std::fs::write(
        &config,
        format!(
            "[telemetry]\notlp_endpoint = {:?}\nsampling_ratio = 0.0\nservice_name = \"gateway-under-test\"\n\n\
             [upstreams.web]\ntransport = \"streamable_http\"\nurl = {:?}\n\n\
             [upstreams.local]\n{}\n",
            receiver.url(),
            http.url(),
            deps::replay_server(&lists),
        ),
    )
    .unwrap();
    let gw = GatewayProcess::start_with_env(&config, &[], &[("OTEL_BSP_SCHEDULE_DELAY", "100")]);
    let url = gw.url();
    let session = raw_session(&url).await;

    // Through to the HTTP upstream, the client's context in a header.
    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let client_span = "00f067aa0ba902b7";
    let sampled = format!("00-{trace}-{client_span}-01");
    let answer = call(
        &url,
        &session,
        "web__plain",
        &[("traceparent", &sampled)],
        None,
    )
    .await;
    assert!(answer.get("result").is_some(), "{answer}");
    let spans = receiver.trace(trace).await;
    assert!(
        spans
            .iter()
            .all(|span| span.service == "gateway-under-test"),
        "{spans:#?}"
    );
    let server = one(&spans, SERVER, "server");
    assert_eq!(
        server.parent_span_id, client_span,
        "under the client's span"
    );
    assert_eq!(server.name, "tools/call plain");
    assert_eq!(server.attributes["mcp.method.name"], "tools/call");
    assert_eq!(server.attributes["switchyard.upstream"], "web");
    assert_eq!(server.attributes["gen_ai.tool.name"], "plain");
    assert_eq!(server.attributes["mcp.protocol.version"], "2025-11-25");
    assert_eq!(server.attributes["enduser.id"], "anonymous");
    let hash = &server.attributes["mcp.session.id"];
    assert!(
        !hash.is_empty() && !session.contains(hash.as_str()),
        "a hash: {hash}"
    );
    let upstream_call = one(&spans, CLIENT, "client");
    assert_eq!(upstream_call.parent_span_id, server.span_id);
    assert_eq!(upstream_call.attributes["switchyard.upstream"], "web");
    let handed = format!("00-{trace}-{}-01", upstream_call.span_id);
    assert_eq!(
        http.traceparents(),
        vec![Some(handed.clone())],
        "the header"
    );
    assert_eq!(http.metas("plain")[0]["traceparent"], handed, "and `_meta`");

    // Through to the stdio upstream, the client's context in `_meta`.
    let trace = "0af7651916cd43dd8448eb211c80319c";
    let client_span = "b7ad6b7169203331";
    let answer = call(
        &url,
        &session,
        "local__plain",
        &[],
        Some(json!({"traceparent": format!("00-{trace}-{client_span}-01"), "com.example/k": 1})),
    )
    .await;
    let text = answer["result"]["content"][0]["text"].as_str().unwrap();
    let received: Value = serde_json::from_str(text).unwrap();
    let spans = receiver.trace(trace).await;
    let server = one(&spans, SERVER, "server");
    assert_eq!(server.parent_span_id, client_span);
    assert_eq!(server.attributes["switchyard.upstream"], "local");
    let upstream_call = one(&spans, CLIENT, "client");
    assert_eq!(upstream_call.attributes["network.transport"], "pipe");
    let (got_trace, got_parent, flags) = ids(received["traceparent"].as_str().unwrap());
    assert_eq!(
        (got_trace.as_str(), got_parent.as_str(), flags.as_str()),
        (trace, upstream_call.span_id.as_str(), "01"),
        "the stdio server's spans would join the trace: {received}"
    );
    assert_eq!(
        received["com.example/k"], 1,
        "the client's other keys go on"
    );

    // A client that decided not to sample: no spans, its context handed on as it came.
    let unsampled = "00-11111111111111111111111111111111-2222222222222222-00";
    call(
        &url,
        &session,
        "web__plain",
        &[("traceparent", unsampled)],
        None,
    )
    .await;
    // Without any context and a ratio of 0: no spans, nothing handed on.
    call(&url, &session, "web__plain", &[], None).await;
    assert_eq!(
        http.traceparents()[1..],
        [Some(unsampled.to_owned()), None],
        "an unsampled context goes on unchanged; none is made up"
    );
    assert_eq!(http.metas("plain")[1]["traceparent"], unsampled);
    assert!(http.metas("plain")[2].get("traceparent").is_none());
    tokio::time::sleep(Duration::from_millis(600)).await;
    let spans = receiver.spans();
    assert!(
        !spans.iter().any(|span| span.trace_id.starts_with("1111")),
        "an unsampled trace is not exported: {spans:#?}"
    );
    assert_eq!(
        (spans.iter()).filter(|span| span.kind == SERVER).count(),
        2,
        "only the two sampled requests were traced: {spans:#?}"
    );

    // Neither the arguments nor the session id reach a span.
    for span in &spans {
        for value in span.attributes.values() {
            assert!(!value.contains(SECRET_ARGUMENT), "{span:#?}");
            assert!(!value.contains(&session), "{span:#?}");
        }
    }
}
