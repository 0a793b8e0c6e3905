//! The `mcpServers` JSON file that MCP clients use (Claude Desktop, Cursor, VS Code's `servers`),
//! read into the same raw form as Switchyard's TOML so that one validator checks both.
//!
//! The file belongs to a client, so its other top-level settings are none of Switchyard's
//! business and are ignored. In a server entry, keys that other clients define for their own
//! use (`autoApprove`, `alwaysAllow`, `timeout`, `description`) are accepted and ignored so an
//! existing file loads as it is; `disabled: true` leaves a server out. Any other unknown key in
//! a server entry is a problem, as in TOML: it might change how the server runs.
//!
//! LangChain's `MultiServerMCPClient` files are read here too (`langchain` maps their keys):
//! the JavaScript adapter's `mcpServers` with its own keys, and the Python adapter's bare map
//! of connections.

use serde::Deserialize;
use serde_json::Value;

use super::{
    Problem,
    keys::Entries,
    langchain::{self, FileKeys, ServerKeys},
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
    // LangChain.js's own settings.
    #[serde(rename = "prefixToolNameWithServerName")]
    prefix_tool_name_with_server_name: Option<bool>,
    #[serde(rename = "additionalToolNamePrefix")]
    additional_tool_name_prefix: Option<String>,
    #[serde(rename = "defaultToolTimeout")]
    default_tool_timeout: Option<f64>,
    #[serde(rename = "outputHandling")]
    output_handling: Option<Value>,
    /// How the client itself handles tools and their content: nothing of Switchyard's.
    #[serde(rename = "throwOnLoadError")]
    _throw_on_load_error: Option<Value>,
    #[serde(rename = "useStandardContentBlocks")]
    _use_standard_content_blocks: Option<Value>,
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
    // LangChain's (`langchain::ServerKeys`).
    transport: Option<String>,
    restart: Option<langchain::Retry>,
    reconnect: Option<langchain::Retry>,
    #[serde(rename = "automaticSSEFallback")]
    automatic_sse_fallback: Option<bool>,
    default_tool_timeout: Option<f64>,
    output_handling: Option<Value>,
    encoding: Option<String>,
    #[serde(rename = "sse_read_timeout")]
    sse_read_timeout: Option<f64>,
    #[serde(rename = "stderr")]
    _stderr: Option<Value>,
    #[serde(rename = "encoding_error_handler")]
    _encoding_error_handler: Option<Value>,
    #[serde(rename = "terminate_on_close")]
    _terminate_on_close: Option<Value>,
    #[serde(rename = "session_kwargs")]
    session_kwargs: Option<Value>,
    #[serde(rename = "httpx_client_factory")]
    httpx_client_factory: Option<Value>,
    auth: Option<Value>,
    auth_provider: Option<Value>,
}

/// Parses an `mcpServers` JSON document (or LangChain's bare map of connections).
pub fn parse(text: &str) -> Result<Parsed, Vec<Problem>> {
    if serde_json::from_str::<Value>(text).is_ok_and(|doc| langchain::is_bare_connections(&doc)) {
        return parse_bare(text);
    }
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

    let wide = langchain::file_wide(
        FileKeys {
            prefix_tool_name_with_server_name: file.prefix_tool_name_with_server_name,
            additional_tool_name_prefix: file.additional_tool_name_prefix,
            default_tool_timeout: file.default_tool_timeout,
            output_handling: file.output_handling,
        },
        &mut problems,
    );
    let mut raw = RawConfig {
        upstreams: upstreams_of(servers, upstreams_key, &mut problems),
        ..RawConfig::default()
    };
    raw.catalog.prefix_mode = wide.prefix_mode;
    raw.upstream_defaults.default_tool_timeout_seconds = wide.default_tool_timeout_seconds;
    if let Some(inline) = wide.inline_resources {
        for (_, upstream) in &mut raw.upstreams.items {
            upstream.inline_resources.get_or_insert(inline);
        }
    }
    Ok(Parsed {
        raw,
        upstreams_key,
        problems,
    })
}

/// Parses LangChain's (Python) bare map of connections: servers at the top.
fn parse_bare(text: &str) -> Result<Parsed, Vec<Problem>> {
    let mut de = serde_json::Deserializer::from_str(text);
    let (servers, mut problems): (Entries<McpJsonServer>, _) = deserialize_collecting(&mut de)
        .map_err(|problems| {
            problems
                .into_iter()
                .map(locate_json_error)
                .collect::<Vec<_>>()
        })?;
    let upstreams = upstreams_of(servers, "", &mut problems);
    Ok(Parsed {
        raw: RawConfig {
            upstreams,
            ..RawConfig::default()
        },
        upstreams_key: "",
        problems,
    })
}

fn upstreams_of(
    servers: Entries<McpJsonServer>,
    base: &str,
    problems: &mut Vec<Problem>,
) -> Entries<RawUpstream> {
    let mut upstreams = Entries {
        items: Vec::with_capacity(servers.items.len()),
        duplicates: servers.duplicates,
    };
    for (name, server) in servers.items {
        let key = super::keys::key_under(base, &name);
        upstreams.items.push((name, to_raw(server, &key, problems)));
    }
    upstreams
}

/// Maps one server entry (at `key`) onto the TOML form; its `type` becomes our `transport`.
fn to_raw(server: McpJsonServer, key: &str, problems: &mut Vec<Problem>) -> RawUpstream {
    let (transport_key, kind) = match (server.kind, server.transport_type) {
        (None, Some(kind)) => ("transportType", Some(kind)),
        (kind, _) => ("type", kind),
    };
    let langchain = ServerKeys {
        transport: server.transport,
        restart: server.restart,
        reconnect: server.reconnect,
        automatic_sse_fallback: server.automatic_sse_fallback,
        default_tool_timeout: server.default_tool_timeout,
        output_handling: server.output_handling,
        encoding: server.encoding,
        sse_read_timeout: server.sse_read_timeout,
        session_kwargs: server.session_kwargs,
        httpx_client_factory: server.httpx_client_factory,
        auth: server.auth,
        auth_provider: server.auth_provider,
    };
    // Without a type, a URL may be either HTTP transport: `auto` finds out. (LangChain's
    // meaning of `http` is `langchain::server`'s to give.)
    let transport = kind.clone().map(|kind| match kind.as_str() {
        "http" | "streamable-http" | "streamableHttp" => "streamable_http".to_owned(),
        _ => kind,
    });
    let mut raw = RawUpstream {
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
    };
    langchain::server(langchain, kind.as_deref(), &mut raw, key, problems);
    raw
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
