//! The `switchyard` command and its configuration files: `check`, every file in `conf/`,
//! `config schema`, and running from an MCP client's `mcpServers` JSON.

use std::{path::Path, process::Command, time::Duration};

use serde_json::json;

use crate::{
    fixtures::notes::NotesServer,
    harness::{GatewayProcess, SWITCHYARD, TestGateway, call, connect_client, text},
};

fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn every_file_in_conf_loads() {
    let conf = Path::new(env!("CARGO_MANIFEST_DIR")).join("conf");
    let mut loaded = 0;
    for entry in std::fs::read_dir(&conf).unwrap() {
        let path = entry.unwrap().path();
        let config = switchyard::config::load(&path)
            .unwrap_or_else(|e| panic!("{} does not load:\n{e}", path.display()));
        assert!(!config.upstreams.is_empty(), "{}", path.display());
        let status = Command::new(SWITCHYARD)
            .args(["check", "-c"])
            .arg(&path)
            .output()
            .unwrap();
        assert!(
            status.status.success(),
            "{}",
            String::from_utf8_lossy(&status.stderr)
        );
        loaded += 1;
    }
    assert!(loaded >= 1);
}

#[test]
fn check_reports_every_problem_with_file_and_key_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "bad.toml",
        "[server]\nlisten = \"nowhere\"\n[upstreams.Bad_Name]\ncommand = \"x\"\n\
         [upstreams.web]\nurl = \"not a url\"\ntimeout = 3\n",
    );
    let output = Command::new(SWITCHYARD)
        .args(["check", "-c"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    let header = format!("{}: 4 problems in the configuration:", path.display());
    for expected in [
        header.as_str(),
        "server.listen: `nowhere` is not an address",
        "upstreams.Bad_Name: upstream name `Bad_Name`",
        "upstreams.web.url: `not a url` is not a valid URL",
        "upstreams.web.timeout: unknown key",
    ] {
        assert!(
            stderr.contains(expected),
            "missing {expected:?} in:\n{stderr}"
        );
    }

    // Names from the file are shown with what could move the cursor or fake a line escaped.
    let disguised = write(
        dir.path(),
        "disguised.toml",
        "[upstreams.demo]\ncommand = \"x\"\n\"\\u001b[2J\\nall fine\" = 1\n\
         [upstreams.\"ev\\u001bil\"]\ncommand = \"x\"\n",
    );
    let output = Command::new(SWITCHYARD)
        .args(["check", "-c"])
        .arg(&disguised)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains('\u{1b}'), "{stderr:?}");
    assert!(stderr.contains(r"\u{1b}[2J\nall fine"), "{stderr}");

    let missing = Command::new(SWITCHYARD)
        .args(["check", "-c", "/nonexistent/switchyard.toml"])
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("cannot read the file"));
}

/// `switchyard config schema` prints the configuration file's JSON Schema: the tables and
/// keys it reads, with what each accepts.
#[test]
fn config_schema_describes_the_configuration_file() {
    let output = Command::new(SWITCHYARD)
        .args(["config", "schema"])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let schema: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        schema["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
    let definition = |at: &serde_json::Value| {
        let name = at["$ref"].as_str().unwrap().trim_start_matches("#/$defs/");
        schema["$defs"][name].clone()
    };
    let server = definition(&schema["properties"]["server"]);
    assert_eq!(server["additionalProperties"], false);
    assert_eq!(server["properties"]["listen"]["type"], "string");
    assert_eq!(server["properties"]["listen"]["default"], "127.0.0.1:8080");
    assert!(
        server["properties"]["listen"]["description"]
            .as_str()
            .unwrap()
            .contains("listens")
    );
    // `upstreams` is a table of named tables, each choosing its transport among four.
    let upstream = definition(&schema["properties"]["upstreams"]["additionalProperties"]);
    assert_eq!(
        upstream["properties"]["transport"]["enum"],
        json!(["stdio", "streamable_http", "sse", "auto"])
    );
    assert_eq!(
        upstream["properties"]["connect_timeout_seconds"]["exclusiveMinimum"],
        0
    );
    // `[[quota]]` is an array of tables.
    assert_eq!(schema["properties"]["quota"]["type"], "array");
}

#[tokio::test]
async fn mcp_servers_json_configures_the_gateway() {
    let notes = NotesServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let text_json = json!({
        "mcpServers": {
            "local": {"command": SWITCHYARD, "args": ["demo-server"]},
            "remote": {"type": "http", "url": notes.url(), "headers": {"X-Test": "1"}},
            "off": {"command": "does-not-exist", "disabled": true}
        }
    });
    let path = write(
        dir.path(),
        "claude_desktop_config.json",
        &text_json.to_string(),
    );
    let config = switchyard::config::load(&path).unwrap();
    let gw = TestGateway::start(config).await;
    let client = gw.client().await;
    let tools = client.list_all_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "local__echo"));
    assert!(tools.iter().any(|t| t.name == "remote__echo"));
    let result = call(&client, "remote__echo", json!({"text": "json"}))
        .await
        .unwrap();
    assert_eq!(text(&result), "notes: json");
}

/// The binary itself: run on a JSON config with `--listen 127.0.0.1:0`, serve, and on SIGTERM
/// stop accepting, let the call in flight finish, and close its upstream sessions before
/// exiting.
#[tokio::test]
async fn the_binary_serves_and_stops_cleanly() {
    let notes = NotesServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let config = json!({"mcpServers": {
        "local": {"command": SWITCHYARD, "args": ["demo-server"]},
        "remote": {"url": notes.url()}
    }});
    let path = write(dir.path(), "servers.json", &config.to_string());
    let gateway = GatewayProcess::start(&path);
    let url = gateway.url();
    let client = connect_client(&url, "cli").await;
    let mut ready = false;
    for _ in 0..100 {
        let tools = client.list_all_tools().await.unwrap();
        if tools.iter().any(|t| t.name.starts_with("local__"))
            && tools.iter().any(|t| t.name.starts_with("remote__"))
        {
            ready = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(ready, "both upstreams' tools appear");
    assert_eq!(notes.open_sessions(), 1, "the gateway's shared session");
    let result = call(&client, "local__echo", json!({"text": "bin"}))
        .await
        .unwrap();
    assert_eq!(text(&result), "bin");
    let result = call(&client, "remote__echo", json!({"text": "bin"}))
        .await
        .unwrap();
    assert_eq!(text(&result), "notes: bin");
    assert_eq!(notes.open_sessions(), 2, "and the client's own");

    // SIGTERM, as a service manager would send it, while a call runs.
    let slow = connect_client(&url, "slow").await;
    let in_flight = tokio::spawn(async move {
        let result = call(&slow, "local__slow_task", json!({"seconds": 2})).await;
        (result, slow)
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    gateway.signal("TERM");
    let mut refused = false;
    for _ in 0..30 {
        if reqwest::get(&url).await.is_err() {
            refused = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(refused, "no new connection is accepted once shutting down");
    let (result, _slow) = in_flight.await.unwrap();
    let result = result.expect("the call in flight finishes within the grace period");
    assert_eq!(text(&result), "waited 2 seconds");
    let exit = tokio::task::spawn_blocking(move || gateway.wait())
        .await
        .unwrap();
    assert!(exit.success(), "{exit:?}");
    assert_eq!(
        notes.open_sessions(),
        1,
        "the shared upstream session was deleted before exit; the client's own is kept for \
         its session, which the next start serves (the embedded store keeps both)"
    );
}
