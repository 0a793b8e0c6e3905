//! Upstreams that fail: killed mid-call, gone and back, slow, hung on `initialize`, overloaded.
//! Each test checks that the failure is reported naming the upstream, that other upstreams and
//! sessions kept working throughout, and that the upstream recovers.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::{
    fixtures::{crashable::Crashable, notes::NotesServer},
    harness::{GatewayBuilder, Recorder, TestGateway, call, eventually, text, tool_names},
};

const SOON: Duration = Duration::from_secs(10);

/// Another session, on another upstream, that must keep working while one fails.
async fn assert_other_session_works(gw: &TestGateway, tool: &str) {
    let other = gw.client().await;
    let result = call(&other, tool, json!({"text": "still here"}))
        .await
        .unwrap_or_else(|e| panic!("{tool} failed while another upstream was down: {e}"));
    assert!(text(&result).contains("still here"), "{result:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_server_killed_mid_call_fails_the_call_and_is_restarted() {
    let server = Crashable::new();
    let notes = NotesServer::start().await;
    let gw = GatewayBuilder::new()
        .upstream("local", &server.upstream("restart = { delay_ms = 2000 }"))
        .http("remote", &notes.url())
        .start()
        .await;
    let watcher = Recorder::plain("watcher").connect(&gw.url()).await;
    let caller = gw.client().await;
    let before = server.pid();

    let in_flight =
        tokio::spawn(
            async move { call(&caller, "local__slow_task", json!({"seconds": 30})).await },
        );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let killed_at = Instant::now();
    server.kill().await;

    // The call in flight fails at once, naming the upstream.
    let error = tokio::time::timeout(SOON, in_flight)
        .await
        .expect("the call in flight ends when its upstream dies")
        .unwrap()
        .unwrap_err()
        .to_string();
    assert!(error.contains("upstream `local`"), "{error}");
    assert!(killed_at.elapsed() < Duration::from_secs(2), "{error}");

    // While it is down (failure_mode = "open"): its tools are hidden and clients are told;
    // the other upstream serves as before.
    assert!(
        eventually(SOON, || watcher.service().seen().tools_changed >= 1).await,
        "no tools/list_changed"
    );
    let listed = tool_names(&watcher).await;
    assert!(!listed.contains(&"local__echo".to_owned()), "{listed:?}");
    assert!(listed.contains(&"remote__echo".to_owned()), "{listed:?}");
    let status = gw.upstream_health("local").await;
    assert_eq!(status["state"], "failed", "{status}");
    assert!(
        status["last_error"]
            .as_str()
            .unwrap()
            .contains("connection closed"),
        "{status}"
    );
    assert_other_session_works(&gw, "remote__echo").await;

    // It is restarted: a new process, its tools back, calls served.
    gw.wait_state("local", "ready", SOON).await;
    assert_ne!(server.pid(), before, "a new process");
    assert!(
        eventually(SOON, || watcher.service().seen().tools_changed >= 2).await,
        "no tools/list_changed when it came back"
    );
    assert!(
        tool_names(&watcher)
            .await
            .contains(&"local__echo".to_owned())
    );
    let result = call(&watcher, "local__echo", json!({"text": "back"}))
        .await
        .unwrap();
    assert_eq!(text(&result), "back");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failure_mode_closed_keeps_tools_listed_and_fails_their_calls() {
    let server = Crashable::new();
    let notes = NotesServer::start().await;
    let gw = GatewayBuilder::new()
        .upstream(
            "local",
            &server.upstream("failure_mode = \"closed\"\nrestart = { delay_ms = 3000 }"),
        )
        .http("remote", &notes.url())
        .start()
        .await;
    let client = gw.client().await;
    server.kill().await;
    gw.wait_state("local", "failed", SOON).await;

    assert!(
        tool_names(&client)
            .await
            .contains(&"local__echo".to_owned())
    );
    let started = Instant::now();
    let error = call(&client, "local__echo", json!({"text": "x"}))
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("upstream `local` is unavailable"), "{error}");
    assert!(started.elapsed() < Duration::from_secs(1), "fails fast");
    assert_other_session_works(&gw, "remote__echo").await;

    gw.wait_state("local", "ready", SOON).await;
    let result = call(&client, "local__echo", json!({"text": "back"}))
        .await
        .unwrap();
    assert_eq!(text(&result), "back");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_upstream_that_goes_away_is_reconnected() {
    let notes = NotesServer::start().await;
    let addr = notes.addr;
    let gw = GatewayBuilder::new()
        .demo("local")
        .http_with(
            "remote",
            &notes.url(),
            "restart = { delay_ms = 200, max_delay_ms = 400 }",
        )
        .start()
        .await;
    let client = gw.client().await;
    let result = call(&client, "remote__increment", json!({})).await.unwrap();
    assert_eq!(text(&result), "1");

    notes.stop();
    drop(notes);
    // The next call fails naming the upstream, and the gateway notices it is gone.
    let error = tokio::time::timeout(SOON, call(&client, "remote__echo", json!({"text": "x"})))
        .await
        .expect("a call to a vanished upstream ends")
        .unwrap_err()
        .to_string();
    assert!(error.contains("upstream `remote`"), "{error}");
    gw.wait_state("remote", "failed", SOON).await;
    assert_other_session_works(&gw, "local__echo").await;

    // The server comes back on the same address: reconnected, and this session is served.
    let notes = NotesServer::start_on(addr).await;
    gw.wait_state("remote", "ready", SOON).await;
    let result = call(&client, "remote__echo", json!({"text": "back"}))
        .await
        .unwrap();
    assert_eq!(text(&result), "notes: back");
    let health = gw.upstream_health("remote").await;
    assert_eq!(health["retries"], 0, "{health}");
    assert!(notes.open_sessions() >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_calls_time_out_and_are_cancelled_upstream_unless_they_report_progress() {
    let notes = NotesServer::start().await;
    let gw = GatewayBuilder::new()
        .demo("local")
        .http_with(
            "remote",
            &notes.url(),
            "default_tool_timeout_seconds = 0.5\nmax_tool_timeout_seconds = 2\n\
             tool_timeout_seconds = { sleep = 1 }",
        )
        .start()
        .await;
    let client = gw.client().await;

    // No answer and no progress within the default timeout.
    let error = call(
        &client,
        "remote__progress",
        json!({"steps": 1, "interval_ms": 5000}),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(
        error.contains("did not answer tool `progress` within 0.5s (default_tool_timeout_seconds)"),
        "{error}"
    );
    assert!(
        eventually(SOON, || notes.cancelled() == 1).await,
        "cancelled upstream"
    );

    // A tool's own timeout.
    let ok = call(&client, "remote__sleep", json!({"ms": 700}))
        .await
        .unwrap();
    assert_eq!(text(&ok), "slept 700 ms");
    let error = call(&client, "remote__sleep", json!({"ms": 5000}))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("within 1s (tool_timeout_seconds.sleep)"),
        "{error}"
    );
    assert!(eventually(SOON, || notes.cancelled() == 2).await);

    // Progress keeps a call alive past its timeout, up to the maximum.
    let result = call(
        &client,
        "remote__progress",
        json!({"steps": 6, "interval_ms": 200}),
    )
    .await
    .unwrap();
    assert_eq!(text(&result), "6 steps done");
    let error = call(
        &client,
        "remote__progress",
        json!({"steps": 30, "interval_ms": 200}),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(
        error.contains("did not finish tool `progress` within 2s (max_tool_timeout_seconds)"),
        "{error}"
    );
    assert!(eventually(SOON, || notes.cancelled() == 3).await);

    // Timeouts are per request: the upstream and the others serve on.
    assert_other_session_works(&gw, "local__echo").await;
    let result = call(&client, "remote__echo", json!({"text": "fine"}))
        .await
        .unwrap();
    assert_eq!(text(&result), "notes: fine");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_that_hangs_on_initialize_does_not_delay_the_others() {
    let gw = GatewayBuilder::new()
        .upstream(
            "hung",
            "command = \"sleep\"\nargs = [\"1000\"]\nconnect_timeout_seconds = 5\n\
             restart = { delay_ms = 100 }",
        )
        .demo("local")
        .start_unsettled()
        .await;
    gw.wait_state("local", "ready", SOON).await;
    assert_eq!(gw.state("hung"), "connecting");
    let client = gw.client().await;
    let tools = tool_names(&client).await;
    assert!(tools.contains(&"local__echo".to_owned()), "{tools:?}");
    let result = call(&client, "local__echo", json!({"text": "meanwhile"}))
        .await
        .unwrap();
    assert_eq!(text(&result), "meanwhile");

    // The hung one fails on its connect timeout and is retried; the gateway serves on.
    gw.wait_state("hung", "failed", SOON).await;
    let status = gw.upstream_health("hung").await;
    assert!(
        status["last_error"]
            .as_str()
            .unwrap()
            .contains("no answer to initialize within 5s"),
        "{status}"
    );
    assert!(
        eventually(SOON, || gw.upstream("hung").health().status().retries >= 2).await,
        "retried"
    );
    assert_other_session_works(&gw, "local__echo").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_upstream_queues_then_refuses_with_an_overload_error() {
    let notes = NotesServer::start().await;
    let gw = GatewayBuilder::new()
        .demo("local")
        .http_with(
            "remote",
            &notes.url(),
            "max_concurrent_requests = 1\nmax_queued_requests = 1",
        )
        .start()
        .await;
    let remote = gw.upstream("remote");
    let load = || remote.load();
    let first = gw.client().await;
    let second = gw.client().await;
    let third = gw.client().await;

    let running =
        tokio::spawn(async move { call(&first, "remote__sleep", json!({"ms": 1500})).await });
    assert!(eventually(SOON, || load().in_flight() == 1).await);
    let queued =
        tokio::spawn(async move { call(&second, "remote__echo", json!({"text": "queued"})).await });
    assert!(eventually(SOON, || load().queued() == 1).await);

    let error = call(&third, "remote__echo", json!({"text": "refused"}))
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("upstream `remote`"), "{error}");
    assert!(error.contains("overloaded"), "{error}");
    assert!(error.contains("max_concurrent_requests"), "{error}");
    assert_other_session_works(&gw, "local__echo").await;

    assert_eq!(text(&running.await.unwrap().unwrap()), "slept 1500 ms");
    assert_eq!(text(&queued.await.unwrap().unwrap()), "notes: queued");
    let result = call(&third, "remote__echo", json!({"text": "now"}))
        .await
        .unwrap();
    assert_eq!(text(&result), "notes: now");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_per_client_processes_are_reaped_and_restarted_on_use() {
    let gw = GatewayBuilder::new()
        .upstream(
            "local",
            &format!(
                "transport = \"stdio\"\ncommand = {:?}\nargs = [\"demo-server\"]\n\
                 session = \"per_client\"\nidle_timeout_seconds = 0.5",
                crate::harness::SWITCHYARD
            ),
        )
        .start()
        .await;
    let client = gw.client().await;
    assert_eq!(increment(&client).await, "1");
    assert_eq!(
        increment(&client).await,
        "2",
        "the same process while in use"
    );
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(increment(&client).await, "1", "a new process after idling");
}

async fn increment(client: &crate::harness::Client) -> String {
    let result = call(client, "local__increment", json!({})).await.unwrap();
    text(&result).to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_that_speaks_only_2026_07_28_is_served() {
    let modern = NotesServer::start_modern_only().await;
    let gw = GatewayBuilder::new()
        .demo("local")
        .http("modern", &modern.url())
        .start()
        .await;
    let status = gw.upstream_health("modern").await;
    assert_eq!(status["state"], "ready", "{status}");
    assert_eq!(status["protocol_version"], "2026-07-28", "{status}");

    let session = gw.client().await;
    let result = call(&session, "modern__echo", json!({"text": "old client"}))
        .await
        .unwrap();
    assert_eq!(text(&result), "notes: old client");
    let stateless = gw.modern_client().await;
    let result = call(&stateless, "modern__echo", json!({"text": "new client"}))
        .await
        .unwrap();
    assert_eq!(text(&result), "notes: new client");
    assert_other_session_works(&gw, "local__echo").await;
}

/// rmcp's streamable-HTTP client caps itself at 16 requests in flight unless told otherwise;
/// Switchyard has no such hidden cap: 40 calls on one shared upstream session all run at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_without_a_limit_takes_every_request_at_once() {
    const CALLS: usize = 40;
    let notes = NotesServer::start().await;
    let gw = GatewayBuilder::new()
        .http_with("remote", &notes.url(), "session = \"shared\"")
        .start()
        .await;
    let client = gw.client().await;
    let calls = (0..CALLS).map(|_| call(&client, "remote__sleep", json!({"ms": 2000})));
    let results = futures::future::join_all(calls).await;
    for result in results {
        assert_eq!(text(&result.unwrap()), "slept 2000 ms");
    }
    assert_eq!(notes.most_concurrent_sleeps(), CALLS);
}

/// A server that crashes soon after it starts is given up on after `max_attempts`, like one
/// that cannot start at all, instead of being restarted at the base delay for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_crashing_after_start_backs_off_and_is_given_up_on() {
    let crashing = format!(
        "transport = \"stdio\"\ncommand = \"timeout\"\nargs = [\"0.3\", {:?}, \"demo-server\"]\n\
         restart = {{ max_attempts = 3, delay_ms = 50 }}",
        crate::harness::SWITCHYARD
    );
    let notes = NotesServer::start().await;
    let gw = GatewayBuilder::new()
        .upstream("flaky", &crashing)
        .http("remote", &notes.url())
        .start()
        .await;
    let mut status = gw.upstream_health("flaky").await;
    for _ in 0..200 {
        if status["last_error"]
            .as_str()
            .is_some_and(|e| e.starts_with("gave up after 3 failed attempts"))
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        status = gw.upstream_health("flaky").await;
    }
    assert_eq!(status["state"], "failed", "{status}");
    assert!(
        status["last_error"]
            .as_str()
            .unwrap()
            .starts_with("gave up after 3 failed attempts; the last: the connection closed"),
        "{status}"
    );
    assert_other_session_works(&gw, "remote__echo").await;
}

/// An HTTP server killed while a client's call runs on its own upstream session: the call
/// fails at once naming the upstream, other sessions are served, and when the server is back
/// the same client session is served again (on a new upstream session).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_server_killed_mid_call_fails_the_call_and_is_reconnected() {
    use crate::fixtures::everything::{Everything, Mode};
    let server = Everything::start(Mode::StreamableHttp).await;
    let port = server.addr.port();
    let gw = GatewayBuilder::new()
        .demo("local")
        .upstream(
            "ev",
            &format!(
                "url = {:?}\nrestart = {{ delay_ms = 200, max_delay_ms = 400 }}",
                server.url()
            ),
        )
        .start()
        .await;
    let client = gw.client().await;
    let recorder = Recorder::plain("caller");
    let caller = recorder.clone().connect(&gw.url()).await;
    let in_flight = tokio::spawn(async move {
        let long = json!({"duration": 60, "steps": 60});
        call(&caller, "ev__trigger-long-running-operation", long).await
    });
    assert!(
        eventually(SOON, || !recorder.seen().progress.is_empty()).await,
        "the call is running"
    );
    server.kill().await;
    let error = tokio::time::timeout(SOON, in_flight)
        .await
        .expect("the call in flight ends when its server dies")
        .unwrap()
        .unwrap_err()
        .to_string();
    assert!(error.contains("`ev`"), "{error}");
    assert_other_session_works(&gw, "local__echo").await;

    let _server = Everything::start_on(Mode::StreamableHttp, port).await;
    gw.wait_state("ev", "ready", Duration::from_secs(20)).await;
    let result = call(&client, "ev__echo", json!({"message": "back"}))
        .await
        .unwrap();
    assert_eq!(text(&result), "Echo: back");
}

/// An HTTP upstream that hangs (it accepts connections, answers nothing): a call in flight
/// fails within a few health timeouts, naming it, instead of waiting out its tool timeout;
/// other sessions are served meanwhile; once it answers again it is reconnected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_http_upstream_is_found_within_its_health_timeout() {
    use crate::fixtures::freezer::Freezer;
    let demo = crate::bench::demo_http().await;
    let target = demo.trim_start_matches("http://").trim_end_matches("/mcp");
    let freezer = Freezer::start(target.parse().unwrap()).await;
    let settings = "health_interval_seconds = 600\nhealth_timeout_seconds = 1\n\
                    restart = { delay_ms = 200, max_delay_ms = 400 }";
    let gw = GatewayBuilder::new()
        .demo("local")
        .http_with("hangs", &format!("http://{}/mcp", freezer.addr), settings)
        .start()
        .await;
    gw.wait_state("hangs", "ready", SOON).await;
    let client = gw.client().await;
    let echo = json!({"text": "before"});
    assert!(call(&client, "hangs__echo", echo).await.is_ok());

    freezer.freeze();
    let started = Instant::now();
    let hung = json!({"text": "into the void"});
    let error = tokio::time::timeout(SOON, call(&client, "hangs__echo", hung))
        .await
        .expect("the call fails long before its 120 s tool timeout")
        .unwrap_err()
        .to_string();
    assert!(error.contains("`hangs`"), "{error}");
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "found after {:?}",
        started.elapsed()
    );
    assert_ne!(gw.state("hangs"), "ready");
    assert_other_session_works(&gw, "local__echo").await;

    freezer.thaw();
    gw.wait_state("hangs", "ready", Duration::from_secs(20))
        .await;
    let result = call(&client, "hangs__echo", json!({"text": "after"}))
        .await
        .unwrap();
    assert!(text(&result).contains("after"), "{result:?}");
}
