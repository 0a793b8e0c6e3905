//! An HTTP upstream killed and started again while clients call it: every error a client gets
//! names the upstream in words (no Rust type, no URL), the log tells the outage in a few lines
//! rather than one per failed call, and calls succeed again soon after the server is back.

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use serde_json::json;

use crate::{
    fixtures::notes::NotesServer,
    harness::{GatewayProcess, answering, call, closed_port, connect_client},
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_under_load_reads_clean_and_ends_soon() {
    let notes = NotesServer::start().await;
    let addr = notes.addr;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("switchyard.toml");
    std::fs::write(
        &path,
        format!(
            "[server]\nwatch_config = false\n\n[upstreams.remote]\nurl = \"{}?api_key=hush\"\n\
             session = \"shared\"\n",
            notes.url()
        ),
    )
    .unwrap();
    let gw = GatewayProcess::start(&path);
    let url = gw.url();
    let deadline = Instant::now() + Duration::from_secs(20);
    let probe = connect_client(&url, "probe").await;
    while call(&probe, "remote__echo", json!({"text": "up"}))
        .await
        .is_err()
    {
        assert!(Instant::now() < deadline, "the upstream never served");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Four clients call in a loop; every error text is kept, with when the last one was.
    let errors: Arc<Mutex<Vec<String>>> = Arc::default();
    let last_error: Arc<Mutex<Option<Instant>>> = Arc::default();
    let stop = tokio_util::sync::CancellationToken::new();
    let mut clients = Vec::new();
    for c in 0..4 {
        let client = connect_client(&url, &format!("client-{c}")).await;
        let (errors, last_error, stop) = (errors.clone(), last_error.clone(), stop.clone());
        clients.push(tokio::spawn(async move {
            while !stop.is_cancelled() {
                if let Err(error) = call(&client, "remote__echo", json!({"text": "x"})).await {
                    errors.lock().unwrap().push(error.to_string());
                    *last_error.lock().unwrap() = Some(Instant::now());
                    // As a client would, not in a tight loop.
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
            let _ = client.cancel().await;
        }));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let logged_before = gw.logs().len();

    notes.stop();
    drop(notes);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let notes = NotesServer::start_on(addr).await;
    let back = Instant::now();
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop.cancel();
    for client in clients {
        client.await.unwrap();
    }

    let errors = errors.lock().unwrap().clone();
    assert!(!errors.is_empty(), "the outage was seen");
    for error in &errors {
        assert!(error.contains("upstream `remote`"), "{error}");
        for leak in ["::", "Transport [", "<", "hush", "http://"] {
            assert!(!error.contains(leak), "{leak:?} in {error}");
        }
    }
    let recovered = last_error
        .lock()
        .unwrap()
        .map(|at| at.saturating_duration_since(back));
    eprintln!(
        "{} failed calls; the last {:?} after the server was back",
        errors.len(),
        recovered
    );
    assert!(
        recovered.is_none_or(|after| after < Duration::from_secs(2)),
        "calls succeed again soon after the server is back: {recovered:?}"
    );

    let logs = gw.logs();
    let during: Vec<&String> = logs[logged_before..]
        .iter()
        .filter(|line| line.contains("WARN") || line.contains("ERROR"))
        .collect();
    eprintln!("the outage in {} log lines: {during:#?}", during.len());
    assert!(
        during.len() <= 12,
        "{} failed calls logged in {} lines: {during:#?}",
        errors.len(),
        during.len()
    );
    for line in &during {
        for leak in ["Transport [", "hush"] {
            assert!(!line.contains(leak), "{leak:?} in {line}");
        }
    }
    drop(notes);
}

/// What names a Rust type or dumps a value's structure, never in what a client or operator reads.
const TYPE_LEAKS: &[&str] = &["::", "Transport [", "Error {", "Os {", "kind: ", "Some("];

/// Every way an upstream can fail, each reads in words: what a client calling it gets, the
/// upstream's last error on `/healthz`, and the log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_way_an_upstream_fails_reads_in_words() {
    let refused = format!("127.0.0.1:{}", closed_port().await);
    let erroring = answering(500, "text/plain", "Internal Server Error").await;
    let garbled = answering(200, "application/json", "{not json").await;
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent_addr = silent.local_addr().unwrap();
    // Accepts, reads, never answers.
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = silent.accept().await {
            held.push(stream);
        }
    });
    let notes = NotesServer::start().await;
    let freezer = crate::fixtures::freezer::Freezer::start(notes.addr).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("switchyard.toml");
    std::fs::write(
        &path,
        format!(
            "[server]\nwatch_config = false\n\n\
             [upstreams.refused]\nurl = \"http://{refused}/mcp\"\n\n\
             [upstreams.erroring]\nurl = \"http://{erroring}/mcp\"\n\n\
             [upstreams.garbled]\nurl = \"http://{garbled}/mcp\"\n\n\
             [upstreams.tls]\nurl = \"https://{garbled}/mcp\"\n\n\
             [upstreams.silent]\nurl = \"http://{silent_addr}/mcp\"\nconnect_timeout_seconds = 1\n\n\
             [upstreams.exits]\ncommand = \"sh\"\nargs = [\"-c\", \"echo going >&2; exit 3\"]\n\n\
             [upstreams.frozen]\nurl = \"http://{}/mcp\"\ndefault_tool_timeout_seconds = 1\n",
            freezer.addr
        ),
    )
    .unwrap();
    let gw = GatewayProcess::start(&path);
    let failing = ["refused", "erroring", "garbled", "tls", "silent", "exits"];

    // Each failing upstream has failed at least once (its error on /healthz); the frozen one
    // serves until it is frozen.
    let health_url = format!("http://{}/healthz", gw.addr);
    let deadline = Instant::now() + Duration::from_secs(30);
    let upstream_errors = loop {
        let health: serde_json::Value = reqwest::get(&health_url)
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let upstreams = health["upstreams"].as_array().cloned().unwrap_or_default();
        let error_of = |name: &str| {
            upstreams
                .iter()
                .find(|u| u["name"] == name)
                .and_then(|u| u["last_error"].as_str().map(str::to_owned))
        };
        let frozen_ready = upstreams
            .iter()
            .any(|u| u["name"] == "frozen" && u["state"] == "ready");
        let errors: Vec<(String, Option<String>)> = failing
            .iter()
            .map(|name| (name.to_string(), error_of(name)))
            .collect();
        if frozen_ready && errors.iter().all(|(_, error)| error.is_some()) {
            break errors;
        }
        assert!(
            Instant::now() < deadline,
            "every upstream tried once: {health:#}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    for (name, error) in &upstream_errors {
        let error = error.as_deref().unwrap_or_default();
        eprintln!("{name}: {error}");
        for leak in TYPE_LEAKS {
            assert!(
                !error.contains(leak),
                "{leak:?} in {name}'s last error: {error}"
            );
        }
        assert_eq!(type_name_in(error), None, "in {name}'s last error: {error}");
    }

    let client = connect_client(&gw.url(), "caller").await;
    freezer.freeze();
    let mut client_errors = Vec::new();
    for name in failing.iter().chain(&["frozen"]) {
        let error = call(&client, &format!("{name}__echo"), json!({"text": "x"}))
            .await
            .expect_err("a failing upstream's call fails")
            .to_string();
        eprintln!("{name} call: {error}");
        assert!(error.contains(&format!("upstream `{name}`")), "{error}");
        for leak in TYPE_LEAKS.iter().chain(&["http://", "https://"]) {
            assert!(
                !error.contains(leak),
                "{leak:?} in the error of {name}: {error}"
            );
        }
        // The message, before the error's data (JSON, whose keys are the protocol's).
        let message = error.split("({").next().unwrap_or_default();
        assert_eq!(
            type_name_in(message),
            None,
            "in the error of {name}: {error}"
        );
        client_errors.push(error);
    }
    assert!(
        client_errors
            .last()
            .is_some_and(|e| e.contains("1s") || e.contains("time")),
        "the frozen upstream's call timed out: {client_errors:?}"
    );
    let _ = client.cancel().await;

    for line in gw
        .logs()
        .iter()
        .filter(|line| line.contains("WARN") || line.contains("ERROR"))
    {
        for leak in ["Transport [", "Error {", "Os {", "kind: ", "Some("] {
            assert!(!line.contains(leak), "{leak:?} in the log: {line}");
        }
    }
    freezer.thaw();
    drop(notes);
}

/// The first word of `text` written as a Rust type is (`ServerJsonRpcMessage`,
/// `InvalidContentType`): an upper-case letter after a lower-case one.
fn type_name_in(text: &str) -> Option<&str> {
    text.split(|c: char| !c.is_ascii_alphanumeric())
        .find(|word| {
            word.as_bytes()
                .windows(2)
                .any(|pair| pair[0].is_ascii_lowercase() && pair[1].is_ascii_uppercase())
        })
}
