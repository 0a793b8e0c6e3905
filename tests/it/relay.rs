//! What upstreams send back during a call reaches the client whose call it was: progress, log
//! messages, and requests for sampling, elicitation and roots, whose answers go back upstream.
//! Cancellation travels the other way.

use std::time::Duration;

use serde_json::json;

use crate::{
    fixtures::notes::NotesServer,
    harness::{GatewayBuilder, Recorder, call, eventually, remote_notes, text},
};

#[tokio::test]
async fn progress_reaches_the_caller_under_its_own_token() {
    let (_notes, gw) = remote_notes().await;
    let recorder = Recorder::plain("p");
    let client = recorder.clone().connect(&gw.url()).await;
    let result = call(&client, "remote__progress", json!({"steps": 3}))
        .await
        .unwrap();
    assert_eq!(text(&result), "3 steps done");
    assert!(recorder.progress_reaches(3).await);
    let seen = recorder.seen();
    let steps: Vec<_> = seen
        .progress
        .iter()
        .map(|(_, p, m)| (*p, m.clone()))
        .collect();
    assert_eq!(
        steps,
        [
            (1.0, Some("step 1".into())),
            (2.0, Some("step 2".into())),
            (3.0, Some("step 3".into()))
        ]
    );
    // rmcp's client numbers its progress tokens per request; ours must come back, not the
    // gateway's own.
    assert!(
        seen.progress
            .iter()
            .all(|(token, _, _)| token == &seen.progress[0].0)
    );
}

#[tokio::test]
async fn server_requests_reach_the_calling_client_and_answers_return() {
    for session in ["per_client", "shared"] {
        let notes = NotesServer::start().await;
        let gw = GatewayBuilder::new()
            .upstream(
                "remote",
                &format!("url = {:?}\nsession = \"{session}\"", notes.url()),
            )
            .start()
            .await;
        let ada = Recorder::capable("ada").connect(&gw.url()).await;
        let bob = Recorder::capable("bob").connect(&gw.url()).await;
        // Concurrently, so that on a shared upstream session both requests are in flight.
        let (a, b) = tokio::join!(
            call(&ada, "remote__ask_name", json!({})),
            call(&bob, "remote__ask_name", json!({}))
        );
        assert_eq!(text(&a.unwrap()), "hello \"ada\"", "{session}");
        assert_eq!(text(&b.unwrap()), "hello \"bob\"", "{session}");

        let (a, b) = tokio::join!(
            call(&ada, "remote__sample", json!({})),
            call(&bob, "remote__sample", json!({}))
        );
        assert_eq!(
            text(&a.unwrap()),
            "test-model: sampled for ada",
            "{session}"
        );
        assert_eq!(
            text(&b.unwrap()),
            "test-model: sampled for bob",
            "{session}"
        );

        let roots = call(&ada, "remote__roots", json!({})).await.unwrap();
        assert_eq!(text(&roots), "file:///home/ada", "{session}");
    }
}

#[tokio::test]
async fn a_client_without_the_capability_gets_an_error_not_a_hang() {
    let (_notes, gw) = remote_notes().await;
    let plain = Recorder::plain("plain").connect(&gw.url()).await;
    for tool in ["remote__ask_name", "remote__sample", "remote__roots"] {
        let result = tokio::time::timeout(Duration::from_secs(10), call(&plain, tool, json!({})))
            .await
            .expect("no hang");
        let error = match result {
            Ok(result) => panic!("{tool} should fail, got {result:?}"),
            Err(rmcp::ServiceError::McpError(error)) => error,
            Err(other) => panic!("{tool}: {other}"),
        };
        assert!(
            error.message.contains("failed"),
            "{tool}: {}",
            error.message
        );
    }

    // A stateless 2026-07-28 client cannot be asked either.
    let modern = gw.modern_client().await;
    let result = tokio::time::timeout(
        Duration::from_secs(10),
        call(&modern, "remote__ask_name", json!({})),
    )
    .await
    .expect("no hang");
    assert!(result.is_err(), "{result:?}");
}

#[tokio::test]
async fn log_messages_reach_the_client_whose_call_caused_them() {
    let (_notes, gw) = remote_notes().await;
    let (one, two) = (Recorder::plain("one"), Recorder::plain("two"));
    let (c1, _c2) = (
        one.clone().connect(&gw.url()).await,
        two.clone().connect(&gw.url()).await,
    );
    call(&c1, "remote__log", json!({"text": "for one"}))
        .await
        .unwrap();
    assert!(
        eventually(Duration::from_secs(5), || one.seen().logs
            == [json!("for one")])
        .await
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(two.seen().logs.is_empty(), "the other client sees nothing");
}

#[tokio::test]
async fn cancelling_a_call_cancels_it_upstream() {
    let (notes, gw) = remote_notes().await;
    let client = Recorder::plain("c").connect(&gw.url()).await;
    let mut params = rmcp::model::CallToolRequestParams::new("remote__sleep");
    params = params.with_arguments(serde_json::from_value(json!({"ms": 30000})).unwrap());
    let handle = client
        .peer()
        .send_cancellable_request(
            rmcp::model::ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(params)),
            rmcp::service::PeerRequestOptions::no_options(),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    handle.cancel(Some("changed my mind".into())).await.unwrap();
    assert!(
        eventually(Duration::from_secs(5), || notes.cancelled() == 1).await,
        "the upstream saw the cancellation"
    );
    // The session goes on.
    let ok = call(&client, "remote__echo", json!({"text": "after"}))
        .await
        .unwrap();
    assert_eq!(text(&ok), "notes: after");
}

#[tokio::test]
async fn input_required_passes_through_and_the_retry_keeps_its_state() {
    let (_notes, gw) = remote_notes().await;
    let modern = gw.modern_client().await;
    let first = modern
        .call_tool_once(rmcp::model::CallToolRequestParams::new("remote__confirm"))
        .await
        .unwrap();
    let rmcp::model::CallToolResponse::InputRequired(required) = first else {
        panic!("expected input_required, got {first:?}");
    };
    assert_eq!(required.request_state.as_deref(), Some("state-1"));
    let requests = required.input_requests.unwrap();
    assert!(matches!(
        requests["ok"],
        rmcp::model::InputRequest::Elicitation(_)
    ));

    let mut retry = rmcp::model::CallToolRequestParams::new("remote__confirm");
    retry.input_responses = Some(std::collections::BTreeMap::from([(
        "ok".to_owned(),
        json!({"action": "accept", "content": {"ok": true}}),
    )]));
    retry.request_state = required.request_state;
    let second = modern.call_tool_once(retry).await.unwrap();
    let rmcp::model::CallToolResponse::Complete(result) = second else {
        panic!("expected a complete result, got {second:?}");
    };
    assert_eq!(
        text(&result),
        r#"confirmed {"action":"accept","content":{"ok":true}} with state state-1"#
    );
}

#[tokio::test]
async fn a_2026_client_closing_its_request_stream_cancels_the_upstream_call() {
    let (notes, gw) = remote_notes().await;
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": "remote__sleep", "arguments": {"ms": 30000},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"}
        }
    }});
    let request = reqwest::Client::new()
        .post(gw.url())
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "remote__sleep")
        .json(&body)
        .send();
    let pending = tokio::spawn(request);
    tokio::time::sleep(Duration::from_millis(500)).await;
    pending.abort();
    assert!(
        eventually(Duration::from_secs(5), || notes.cancelled() == 1).await,
        "closing the stream is cancellation in 2026-07-28"
    );
}

#[tokio::test]
async fn a_2026_client_gets_log_messages_when_it_asks_for_a_level() {
    let (_notes, gw) = remote_notes().await;
    let recorder = Recorder::plain("modern");
    let client = recorder.clone().connect_modern(&gw.url()).await;
    let call = |level: Option<&str>| {
        let mut meta = rmcp::model::RequestMetaObject::default();
        if let Some(level) = level {
            meta.0
                .insert("io.modelcontextprotocol/logLevel".into(), json!(level));
        }
        let params = rmcp::model::CallToolRequestParams::new("remote__log")
            .with_arguments(serde_json::from_value(json!({"text": "hello"})).unwrap());
        client.peer().send_request_with_option(
            rmcp::model::ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(params)),
            rmcp::service::PeerRequestOptions::no_options().with_meta(meta),
        )
    };
    call(Some("info"))
        .await
        .unwrap()
        .await_response()
        .await
        .unwrap();
    assert!(
        eventually(Duration::from_secs(5), || recorder.seen().logs
            == [json!("hello")])
        .await
    );
    call(None).await.unwrap().await_response().await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        recorder.seen().logs.len(),
        1,
        "no level asked, no log message"
    );
}

/// A gateway fronting the notes server with `session` mode.
async fn notes_behind(session: &str) -> (NotesServer, crate::harness::TestGateway) {
    let notes = NotesServer::start().await;
    let gw = GatewayBuilder::new()
        .upstream(
            "remote",
            &format!("url = {:?}\nsession = \"{session}\"", notes.url()),
        )
        .start()
        .await;
    (notes, gw)
}

#[tokio::test]
async fn an_upstream_giving_up_on_its_request_cancels_it_at_the_client() {
    for session in ["per_client", "shared"] {
        let (_notes, gw) = notes_behind(session).await;
        let recorder = Recorder::capable("ada");
        let client = recorder.clone().connect(&gw.url()).await;
        let result = call(&client, "remote__ask_briefly", json!({}))
            .await
            .unwrap();
        assert!(
            text(&result).starts_with("gave up"),
            "{session}: {result:?}"
        );
        assert!(
            eventually(Duration::from_secs(5), || recorder.seen().cancelled == 1).await,
            "{session}: the client was told to stop asking its user"
        );
    }
}

#[tokio::test]
async fn url_elicitations_and_their_completion_reach_the_client_that_was_asked() {
    for session in ["per_client", "shared"] {
        let (_notes, gw) = notes_behind(session).await;
        let (ada, bob) = (Recorder::capable("ada"), Recorder::capable("bob"));
        let client = ada.clone().connect(&gw.url()).await;
        let _other = bob.clone().connect(&gw.url()).await;
        let result = call(&client, "remote__open_link", json!({})).await.unwrap();
        assert_eq!(text(&result), "link Accept", "{session}");
        let completed = (
            "notifications/elicitation/complete".to_owned(),
            json!({"elicitationId": "link-1"}),
        );
        assert!(
            eventually(Duration::from_secs(5), || ada.seen().custom
                == [completed.clone()])
            .await,
            "{session}: {:?}",
            ada.seen().custom
        );
        assert!(bob.seen().custom.is_empty(), "{session}");
    }
}

#[tokio::test]
async fn a_session_log_level_filters_what_a_shared_upstream_sends_it() {
    let (_notes, gw) = notes_behind("shared").await;
    let (quiet, chatty) = (Recorder::plain("quiet"), Recorder::plain("chatty"));
    let quiet_client = quiet.clone().connect(&gw.url()).await;
    let chatty_client = chatty.clone().connect(&gw.url()).await;
    #[allow(deprecated)]
    quiet_client
        .peer()
        .set_level(rmcp::model::SetLevelRequestParams::new(
            rmcp::model::LoggingLevel::Warning,
        ))
        .await
        .unwrap();
    // The notes server logs at `info`.
    call(&quiet_client, "remote__log", json!({"text": "for quiet"}))
        .await
        .unwrap();
    call(&chatty_client, "remote__log", json!({"text": "for chatty"}))
        .await
        .unwrap();
    assert!(
        eventually(Duration::from_secs(5), || chatty.seen().logs
            == [json!("for chatty")])
        .await
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        quiet.seen().logs.is_empty(),
        "below its level: {:?}",
        quiet.seen().logs
    );
}

/// A server that speaks only 2026-07-28 asks for input by returning `input_required`, which a
/// session client cannot take: Switchyard asks that client itself and sends the call again with
/// the answer and the server's state. A client that cannot answer gets an error saying so.
#[tokio::test]
async fn a_session_client_answers_what_a_2026_server_requires_through_switchyard() {
    let modern = NotesServer::start_modern_only().await;
    let gw = GatewayBuilder::new()
        .http("modern", &modern.url())
        .start()
        .await;
    let ada = Recorder::capable("ada").connect(&gw.url()).await;
    let result = call(&ada, "modern__confirm", json!({})).await.unwrap();
    assert_eq!(
        text(&result),
        r#"confirmed {"action":"accept","content":{"name":"ada"}} with state state-1"#
    );

    let plain = Recorder::plain("plain").connect(&gw.url()).await;
    let error = call(&plain, "modern__confirm", json!({}))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("upstream `modern`") && error.contains("elicitation capability"),
        "{error}"
    );
}
