//! The admin listener: a web page (through DNS rebinding or not) cannot drive it, it wants its
//! token even on loopback, what it may add cannot run commands unless the operator said so,
//! and it never listens beyond loopback without a token of the operator's.

use std::{os::unix::fs::PermissionsExt, path::Path, process::Command, time::Duration};

use serde_json::json;

use crate::harness::{GatewayBuilder, GatewayProcess, SWITCHYARD, TEST_ADMIN_TOKEN, TestGateway};

/// The body a page would send to run `sh -c "touch MARKER"` on the gateway's host.
fn planting(marker: &Path) -> serde_json::Value {
    json!({
        "name": "p",
        "command": "sh",
        "args": ["-c", format!("touch {}", marker.display())],
    })
}

/// Nothing ran, and the overlay (which would run it again at every start) was not written.
async fn nothing_ran_or_was_written(gw: &TestGateway, marker: &Path) {
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert!(!marker.exists(), "the command ran");
    let overlay = &gw.gateway.live().config.overlay.path;
    assert!(!overlay.exists(), "the overlay was written");
    assert!(gw.gateway.live().upstream("p").cloned().is_none());
}

/// After DNS rebinding, the attacker's page and the admin listener share an origin in the
/// browser's eyes: `Host` and `Origin` both name the attacker's domain.
#[tokio::test]
async fn a_dns_rebinding_page_cannot_add_an_upstream() {
    let dir = tempfile::tempdir().unwrap();
    let gw = GatewayBuilder::new()
        .demo("demo")
        .section("[admin]\nallow_commands = true")
        .start_on_file(dir.path())
        .await;
    let marker = dir.path().join("pwned");
    let port = gw.admin.port();
    let answer = reqwest::Client::new()
        .post(gw.admin_url("/api/upstreams"))
        .header("host", format!("rb.evil:{port}"))
        .header("origin", format!("http://rb.evil:{port}"))
        .header("sec-fetch-site", "same-origin")
        .bearer_auth(TEST_ADMIN_TOKEN)
        .json(&planting(&marker))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 403, "{}", answer.text().await.unwrap());
    nothing_ran_or_was_written(&gw, &marker).await;
    // Reads are refused the same way: the page learns nothing.
    let status = reqwest::Client::new()
        .get(gw.admin_url("/api/status"))
        .header("host", format!("rb.evil:{port}"))
        .bearer_auth(TEST_ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(status.status(), 403);
}

/// On loopback too, a request without the admin token changes nothing: any local process,
/// or a page that found a way past the Host check, is not the operator. With no token
/// configured, the gateway makes one at its first start, readable only by its owner.
#[tokio::test]
async fn the_admin_api_wants_its_token_on_loopback_too() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let path = dir.path().join("switchyard.toml");
    std::fs::write(
        &path,
        format!(
            "[oauth]\nstate_dir = {:?}\n[admin]\nallow_commands = true\n\
             [upstreams.demo]\ncommand = {SWITCHYARD:?}\nargs = [\"demo-server\"]\n",
            state.display().to_string()
        ),
    )
    .unwrap();
    let gw = GatewayProcess::start(&path);
    let admin = |method, path: &str| {
        reqwest::Client::new().request(method, format!("http://{}{path}", gw.admin))
    };
    let marker = dir.path().join("pwned");
    let without = admin(reqwest::Method::POST, "/api/upstreams")
        .json(&planting(&marker))
        .send()
        .await
        .unwrap();
    assert_eq!(without.status(), 401);
    for (method, path) in [
        (reqwest::Method::POST, "/api/reload"),
        (reqwest::Method::DELETE, "/api/upstreams/demo"),
        (reqwest::Method::DELETE, "/api/upstreams/demo/authorization"),
        (reqwest::Method::POST, "/api/upstreams/demo/disable"),
        (reqwest::Method::POST, "/api/upstreams/demo/enable"),
        (reqwest::Method::POST, "/api/upstreams/demo/reconnect"),
        (reqwest::Method::POST, "/api/upstreams/demo/rediscover"),
        (reqwest::Method::GET, "/api/status"),
    ] {
        let refused = admin(method, path).send().await.unwrap();
        assert_eq!(refused.status(), 401, "{path}");
    }
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert!(!marker.exists(), "the command ran");
    assert!(!dir.path().join("switchyard.overlay.toml").exists());

    let file = state.join("admin.token");
    let mode = std::fs::metadata(&file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "the token file is its owner's alone");
    let token = std::fs::read_to_string(&file).unwrap();
    let with = admin(reqwest::Method::GET, "/api/status")
        .bearer_auth(token.trim())
        .send()
        .await
        .unwrap();
    assert_eq!(with.status(), 200);
}

/// Without `[admin] allow_commands`, the admin token cannot be turned into a shell: an added
/// upstream may not start a program, nor read the gateway's files or environment into the
/// headers it sends to a server of the caller's choosing.
#[tokio::test]
async fn an_added_upstream_cannot_run_commands_or_read_secrets() {
    let dir = tempfile::tempdir().unwrap();
    let gw = GatewayBuilder::new()
        .demo("demo")
        .start_on_file(dir.path())
        .await;
    let marker = dir.path().join("pwned");
    let post = |body: serde_json::Value| {
        reqwest::Client::new()
            .post(gw.admin_url("/api/upstreams"))
            .bearer_auth(TEST_ADMIN_TOKEN)
            .json(&body)
            .send()
    };
    let command = post(planting(&marker)).await.unwrap();
    assert_eq!(command.status(), 403);
    let body = command.text().await.unwrap();
    assert!(body.contains("allow_commands"), "{body}");
    for header in ["${env:HOME}", "${file:/etc/hostname}", "${HOME}"] {
        let exfiltrating = post(json!({
            "name": "p",
            "url": "http://127.0.0.1:9/mcp",
            "headers": { "X-Steal": header },
        }))
        .await
        .unwrap();
        assert_eq!(exfiltrating.status(), 403, "{header}");
    }
    nothing_ran_or_was_written(&gw, &marker).await;
    // A plain remote server may be added.
    let plain = post(json!({"name": "p", "url": "http://127.0.0.1:9/mcp"}))
        .await
        .unwrap();
    assert_eq!(plain.status(), 201, "{}", plain.text().await.unwrap());
}

/// `--admin-listen` beyond loopback is checked as `[admin] listen` is: without a token of the
/// operator's, the gateway does not start. (192.0.2.1 is a documentation address: nothing is
/// ever bound there.)
#[test]
fn the_admin_listener_beyond_loopback_needs_a_token_from_the_command_line_too() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("switchyard.toml");
    std::fs::write(
        &path,
        format!(
            "[oauth]\nstate_dir = {:?}\n[upstreams.demo]\ncommand = {SWITCHYARD:?}\nargs = [\"demo-server\"]\n",
            dir.path().join("state").display().to_string()
        ),
    )
    .unwrap();
    let output = Command::new(SWITCHYARD)
        .args(["run", "-c"])
        .arg(&path)
        .args(["--listen", "127.0.0.1:0", "--admin-listen", "192.0.2.1:0"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--admin-listen") && stderr.contains("admin.token"),
        "{stderr}"
    );
}

/// The pass-through routes are an MCP endpoint too: beyond loopback they need `[auth]`, from
/// the file or the command line; item-level rules they cannot apply are warned of.
#[test]
fn the_passthrough_beyond_loopback_needs_auth() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("switchyard.toml");
    let demo = format!("[upstreams.demo]\ncommand = {SWITCHYARD:?}\nargs = [\"demo-server\"]\n");
    std::fs::write(
        &path,
        format!("[server]\npassthrough_listen = \"192.0.2.1:8081\"\n{demo}"),
    )
    .unwrap();
    let check = Command::new(SWITCHYARD)
        .args(["check", "-c"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(check.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&check.stderr);
    assert!(
        stderr.contains("server.passthrough_listen") && stderr.contains("[auth]"),
        "{stderr}"
    );

    std::fs::write(&path, &demo).unwrap();
    let run = Command::new(SWITCHYARD)
        .args(["run", "-c"])
        .arg(&path)
        .args([
            "--listen",
            "127.0.0.1:0",
            "--passthrough-listen",
            "192.0.2.1:0",
        ])
        .env("XDG_STATE_HOME", dir.path())
        .output()
        .unwrap();
    assert!(!run.status.success());
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(stderr.contains("--passthrough-listen"), "{stderr}");

    std::fs::write(
        &path,
        format!(
            "[server]\npassthrough_listen = \"127.0.0.1:8081\"\n\
             [[policy]]\ndeny.tools = [\"demo:add\"]\n{demo}"
        ),
    )
    .unwrap();
    let check = Command::new(SWITCHYARD)
        .args(["check", "-c"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(check.status.success());
    let stderr = String::from_utf8_lossy(&check.stderr);
    assert!(
        stderr.contains("warning") && stderr.contains("policy[0]"),
        "{stderr}"
    );
}
