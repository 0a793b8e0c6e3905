//! `switchyard import`, the binary, on a fixture home with a file of each client: the
//! configuration it writes passes `switchyard check` and serves every server once, and
//! `--connect`/`--undo` round-trip a client's file byte for byte.

use std::{path::Path, process::Command};

use serde_json::json;

use crate::{
    fixtures::notes::NotesServer,
    harness::{SWITCHYARD, TestGateway},
};

fn put(root: &Path, relative: &str, text: &str) {
    let path = root.join(relative);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A home with every client configured: the demo server (twice under different names, which
/// is one upstream), the notes server over HTTP (in two clients, one naming the transport),
/// and demo servers that differ by their environment.
fn fixture_home(home: &Path, notes: &str) {
    let demo = json!({"command": SWITCHYARD, "args": ["demo-server"]});
    put(
        home,
        ".config/Claude/claude_desktop_config.json",
        &json!({"mcpServers": {"Demo Server": demo}}).to_string(),
    );
    put(
        home,
        ".claude.json",
        &json!({
            "mcpServers": {"notes": {"type": "http", "url": notes}},
            "projects": {"/p": {"mcpServers": {"demo": {"type": "stdio", "command": SWITCHYARD, "args": ["demo-server"]}}}}
        })
        .to_string(),
    );
    put(
        home,
        ".cursor/mcp.json",
        &json!({"mcpServers": {"with_home": {"command": SWITCHYARD, "args": ["demo-server"], "env": {"MARK": "${env:HOME}"}}}})
            .to_string(),
    );
    put(
        home,
        ".config/Code/User/mcp.json",
        &format!(
            "{{\n  // VS Code's own file\n  \"servers\": {{\n    \"vs-demo\": {{\"type\": \"stdio\", \
             \"command\": {SWITCHYARD:?}, \"args\": [\"demo-server\"], \"env\": {{\"X\": \"1\"}},}},\n  }},\n}}\n"
        ),
    );
    put(
        home,
        ".codeium/windsurf/mcp_config.json",
        &json!({"mcpServers": {"notes-again": {"serverUrl": notes}}}).to_string(),
    );
    put(
        home,
        ".config/zed/settings.json",
        &format!(
            "// Zed\n{{\"theme\": \"One\", \"context_servers\": {{\"zed-demo\": {{\"command\": {SWITCHYARD:?}, \
             \"args\": [\"demo-server\"], \"env\": {{\"Y\": \"2\"}}}},}},}}\n"
        ),
    );
}

fn switchyard(args: &[&str]) -> std::process::Output {
    Command::new(SWITCHYARD).args(args).output().unwrap()
}

#[tokio::test]
async fn an_imported_configuration_checks_and_serves_every_server_once() {
    let notes = NotesServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let (home, work) = (dir.path().join("home"), dir.path().join("work"));
    std::fs::create_dir_all(&work).unwrap();
    fixture_home(&home, &notes.url());
    let out = dir.path().join("imported.toml");
    let (home_arg, work_arg, out_arg) = (
        home.display().to_string(),
        work.display().to_string(),
        out.display().to_string(),
    );
    let import_all = || {
        switchyard(&[
            "import",
            "--home",
            &home_arg,
            "--workspace",
            &work_arg,
            "-o",
            &out_arg,
        ])
    };
    let import = import_all();
    let report = String::from_utf8_lossy(&import.stderr);
    assert!(import.status.success(), "{report}");
    assert!(
        report
            .contains("the same server in Claude Desktop as `Demo Server`, Claude Code as `demo`"),
        "{report}"
    );
    assert!(report.contains("passes"), "{report}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&out).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let again = import_all();
    assert!(
        !again.status.success(),
        "the output is not replaced without --force"
    );

    let check = switchyard(&["check", "-c", &out_arg]);
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );

    let config = switchyard::config::load(&out).unwrap();
    let names: Vec<String> = config
        .upstreams
        .iter()
        .map(|u| u.name.as_str().to_owned())
        .collect();
    assert_eq!(
        names,
        ["demo-server", "notes", "with-home", "vs-demo", "zed-demo"]
    );
    let gw = TestGateway::start(config).await;
    let client = gw.client().await;
    let tools: Vec<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|tool| tool.name.to_string())
        .collect();
    for name in &names {
        assert!(
            tools
                .iter()
                .any(|tool| tool.starts_with(&format!("{name}__"))),
            "{name} serves: {tools:?}"
        );
    }
    client.cancel().await.unwrap();
}

#[test]
fn connect_and_undo_round_trip_a_client_file() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    fixture_home(&home, "http://127.0.0.1:1/mcp");
    let zed = home.join(".config/zed/settings.json");
    let before = std::fs::read(&zed).unwrap();
    let out = dir.path().join("imported.toml").display().to_string();
    let home_arg = home.display().to_string();
    let connect = switchyard(&[
        "import",
        "--home",
        &home_arg,
        "--workspace",
        &home_arg,
        "-o",
        &out,
        "--connect",
        "zed",
        "--url",
        "http://127.0.0.1:8080/mcp",
    ]);
    assert!(
        connect.status.success(),
        "{}",
        String::from_utf8_lossy(&connect.stderr)
    );
    let connected = std::fs::read_to_string(&zed).unwrap();
    assert!(connected.contains("\"switchyard\""), "{connected}");
    assert!(
        connected.contains("http://127.0.0.1:8080/mcp"),
        "{connected}"
    );
    assert!(!connected.contains("zed-demo"), "{connected}");
    assert!(
        connected.contains("\"theme\""),
        "the client's other settings stay: {connected}"
    );
    let undo = switchyard(&["import", "--home", &home_arg, "--undo", "zed"]);
    assert!(
        undo.status.success(),
        "{}",
        String::from_utf8_lossy(&undo.stderr)
    );
    assert_eq!(std::fs::read(&zed).unwrap(), before);
    let without_output = switchyard(&["import", "--home", &home_arg, "--connect", "zed"]);
    assert!(!without_output.status.success(), "--connect needs --output");
}

/// A project's `.mcp.json` (read from the current directory by default) whose server name
/// would, written raw into a comment, open an admin listener on every address with a known
/// token and allow commands. What `switchyard import` writes holds the one server, and what
/// it prints carries no raw control character from the file.
#[test]
fn a_crafted_project_file_cannot_write_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let (home, work) = (dir.path().join("home"), dir.path().join("work"));
    std::fs::create_dir_all(&home).unwrap();
    let name = "docs\n\n[admin]\nlisten = \"0.0.0.0:9999\"\ntoken = \"known-to-the-attacker\"\n\
                allow_commands = true\n# \u{1b}[2J";
    let file = serde_json::json!({"mcpServers": {name: {"command": "docs-server"}}});
    put(&work, ".mcp.json", &file.to_string());
    let out = dir.path().join("imported.toml");
    let import = Command::new(SWITCHYARD)
        .args(["import", "--home", &home.display().to_string(), "-o"])
        .arg(&out)
        .current_dir(&work)
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&import.stderr);
    assert!(import.status.success(), "{report}");
    assert!(!report.contains('\u{1b}'), "{report}");
    let config = switchyard::config::load(&out).unwrap();
    assert_eq!(config.upstreams.len(), 1);
    assert!(config.admin.token.is_none() && !config.admin.allow_commands);
    assert!(
        config
            .admin
            .listen
            .is_none_or(|listen| listen.ip().is_loopback())
    );
    let written = std::fs::read_to_string(&out).unwrap();
    assert!(
        !written.contains('\u{1b}') && !written.contains("\n[admin]"),
        "{written}"
    );
}
