//! Loading the `mcpServers` JSON files of MCP clients.

use super::{HttpProtocol, TransportConfig, assert_has, load, problems};

const CLAUDE_DESKTOP: &str = r#"{
  "globalShortcut": "Ctrl+Space",
  "mcpServers": {
    "filesystem": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"],
      "env": { "TOKEN": "${env:GH_TOKEN}" },
      "autoApprove": ["read_file"]
    },
    "remote": {
      "url": "https://mcp.example.com/mcp",
      "headers": { "X-Api-Key": "k", "Authorization": "Bearer ${GH_TOKEN}" }
    },
    "vscode-http": { "type": "http", "url": "http://127.0.0.1:3000/mcp" },
    "old": { "command": "old", "disabled": true }
  }
}"#;

#[test]
fn mcp_servers_json() {
    let config = load("claude_desktop_config.json", CLAUDE_DESKTOP).unwrap();
    let names: Vec<_> = config.upstreams.iter().map(|u| u.name.as_str()).collect();
    assert_eq!(names, ["filesystem", "remote", "vscode-http"]);
    let TransportConfig::Stdio(fs) = &config.upstreams[0].transport else {
        panic!("filesystem is stdio");
    };
    assert_eq!(fs.command, "npx");
    assert_eq!(fs.env, [("TOKEN".to_owned(), "ghp_123".to_owned())]);
    let TransportConfig::Http(remote) = &config.upstreams[1].transport else {
        panic!("remote is http");
    };
    assert_eq!(remote.headers[0].0, "x-api-key");
    assert_eq!(
        remote.headers[1].1, "Bearer ghp_123",
        "Claude Code's ${{NAME}}"
    );
    assert_eq!(
        remote.protocol,
        HttpProtocol::Auto,
        "no type: detected on connect"
    );
    let TransportConfig::Http(vscode) = &config.upstreams[2].transport else {
        panic!("vscode-http is http");
    };
    assert_eq!(vscode.protocol, HttpProtocol::StreamableHttp);
    let sse = load(
        "mcp.json",
        r#"{"mcpServers": {"old": {"type": "sse", "url": "http://127.0.0.1:1/sse"}}}"#,
    )
    .unwrap();
    assert!(matches!(
        &sse.upstreams[0].transport,
        TransportConfig::Http(http) if http.protocol == HttpProtocol::Sse
    ));
}

#[test]
fn json_is_detected_by_content_and_vscode_servers_key_works() {
    let text = r#"  {"servers": {"a": {"type": "stdio", "command": "a"}}}"#;
    let config = load("mcp.conf", text).unwrap();
    assert_eq!(config.upstreams[0].name.as_str(), "a");
}

#[test]
fn json_problems_use_json_key_paths() {
    let found = problems(
        "mcp.json",
        r#"{"mcpServers": {
            "Bad Name": {"command": "x"},
            "a": {"command": "x", "bogus": 1},
            "b": {"type": "websocket", "url": "ws://x"},
            "a": {"command": "y"}
        }, "extra": true}"#,
    );
    for expected in [
        "mcpServers.\"Bad Name\": upstream name `Bad Name` contains 'B'",
        "mcpServers.a.bogus: unknown key",
        "mcpServers.b.type: `websocket` is not a supported transport",
        "mcpServers.a: this upstream is defined more than once",
    ] {
        assert_has(&found, expected);
    }
    assert_eq!(
        found.len(),
        4,
        "the client's own `extra` setting is not ours: {found:?}"
    );
}

#[test]
fn json_syntax_errors_are_located() {
    assert_has(
        &problems(
            "mcp.json",
            "{\n  \"mcpServers\": {\n    \"a\": {\"command\": }\n  }\n}",
        ),
        "mcpServers.a.command (line 3, column 22): expected value",
    );
    assert_has(
        &problems("mcp.json", "{\"mcpServers\": {}} }"),
        "line 1, column 20: syntax error: trailing characters",
    );
    assert_has(
        &problems("mcp.json", "{\"other\": 1}"),
        "no `mcpServers` object",
    );
}
