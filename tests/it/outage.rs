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
    harness::{GatewayProcess, call, connect_client},
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
