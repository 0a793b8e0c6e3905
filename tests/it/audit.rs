//! The audit log: written under load through rotation, it verifies as one chain; one changed
//! byte, one removed record or two swapped records make `switchyard audit verify` fail naming
//! the record. Records say who called what of which upstream and how it ended, with the
//! arguments as a digest or in full as the upstream's setting says, and record refused calls
//! and failed authentication too.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::{
    fixtures::scripted::Scripted,
    harness::{GatewayBuilder, SWITCHYARD, api_key, api_keys_section},
};

/// The log's files, oldest first.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut rotated: Vec<(u32, PathBuf)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter_map(|path| {
            let name = path.file_name()?.to_str()?.to_owned();
            match name.strip_prefix("audit.log") {
                Some("") => Some((0, path)),
                Some(n) => Some((n.strip_prefix('.')?.parse().ok()?, path)),
                None => None,
            }
        })
        .collect();
    rotated.sort_by_key(|(n, _)| std::cmp::Reverse(*n));
    rotated.into_iter().map(|(_, path)| path).collect()
}

fn lines(files: &[PathBuf]) -> Vec<String> {
    files
        .iter()
        .flat_map(|file| {
            std::fs::read_to_string(file)
                .unwrap()
                .lines()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// `switchyard audit verify FILES`: whether it passed, and what it printed.
fn verify(files: &[PathBuf]) -> (bool, String) {
    verify_with(files, &[])
}

fn sha256_hex(text: &str) -> String {
    aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, text.as_bytes())
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

async fn post(
    url: &str,
    key: Option<&str>,
    session: Option<&str>,
    body: Value,
) -> reqwest::Response {
    let mut request = reqwest::Client::new()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2025-11-25")
        .body(body.to_string());
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    request.send().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_audit_log_written_under_load_verifies_and_names_what_was_tampered_with() {
    let digest =
        Scripted::start(json!({"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}))
            .await;
    let full =
        Scripted::start(json!({"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}))
            .await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.log");
    let gw = GatewayBuilder::new()
        .section(&format!(
            "[audit]\nfile = {:?}\nmax_file_bytes = 16384\n",
            log.display().to_string()
        ))
        .section(&api_keys_section(&["alice"]))
        .http_with("hashed", &digest.url(), "session = \"shared\"")
        .http_with(
            "open",
            &full.url(),
            "session = \"shared\"\naudit_arguments = \"full\"",
        )
        .start()
        .await;
    let url = gw.url();
    let key = api_key("alice");
    let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "a", "version": "1"}}});
    let opened = post(&url, Some(&key), None, initialize).await;
    let session = opened.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();

    // 200 calls, 8 at a time.
    let calls = futures::stream::iter(0..200).map(|n| {
        let (url, key, session) = (url.clone(), key.clone(), session.clone());
        async move {
            let tool = if n % 2 == 0 {
                "hashed__echo"
            } else {
                "open__echo"
            };
            let call = json!({"jsonrpc": "2.0", "id": n + 1, "method": "tools/call",
                              "params": {"name": tool, "arguments": {"n": n}}});
            let answer = post(&url, Some(&key), Some(&session), call).await;
            assert_eq!(answer.status(), 200);
            answer.text().await.unwrap();
        }
    });
    use futures::StreamExt;
    calls.buffer_unordered(8).collect::<Vec<_>>().await;
    let unknown = json!({"jsonrpc": "2.0", "id": 900, "method": "tools/call",
                         "params": {"name": "nowhere__tool", "arguments": {}}});
    post(&url, Some(&key), Some(&session), unknown)
        .await
        .text()
        .await
        .unwrap();
    let stranger = post(&url, Some("not-a-key"), None, json!({})).await;
    assert_eq!(stranger.status(), 401);

    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    while lines(&files(dir.path())).len() < 202 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "records were not written"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let written = files(dir.path());
    assert!(written.len() >= 3, "the log rotated: {written:?}");
    let (ok, text) = verify(&written);
    assert!(ok, "{text}");
    assert!(text.contains("202 records verified"), "{text}");

    let records: Vec<Value> = lines(&written)
        .iter()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let hashed = records
        .iter()
        .find(|r| r["upstream"] == "hashed" && r["kind"] == "tools/call")
        .unwrap();
    assert_eq!(hashed["principal"], "user:key:alice");
    assert_eq!(hashed["item"], "echo");
    assert_eq!(hashed["outcome"], "ok");
    assert!(hashed["duration_ms"].as_f64().unwrap() > 0.0);
    assert_eq!(hashed["session"].as_str().unwrap().len(), 8);
    let n = hashed["arguments"]["sha256"].as_str().unwrap();
    assert!(
        (0..200).any(|i| sha256_hex(&format!("{{\"n\":{i}}}")) == n),
        "{hashed}"
    );
    let open = records.iter().find(|r| r["upstream"] == "open").unwrap();
    assert!(open["arguments"]["n"].is_u64(), "{open}");
    assert!(
        records
            .iter()
            .any(|r| r["outcome"] == "refused" && r["item"] == "nowhere__tool")
    );
    assert!(
        records
            .iter()
            .any(|r| r["kind"] == "auth" && r["outcome"] == "refused")
    );
    assert!(
        !lines(&written)
            .iter()
            .any(|line| line.contains("not-a-key"))
    );
    let metrics = gw.metrics_text().await;
    assert!(
        metrics.contains("switchyard_audit_records_total{outcome=\"written\"} 202"),
        "{metrics}"
    );
    crate::operate::assert_dashboard_series(&metrics, "switchyard_audit_");

    // Tampering, each on a copy: a changed byte, a removed record, two records swapped.
    let copy = |edit: &dyn Fn(&mut Vec<String>)| -> (bool, String) {
        let tampered = tempfile::tempdir().unwrap();
        let mut paths = Vec::new();
        for (i, file) in written.iter().enumerate() {
            let mut file_lines: Vec<String> = std::fs::read_to_string(file)
                .unwrap()
                .lines()
                .map(str::to_owned)
                .collect();
            if i == 1 {
                edit(&mut file_lines);
            }
            let path = tampered.path().join(format!("part{i}"));
            std::fs::write(&path, file_lines.join("\n") + "\n").unwrap();
            paths.push(path);
        }
        verify(&paths)
    };
    let (ok, text) = copy(&|lines| lines[3] = lines[3].replacen("\"ok\"", "\"ko\"", 1));
    assert!(
        !ok && text.contains("part1 line 4") && text.contains("altered"),
        "{text}"
    );
    let (ok, text) = copy(&|lines| {
        lines.remove(2);
    });
    assert!(
        !ok && text.contains("part1 line 3") && text.contains("chain breaks"),
        "{text}"
    );
    let (ok, text) = copy(&|lines| lines.swap(1, 2));
    assert!(!ok && text.contains("part1 line 2"), "{text}");
}

/// `switchyard audit verify` with `extra` options (`--head`, `--from`): whether it passed,
/// and what it printed.
fn verify_with(files: &[PathBuf], extra: &[&str]) -> (bool, String) {
    let output = std::process::Command::new(SWITCHYARD)
        .args(["audit", "verify"])
        .args(extra)
        .args(files)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout).to_string()
        + &String::from_utf8_lossy(&output.stderr);
    (output.status.success(), text)
}

/// `count` echo calls through a gateway process at `url`.
async fn calls(url: &str, count: u64) {
    let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "a", "version": "1"}}});
    let opened = post(url, None, None, initialize).await;
    let session = opened.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    for n in 0..count {
        let call = json!({"jsonrpc": "2.0", "id": n + 1, "method": "tools/call",
                          "params": {"name": "demo__echo", "arguments": {"text": "x"}}});
        let answer = post(url, None, Some(&session), call).await;
        assert_eq!(answer.status(), 200);
        answer.text().await.unwrap();
    }
}

/// The ends of the chain are checked too. Records cut from the end of the log, or a gateway
/// restarted on a cut log (which used to go on from the cut as if nothing had happened), make
/// `audit verify` fail naming the missing records, where the head kept in the state directory
/// can be read; a log cut at its start is said to be so, unless the caller says where it
/// starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_cut_from_either_end_of_the_log_are_found() {
    let dir = tempfile::tempdir().unwrap();
    let (log, state) = (dir.path().join("audit.log"), dir.path().join("state"));
    let config = dir.path().join("switchyard.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nwatch_config = false\n\n[oauth]\nstate_dir = {:?}\n\n\
             [audit]\nfile = {:?}\n\n[upstreams.demo]\ncommand = {SWITCHYARD:?}\n\
             args = [\"demo-server\"]\n",
            state.display().to_string(),
            log.display().to_string()
        ),
    )
    .unwrap();
    let kept = switchyard::audit::head::path_for(&state, &log);
    let kept_seq = || {
        switchyard::audit::head::read(&kept)
            .ok()
            .flatten()
            .map_or(0, |head| head.seq)
    };
    let mut gw = crate::harness::GatewayProcess::start(&config);
    calls(&gw.url(), 20).await;
    let written =
        crate::harness::eventually(std::time::Duration::from_secs(10), || kept_seq() == 20).await;
    assert!(written, "the head kept: {}", kept_seq());
    gw.kill();
    let records = lines(std::slice::from_ref(&log));
    assert_eq!(records.len(), 20);
    let head_arg = kept.display().to_string();
    let with_head = ["--head", head_arg.as_str()];
    let (ok, text) = verify_with(std::slice::from_ref(&log), &with_head);
    assert!(ok && text.contains("its end is the head kept"), "{text}");
    let (ok, text) = verify_with(
        std::slice::from_ref(&log),
        &["--config", config.to_str().unwrap()],
    );
    assert!(ok && text.contains("its end is the head kept"), "{text}");

    // Cut from the end: the file alone is a good chain, the kept head is not its end.
    let cut = dir.path().join("cut.log");
    std::fs::write(&cut, records[..15].join("\n") + "\n").unwrap();
    let (ok, text) = verify_with(std::slice::from_ref(&cut), &with_head);
    assert!(
        !ok && text.contains("records 16…20 are missing from the end"),
        "{text}"
    );
    let (ok, text) = verify_with(std::slice::from_ref(&cut), &[]);
    assert!(
        ok && text.contains("cannot be seen"),
        "without a head, it says so: {text}"
    );

    // Cut from the start: said so, unless the caller says where the files start.
    let late = dir.path().join("late.log");
    std::fs::write(&late, records[5..].join("\n") + "\n").unwrap();
    let (ok, text) = verify_with(std::slice::from_ref(&late), &[]);
    assert!(!ok && text.contains("start at record 6"), "{text}");
    let (ok, text) = verify_with(&[late], &["--from", "6"]);
    assert!(ok, "{text}");

    // The log cut, and the gateway started on it again: it goes on from the kept head, says
    // so in the log, and the gap shows.
    std::fs::write(&log, records[..15].join("\n") + "\n").unwrap();
    let gw = crate::harness::GatewayProcess::start(&config);
    calls(&gw.url(), 1).await;
    let written =
        crate::harness::eventually(std::time::Duration::from_secs(10), || kept_seq() == 22).await;
    assert!(written, "the head kept: {}", kept_seq());
    let after = lines(std::slice::from_ref(&log));
    let lost: Value = serde_json::from_str(&after[15]).unwrap();
    assert_eq!(lost["outcome"], "records_lost", "{lost}");
    assert!(lost["detail"].as_str().unwrap().contains("16…20"), "{lost}");
    let (ok, text) = verify_with(&[log], &with_head);
    assert!(!ok && text.contains("records 16…20 are missing"), "{text}");
}
