//! `switchyard import` on a fixture home with a file of each client, in each one's format
//! (comments and trailing commas where the client allows them).

use std::path::Path;

use proptest::prelude::*;
use serde_json::{Map, Value, json};

use super::{clients::Client, configuration_of, connect, merge, scan, servers::Spec, write};

/// Writes `text` at `home/relative`.
fn put(home: &Path, relative: &str, text: &str) {
    let path = home.join(relative);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

const CLAUDE_DESKTOP: &str = r#"{
  "mcpServers": {
    "filesystem": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-filesystem", "/home/u/notes"]
    },
    "GitHub Server": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-github"],
      "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_abcdefghijklmnop"}
    },
    "old": {"command": "old-server", "disabled": true}
  },
  "globalShortcut": "Ctrl+Space"
}"#;

const CLAUDE_CODE: &str = r#"{
  "numStartups": 12,
  "mcpServers": {
    "linear": {"type": "sse", "url": "https://mcp.linear.app/sse"},
    "api": {
      "type": "http",
      "url": "https://api.example.com/mcp",
      "headers": {"Authorization": "Bearer ${API_TOKEN}"}
    }
  },
  "projects": {
    "/home/u/app": {
      "mcpServers": {
        "filesystem": {
          "type": "stdio",
          "command": "npx",
          "args": ["-y", "@modelcontextprotocol/server-filesystem", "/home/u/notes"],
          "env": {}
        }
      }
    }
  }
}"#;

const CURSOR: &str = r#"{
  "mcpServers": {
    "fetch": {"command": "uvx", "args": ["mcp-server-fetch"]},
    "files": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-filesystem", "${userHome}/notes"]
    }
  }
}"#;

const VSCODE_USER: &str = r#"{
  // Servers for every workspace.
  "inputs": [
    {"type": "promptString", "id": "brave-key", "description": "Brave API key", "password": true}
  ],
  "servers": {
    "brave": {
      "type": "stdio",
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-brave-search"],
      "env": {"BRAVE_API_KEY": "${input:brave-key}"},
    },
    "memory": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"]},
  },
}"#;

const VSCODE_WORKSPACE_SETTINGS: &str = r#"{
  "editor.tabSize": 2,
  /* The older place for servers. */
  "mcp": {
    "servers": {
      "git": {"command": "uvx", "args": ["mcp-server-git", "--repository", "${workspaceFolder}"]}
    }
  }
}"#;

const WINDSURF: &str = r#"{
  "mcpServers": {
    "remote": {"serverUrl": "https://remote.example.com/mcp?api_key=sk-1234567890"},
    "memory": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"]}
  }
}"#;

const ZED: &str = r#"// Zed settings
{
  "theme": "One Dark",
  "context_servers": {
    "everything": {
      "source": "custom",
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-everything"],
      "env": {},
    },
    "old-style": {"command": {"path": "mcp-old", "args": ["--stdio"], "env": {"A": "b"}}},
    "from-extension": {"source": "extension", "settings": {}},
  },
}"#;

fn fixture_home(home: &Path, workspace: &Path) {
    put(
        home,
        ".config/Claude/claude_desktop_config.json",
        CLAUDE_DESKTOP,
    );
    put(home, ".claude.json", CLAUDE_CODE);
    put(home, ".cursor/mcp.json", CURSOR);
    put(home, ".config/Code/User/mcp.json", VSCODE_USER);
    put(
        workspace,
        ".vscode/settings.json",
        VSCODE_WORKSPACE_SETTINGS,
    );
    put(home, ".codeium/windsurf/mcp_config.json", WINDSURF);
    put(home, ".config/zed/settings.json", ZED);
    // macOS's place for Claude Desktop, same format.
    put(
        home,
        "Library/Application Support/Claude/claude_desktop_config.json",
        r#"{"mcpServers": {"mac-only": {"command": "mac-server"}}}"#,
    );
}

#[test]
fn every_client_is_read_and_every_server_kept_once() {
    let dir = tempfile::tempdir().unwrap();
    let (home, workspace) = (dir.path().join("home"), dir.path().join("work"));
    fixture_home(&home, &workspace);
    let scan = scan(&Client::ALL, &home, Some(&workspace));
    assert_eq!(scan.files.len(), 8, "{:?}", scan.files);
    let upstreams = merge::merge(scan.found.clone());
    let names: Vec<&str> = upstreams.iter().map(|u| u.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "filesystem",
            "github-server",
            "mac-only",
            "linear",
            "api",
            "fetch",
            "files",
            "brave",
            "memory",
            "git",
            "remote",
            "everything",
            "old-style",
        ]
    );
    let by_name = |name: &str| upstreams.iter().find(|u| u.name == name).unwrap();
    // The same command in Claude Desktop and in a Claude Code project: one upstream.
    let filesystem = by_name("filesystem");
    assert_eq!(filesystem.sources.len(), 2);
    assert_eq!(by_name("memory").sources.len(), 2, "VS Code and Windsurf");
    // Placeholders: the client's environment variables stay ones; paths are filled in.
    let Spec::Remote {
        headers, transport, ..
    } = &by_name("api").spec
    else {
        panic!()
    };
    assert_eq!(headers["Authorization"], "Bearer ${env:API_TOKEN}");
    assert_eq!(*transport, Some("streamable_http"));
    let Spec::Stdio { args, .. } = &by_name("files").spec else {
        panic!()
    };
    assert_eq!(args[2], format!("{}/notes", home.display()));
    let Spec::Stdio { args, .. } = &by_name("git").spec else {
        panic!()
    };
    assert_eq!(args[2], workspace.display().to_string());
    let brave = by_name("brave");
    let Spec::Stdio { env, .. } = &brave.spec else {
        panic!()
    };
    assert_eq!(env["BRAVE_API_KEY"], "${env:BRAVE_KEY}");
    assert!(
        brave.notes.iter().any(|n| n.contains("BRAVE_KEY")),
        "{:?}",
        brave.notes
    );
    let Spec::Stdio {
        command, args, env, ..
    } = &by_name("old-style").spec
    else {
        panic!()
    };
    assert_eq!(
        (command.as_str(), args.as_slice()),
        ("mcp-old", ["--stdio".to_owned()].as_slice())
    );
    assert_eq!(env["A"], "b");
    // Left out, and said so.
    for expected in [
        "`old` left out: disabled",
        "`from-extension` left out: provided by a Zed extension",
    ] {
        assert!(
            scan.problems.iter().any(|p| p.contains(expected)),
            "{expected}: {:?}",
            scan.problems
        );
    }
}

#[test]
fn secrets_are_masked_in_what_is_shown() {
    let dir = tempfile::tempdir().unwrap();
    let (home, workspace) = (dir.path().join("home"), dir.path().join("work"));
    fixture_home(&home, &workspace);
    let upstreams = merge::merge(scan(&Client::ALL, &home, None).found);
    let shown: Vec<String> = upstreams.iter().map(|u| u.spec.describe()).collect();
    let all = shown.join("\n");
    assert!(!all.contains("ghp_abcdefghijklmnop"), "{all}");
    assert!(all.contains("GITHUB_PERSONAL_ACCESS_TOKEN=ghp…"), "{all}");
    assert!(!all.contains("sk-1234567890"), "{all}");
    assert!(all.contains("api_key=sk-…"), "{all}");
    assert!(
        all.contains("[Authorization: Bearer ${env:API_TOKEN}]"),
        "{all}"
    );
    assert_eq!(
        super::servers::shown_args(&[
            "--api-key".into(),
            "abcdefgh".into(),
            "--token=secret123".into(),
            "plain".into()
        ]),
        "--api-key abc… --token=sec… plain"
    );
}

#[test]
fn the_written_configuration_loads_with_every_server() {
    let dir = tempfile::tempdir().unwrap();
    let (home, workspace) = (dir.path().join("home"), dir.path().join("work"));
    fixture_home(&home, &workspace);
    let upstreams = merge::merge(scan(&Client::ALL, &home, Some(&workspace)).found);
    let text = write::render(&upstreams, &home);
    write::verify(&upstreams, &text).unwrap();
    assert!(text.contains("# From Claude Desktop (~/.config/Claude/claude_desktop_config.json) as `GitHub Server`."), "{text}");
    let config = crate::config::parse_str(&dir.path().join("imported.toml"), &text, &Set)
        .unwrap_or_else(|error| panic!("{error}\n{text}"));
    assert_eq!(config.upstreams.len(), upstreams.len());
}

#[test]
fn a_literal_dollar_brace_of_a_client_that_expands_nothing_stays_literal() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    put(
        home,
        ".config/Claude/claude_desktop_config.json",
        r#"{"mcpServers": {"x": {"command": "run", "args": ["${HOME}/a"]}}}"#,
    );
    let found = scan(&[Client::ClaudeDesktop], home, None).found;
    let Spec::Stdio { args, .. } = &found[0].spec else {
        panic!()
    };
    assert_eq!(args[0], "$${HOME}/a");
}

#[test]
fn connect_and_undo_round_trip_the_file_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let (home, workspace) = (dir.path().join("home"), dir.path().join("work"));
    fixture_home(&home, &workspace);
    let url = "http://127.0.0.1:8080/mcp";
    for client in Client::ALL {
        let files: Vec<_> = client
            .locations(&home, None)
            .into_iter()
            .filter(|l| l.path.is_file())
            .map(|l| l.path)
            .collect();
        let before: Vec<Vec<u8>> = files.iter().map(|f| std::fs::read(f).unwrap()).collect();
        let connected = connect::connect(client, &home, url).unwrap();
        assert_eq!(connected, files);
        // The client now has the gateway alone.
        let left = merge::merge(scan(&[client], &home, None).found);
        assert_eq!(left.len(), 1, "{client:?}: {left:?}");
        let describe = left[0].spec.describe();
        assert!(describe.contains(url), "{client:?}: {describe}");
        // Its other settings stay.
        if client == Client::Zed {
            let text = std::fs::read_to_string(&files[0]).unwrap();
            assert!(text.contains("One Dark"), "{text}");
        }
        let again = connect::connect(client, &home, url)
            .unwrap_err()
            .to_string();
        assert!(again.contains("connected already"), "{again}");
        assert_eq!(connect::undo(client, &home).unwrap(), files);
        let after: Vec<Vec<u8>> = files.iter().map(|f| std::fs::read(f).unwrap()).collect();
        assert_eq!(before, after, "{client:?}");
        assert!(files.iter().all(|f| !connect::backup_of(f).exists()));
    }
    let missing = connect::undo(Client::Cursor, &home)
        .unwrap_err()
        .to_string();
    assert!(missing.contains("no backup"), "{missing}");
}

/// The environment variables the fixtures' servers use, set.
struct Set;

impl crate::config::Vars for Set {
    fn env(&self, name: &str) -> Option<String> {
        ["API_TOKEN", "BRAVE_KEY"]
            .contains(&name)
            .then(|| "set".to_owned())
    }

    fn self_exe(&self) -> Option<String> {
        None
    }
}

/// A project's `.mcp.json` whose server name closes the comment it is written in and opens
/// tables of its own: an admin listener on every address with a known token, and commands
/// allowed. The written file holds the one server, its name kept in the comment as text.
#[test]
fn a_name_with_newlines_cannot_write_configuration() {
    let name =
        "docs\n\n[admin]\nlisten = \"0.0.0.0:9999\"\ntoken = \"known\"\nallow_commands = true\n#";
    let file = json!({"mcpServers": {
        name: {"command": "npx", "args": ["-y", "docs-server"],
               "env": {"KEY\n[x]": "v\"\n[y]\nz = 1"}},
        "remote\r\n[server]": {"type": "http", "url": "https://example.com/mcp\n[z]",
                               "headers": {"x-note": "c\u{85}d\u{2028}e"}}
    }});
    let dir = tempfile::tempdir().unwrap();
    let text = configuration_of(
        Client::ClaudeCode,
        &dir.path().join("project/.mcp.json"),
        file.to_string().as_bytes(),
        dir.path(),
    )
    .unwrap()
    .unwrap();
    let document: toml::Table = toml::from_str(&text).unwrap();
    assert_eq!(document.keys().collect::<Vec<_>>(), ["upstreams"], "{text}");
    let upstreams = document["upstreams"].as_table().unwrap();
    assert_eq!(upstreams.len(), 2, "{text}");
    assert!(!text.contains("\n[admin]"), "{text}");
    assert!(text.contains(r"as `docs\n\n[admin]"), "{text}");
    let config = crate::config::parse_str(&dir.path().join("imported.toml"), &text, &Set)
        .unwrap_or_else(|error| panic!("{error}\n{text}"));
    assert!(config.admin.token.is_none() && !config.admin.allow_commands);
}

/// Text with what TOML, JSON and terminals treat specially well represented.
fn any_text() -> impl Strategy<Value = String> {
    let special = prop::sample::select(vec![
        '\n', '\r', '\t', '\0', '\u{1b}', '\u{7f}', '\u{85}', '\u{2028}', '\u{202e}', '"', '\'',
        '\\', '#', '[', ']', '{', '}', '=', '.', ',', '$', ' ', ':',
    ]);
    let any = prop::char::any();
    prop::collection::vec(
        prop_oneof![2 => special, 1 => any, 2 => prop::char::range('a', 'z')],
        0..24,
    )
    .prop_map(|chars| chars.into_iter().collect())
}

fn any_map() -> impl Strategy<Value = Value> {
    prop::collection::btree_map(any_text(), any_text(), 0..3)
        .prop_map(|map| Value::Object(map.into_iter().map(|(k, v)| (k, v.into())).collect()))
}

/// A server entry of any client: a command or a URL, every field any text.
fn any_entry() -> impl Strategy<Value = Value> {
    let stdio = (
        any_text(),
        prop::collection::vec(any_text(), 0..3),
        any_map(),
        prop::option::of(any_text()),
    )
        .prop_map(|(command, args, env, cwd)| {
            let mut entry = json!({"command": command, "args": args, "env": env});
            if let Some(cwd) = cwd {
                entry["cwd"] = cwd.into();
            }
            entry
        });
    let remote = (
        any_text(),
        prop::option::of(any_text()),
        any_map(),
        any::<bool>(),
    )
        .prop_map(|(url, kind, headers, named_sse)| {
            let kind = if named_sse {
                Some("sse".to_owned())
            } else {
                kind
            };
            json!({"url": url, "type": kind, "headers": headers})
        });
    prop_oneof![stdio, remote]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Whatever a client's file holds, in names and every field, the written configuration
    /// reads back as exactly the upstreams imported and nothing else.
    #[test]
    fn any_text_in_any_field_writes_exactly_the_upstreams_found(
        servers in prop::collection::vec((any_text(), any_entry()), 1..4),
        client in prop::sample::select(Client::ALL.to_vec()),
    ) {
        let servers: Map<String, Value> = servers.into_iter().collect();
        let key = match client {
            Client::Vscode => "servers",
            Client::Zed => "context_servers",
            _ => "mcpServers",
        };
        let file = json!({key: servers});
        let dir = std::path::Path::new("/nonexistent/home");
        let path = dir.join("project/mcp.json");
        let written = configuration_of(client, &path, file.to_string().as_bytes(), dir);
        let Some(text) = written.map_err(TestCaseError::fail)? else {
            return Ok(());
        };
        let document: toml::Table = toml::from_str(&text).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(document.keys().collect::<Vec<_>>(), ["upstreams"]);
    }
}
