//! The `mcpServers` JSON file that MCP clients use (Claude Desktop, Cursor, VS Code's `servers`),
//! read into the same raw form as Switchyard's TOML so that one validator checks both.
//!
//! The file belongs to a client, so its other top-level settings are none of Switchyard's
//! business and are ignored. In a server entry, keys that other clients define for their own
//! use (`autoApprove`, `alwaysAllow`, `timeout`, `description`) are accepted and ignored so an
//! existing file loads as it is; `disabled: true` leaves a server out. Any other unknown key in
//! a server entry is a problem, as in TOML: it might change how the server runs.

use serde::Deserialize;
use serde_json::Value;

use super::{
    Problem,
    keys::Entries,
    parse::{Parsed, deserialize_collecting},
    raw::RawConfig,
    upstream::RawUpstream,
};

#[derive(Deserialize)]
struct McpJsonFile {
    #[serde(rename = "mcpServers")]
    mcp_servers: Option<Entries<McpJsonServer>>,
    /// VS Code's spelling of the same object.
    servers: Option<Entries<McpJsonServer>>,
    /// VS Code's interactive inputs; `${input:…}` placeholders are reported where used.
    #[serde(rename = "inputs")]
    _inputs: Option<Value>,
    #[serde(rename = "$schema")]
    _schema: Option<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct McpJsonServer {
    #[serde(rename = "type")]
    kind: Option<String>,
    /// Cline's spelling of `type`.
    transport_type: Option<String>,
    command: Option<String>,
    args: Option<Vec<String>>,
    env: Option<Entries<String>>,
    cwd: Option<String>,
    url: Option<String>,
    headers: Option<Entries<String>>,
    disabled: Option<bool>,
    // Used by other clients, meaningless to a gateway.
    #[serde(rename = "autoApprove")]
    _auto_approve: Option<Value>,
    #[serde(rename = "alwaysAllow")]
    _always_allow: Option<Value>,
    #[serde(rename = "timeout")]
    _timeout: Option<Value>,
    #[serde(rename = "description")]
    _description: Option<Value>,
}

/// Parses an `mcpServers` JSON document.
pub fn parse(text: &str) -> Result<Parsed, Vec<Problem>> {
    let mut de = serde_json::Deserializer::from_str(text);
    let (file, mut problems): (McpJsonFile, _) =
        deserialize_collecting(&mut de).map_err(|problems| {
            problems
                .into_iter()
                .map(locate_json_error)
                .collect::<Vec<_>>()
        })?;
    // The client's own settings beside its servers.
    problems.retain(|problem| problem.message != "unknown key" || problem.key.contains('.'));
    de.end().map_err(|e| {
        vec![locate_json_error(Problem {
            key: String::new(),
            message: format!("syntax error: {e}"),
        })]
    })?;

    let (upstreams_key, servers) = match (file.mcp_servers, file.servers) {
        (Some(servers), None) => ("mcpServers", servers),
        (None, Some(servers)) => ("servers", servers),
        (Some(servers), Some(_)) => {
            problems.push(Problem {
                key: "servers".into(),
                message: "both `mcpServers` and `servers` are present; keep one".into(),
            });
            ("mcpServers", servers)
        }
        (None, None) => {
            problems.push(Problem {
                key: String::new(),
                message: "no `mcpServers` object: this does not look like an MCP client \
                          configuration"
                    .into(),
            });
            ("mcpServers", Entries::default())
        }
    };

    let mut upstreams = Entries {
        items: Vec::with_capacity(servers.items.len()),
        duplicates: servers.duplicates,
    };
    for (name, server) in servers.items {
        upstreams.items.push((name, to_raw(server)));
    }
    Ok(Parsed {
        raw: RawConfig {
            upstreams,
            ..RawConfig::default()
        },
        upstreams_key,
        problems,
    })
}

/// Maps one server entry onto the TOML form; its `type` becomes our `transport`.
fn to_raw(server: McpJsonServer) -> RawUpstream {
    let (transport_key, kind) = match (server.kind, server.transport_type) {
        (None, Some(kind)) => ("transportType", Some(kind)),
        (kind, _) => ("type", kind),
    };
    // Without a type, a URL may be either HTTP transport: `auto` finds out.
    let transport = kind.map(|kind| match kind.as_str() {
        "http" | "streamable-http" | "streamableHttp" => "streamable_http".to_owned(),
        _ => kind,
    });
    RawUpstream {
        transport,
        transport_key: Some(transport_key),
        enabled: server.disabled.map(|disabled| !disabled),
        command: server.command,
        args: server.args,
        env: server.env,
        cwd: server.cwd,
        url: server.url,
        headers: server.headers,
        ..RawUpstream::default()
    }
}

/// serde_json puts the position of an error in its text (`… at line 3 column 22`); move it into
/// the key so that every problem reads the same way.
fn locate_json_error(mut problem: Problem) -> Problem {
    if let Some((message, position)) = problem.message.rsplit_once(" at line ")
        && let Some((line, column)) = position.split_once(" column ")
    {
        let location = format!("line {line}, column {column}");
        problem.key = if problem.key.is_empty() {
            location
        } else {
            format!("{} ({location})", problem.key)
        };
        problem.message = message.to_owned();
    }
    problem
}
