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

#[test]
fn langchain_python_connections_load_with_their_keys_mapped() {
    let config = load(
        "connections.json",
        r#"{
            "math": {"transport": "stdio", "command": "python", "args": ["math.py"],
                     "encoding": "utf-8", "encoding_error_handler": "strict"},
            "weather": {"transport": "streamable_http", "url": "http://127.0.0.1:8000/mcp",
                        "sse_read_timeout": 120, "terminate_on_close": true},
            "legacy": {"transport": "sse", "url": "http://127.0.0.1:8001/sse"}
        }"#,
    )
    .unwrap();
    let protocol = |i: usize| match &config.upstreams[i].transport {
        TransportConfig::Http(http) => Some(http.protocol),
        TransportConfig::Stdio(_) => None,
    };
    assert_eq!(protocol(0), None);
    assert_eq!(protocol(1), Some(HttpProtocol::StreamableHttp));
    assert_eq!(protocol(2), Some(HttpProtocol::Sse));
    assert_eq!(
        config.upstreams[1].policy.stream_idle_timeout,
        std::time::Duration::from_secs(120)
    );
}

#[test]
fn langchain_js_keys_map_onto_switchyards() {
    let config = load(
        "langchain.json",
        r#"{
            "prefixToolNameWithServerName": false,
            "defaultToolTimeout": 1500,
            "outputHandling": {"resource": "content"},
            "mcpServers": {
                "fallback": {"url": "http://127.0.0.1:1/mcp", "transport": "http"},
                "plain": {"url": "http://127.0.0.1:2/mcp", "automaticSSEFallback": false,
                          "reconnect": {"enabled": false}},
                "local": {"command": "x", "restart": {"maxAttempts": 4, "delayMs": 250},
                          "outputHandling": "content", "defaultToolTimeout": 9000}
            }
        }"#,
    )
    .unwrap();
    assert_eq!(config.catalog.prefix_mode, crate::names::PrefixMode::Never);
    let [fallback, plain, local] = &config.upstreams[..] else {
        panic!("three upstreams");
    };
    assert!(
        matches!(&fallback.transport, TransportConfig::Http(h) if h.protocol == HttpProtocol::Auto)
    );
    assert!(
        matches!(&plain.transport, TransportConfig::Http(h) if h.protocol == HttpProtocol::StreamableHttp)
    );
    assert_eq!(
        plain.policy.restart.max_attempts,
        Some(1),
        "not enabled: no retry"
    );
    assert_eq!(local.policy.restart.max_attempts, Some(4));
    assert_eq!(
        local.policy.restart.delay,
        std::time::Duration::from_millis(250)
    );
    assert_eq!(
        local.policy.restart.max_delay,
        std::time::Duration::from_millis(250)
    );
    assert_eq!(
        fallback.policy.tool_timeout,
        std::time::Duration::from_millis(1500)
    );
    assert_eq!(local.policy.tool_timeout, std::time::Duration::from_secs(9));
    assert_eq!(
        fallback.items.inline_resources,
        Some(crate::config::INLINE_BYTES)
    );
}

#[test]
fn langchain_keys_switchyard_cannot_honour_are_named() {
    let found = problems(
        "langchain.json",
        r#"{
            "additionalToolNamePrefix": "mcp",
            "outputHandling": "artifact",
            "mcpServers": {
                "a": {"command": "x", "reconnect": {"enabled": true}, "encoding": "latin-1"},
                "b": {"url": "http://127.0.0.1:1/mcp", "transport": "websocket"},
                "c": {"url": "http://127.0.0.1:1/mcp", "type": "sse", "transport": "http"},
                "d": {"url": "http://127.0.0.1:1/mcp", "outputHandling": {"image": "artifact"},
                      "defaultToolTimeout": 0}
            }
        }"#,
    );
    for expected in [
        "additionalToolNamePrefix: Switchyard names tools",
        "outputHandling: Switchyard hands every text, image and audio block",
        "mcpServers.a.reconnect: is for the other transport; this server's is `restart`",
        "mcpServers.a.encoding: MCP messages are UTF-8",
        "mcpServers.b.transport: `websocket` is not a supported transport",
        "mcpServers.c.transport: says `http` but `type` says `sse`",
        "mcpServers.d.outputHandling.image: Switchyard hands every",
        "mcpServers.d.defaultToolTimeout: must be a number of milliseconds above 0",
    ] {
        assert_has(&found, expected);
    }
    assert_eq!(found.len(), 8, "{found:#?}");
}
