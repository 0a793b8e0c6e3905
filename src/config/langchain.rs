//! LangChain's `MultiServerMCPClient` configuration, read as a file of servers: the JavaScript
//! adapter's `{mcpServers: {…}, prefixToolNameWithServerName, additionalToolNamePrefix,
//! defaultToolTimeout, outputHandling, …}` and the Python adapter's bare map of connections
//! (`{"math": {"transport": "stdio", …}}`). Its keys are mapped onto Switchyard's here, each
//! onto the one that does the same; a key whose meaning Switchyard cannot give is a problem
//! that names it and says why, so that a file never loads meaning something else.

use serde::Deserialize;
use serde_json::Value;

use super::{
    Problem,
    upstream::{RawRestart, RawUpstream},
};

/// `restart` (stdio) or `reconnect` (HTTP): `{enabled, maxAttempts, delayMs}`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Retry {
    enabled: Option<bool>,
    max_attempts: Option<u32>,
    delay_ms: Option<u64>,
}

/// A server entry's LangChain keys (read by `mcp_json` with the rest of the entry; those
/// that change nothing at a gateway are read and dropped there).
#[derive(Debug, Default)]
pub struct ServerKeys {
    pub transport: Option<String>,
    pub restart: Option<Retry>,
    pub reconnect: Option<Retry>,
    pub automatic_sse_fallback: Option<bool>,
    /// Milliseconds.
    pub default_tool_timeout: Option<f64>,
    pub output_handling: Option<Value>,
    pub encoding: Option<String>,
    /// Python's seconds to wait for an event on an open stream.
    pub sse_read_timeout: Option<f64>,
    /// Code objects of the client, which a file cannot hold in any form Switchyard could use.
    pub session_kwargs: Option<Value>,
    pub httpx_client_factory: Option<Value>,
    pub auth: Option<Value>,
    pub auth_provider: Option<Value>,
}

/// The file's own LangChain keys, beside `mcpServers`.
#[derive(Debug, Default)]
pub struct FileKeys {
    pub prefix_tool_name_with_server_name: Option<bool>,
    pub additional_tool_name_prefix: Option<String>,
    /// Milliseconds.
    pub default_tool_timeout: Option<f64>,
    pub output_handling: Option<Value>,
}

/// What the file-wide keys set: the catalog's `prefix_mode`, the upstreams' default tool
/// timeout, and whether tool results' resources are inlined by default.
#[derive(Debug, Default)]
pub struct FileWide {
    pub prefix_mode: Option<String>,
    pub default_tool_timeout_seconds: Option<f64>,
    pub inline_resources: Option<bool>,
}

/// Maps the file-wide keys; problems go to `problems`.
pub fn file_wide(keys: FileKeys, problems: &mut Vec<Problem>) -> FileWide {
    if let Some(prefix) = keys.additional_tool_name_prefix.filter(|p| !p.is_empty()) {
        problems.push(Problem {
            key: "additionalToolNamePrefix".into(),
            message: format!(
                "Switchyard names tools `SERVER__TOOL` (or as `[catalog] prefix_mode` says) and \
                 has no prefix before that; remove `{prefix}`, or keep the file for the client"
            ),
        });
    }
    FileWide {
        prefix_mode: (keys.prefix_tool_name_with_server_name)
            .map(|prefix| if prefix { "always" } else { "never" }.to_owned()),
        default_tool_timeout_seconds: timeout(
            keys.default_tool_timeout,
            "defaultToolTimeout",
            problems,
        ),
        inline_resources: keys
            .output_handling
            .and_then(|handling| inlining(&handling, "outputHandling", problems)),
    }
}

/// Maps a server entry's keys onto `raw` (`key` is its key path, for problems). `kind` is the
/// entry's `type`, which `transport` must agree with.
pub fn server(
    keys: ServerKeys,
    kind: Option<&str>,
    raw: &mut RawUpstream,
    key: &str,
    problems: &mut Vec<Problem>,
) {
    let mut problem = |sub: &str, message: String| {
        problems.push(Problem {
            key: format!("{key}.{sub}"),
            message,
        })
    };
    for (name, given) in [
        ("session_kwargs", &keys.session_kwargs),
        ("httpx_client_factory", &keys.httpx_client_factory),
        ("auth", &keys.auth),
        ("authProvider", &keys.auth_provider),
    ] {
        if given.is_some() {
            problem(
                name,
                "is the client's own code, which a gateway cannot run; for OAuth, set `oauth` \
                 in Switchyard's configuration (it authorizes upstreams itself)"
                    .into(),
            );
        }
    }
    if let Some(encoding) = keys.encoding.as_deref()
        && !matches!(encoding.to_ascii_lowercase().as_str(), "utf-8" | "utf8")
    {
        problem(
            "encoding",
            format!("MCP messages are UTF-8; `{encoding}` cannot be read"),
        );
    }
    let transport = keys.transport.as_deref();
    if let (Some(transport), Some(kind)) = (transport, kind)
        && transport != kind
    {
        problem(
            "transport",
            format!("says `{transport}` but `type` says `{kind}`; keep one"),
        );
    }
    let fallback = keys.automatic_sse_fallback;
    // An entry with LangChain's transport keys means its transport as LangChain does (an
    // entry without them, its `type` as the clients do, already in `raw`).
    if transport.is_some() || fallback.is_some() {
        raw.transport = match (transport.or(kind), fallback) {
            // LangChain.js falls back to SSE unless told not to: that is `auto`.
            (Some("http"), Some(true) | None) | (Some("streamable_http"), Some(true)) => {
                Some("auto".into())
            }
            (Some("http" | "streamable_http"), Some(false)) => Some("streamable_http".into()),
            (None, Some(false)) if raw.url.is_some() => Some("streamable_http".into()),
            (other, _) => other.map(str::to_owned),
        };
    }
    if transport.is_some() {
        raw.transport_key = Some("transport");
    }
    let stdio = raw.command.is_some() || raw.transport.as_deref() == Some("stdio");
    for (name, retry, fits) in [
        ("restart", keys.restart, stdio),
        ("reconnect", keys.reconnect, !stdio),
    ] {
        let Some(retry) = retry else { continue };
        if !fits {
            let other = if stdio { "restart" } else { "reconnect" };
            problem(
                name,
                format!("is for the other transport; this server's is `{other}`"),
            );
            continue;
        }
        raw.restart = Some(restart(retry));
    }
    if let Some(seconds) = timeout(
        keys.default_tool_timeout,
        &format!("{key}.defaultToolTimeout"),
        problems,
    ) {
        raw.default_tool_timeout_seconds = Some(seconds);
    }
    if let Some(seconds) = keys.sse_read_timeout {
        raw.stream_idle_timeout_seconds = Some(seconds);
    }
    if let Some(handling) = keys.output_handling {
        raw.inline_resources = inlining(&handling, &format!("{key}.outputHandling"), problems);
    }
}

/// LangChain retries at a fixed delay: Switchyard's backoff from `delayMs` to `delayMs`. Not
/// enabled: the first failure is the last.
fn restart(retry: Retry) -> RawRestart {
    let max_attempts = match retry.enabled {
        Some(false) => Some(1),
        _ => retry.max_attempts,
    };
    RawRestart {
        max_attempts,
        delay_ms: retry.delay_ms,
        max_delay_ms: retry.delay_ms,
    }
}

/// Milliseconds, as LangChain gives them, in seconds.
fn timeout(millis: Option<f64>, key: &str, problems: &mut Vec<Problem>) -> Option<f64> {
    let millis = millis?;
    if !(millis.is_finite() && millis > 0.0) {
        problems.push(Problem {
            key: key.into(),
            message: format!("must be a number of milliseconds above 0, not {millis}"),
        });
        return None;
    }
    Some(millis / 1000.0)
}

/// `outputHandling`: `"content"`, `"artifact"`, or `{text, image, audio, resource: …}`. Only
/// where resources go has a meaning at a gateway: `content` has links and URI-only resources
/// of tool results read and inlined, for clients that cannot follow them; `artifact` leaves
/// them as they are. Every block reaches the client either way, so sending text, images or
/// audio anywhere but `content` cannot be done.
fn inlining(handling: &Value, key: &str, problems: &mut Vec<Problem>) -> Option<bool> {
    let mut problem = |key: String, message: &str| {
        problems.push(Problem {
            key,
            message: message.into(),
        });
        None
    };
    let place = |value: &Value| match value.as_str() {
        Some("content") => Some(true),
        Some("artifact") => Some(false),
        _ => None,
    };
    let not_content = "Switchyard hands every text, image and audio block to the client as \
                       content; only `resource` can be `artifact` (left as it is) or `content` \
                       (read and inlined)";
    let wrong = "must be `content` or `artifact`";
    match handling {
        Value::String(_) => match place(handling) {
            Some(true) => Some(true),
            Some(false) => problem(key.into(), not_content),
            None => problem(key.into(), wrong),
        },
        Value::Object(kinds) => {
            let mut inline = None;
            for (kind, value) in kinds {
                let sub = format!("{key}.{kind}");
                match (kind.as_str(), place(value)) {
                    (_, None) => return problem(sub, wrong),
                    ("resource", found) => inline = found,
                    ("text" | "image" | "audio", Some(true)) => {}
                    ("text" | "image" | "audio", Some(false)) => return problem(sub, not_content),
                    _ => {
                        return problem(
                            sub,
                            "is not a kind of content (`text`, `image`, `audio`, `resource`)",
                        );
                    }
                }
            }
            inline
        }
        _ => problem(
            key.into(),
            "must be `content`, `artifact` or an object of them by kind",
        ),
    }
}

/// Whether `document` is a Python-style bare map of connections: no `mcpServers` or `servers`,
/// and every value an object that names its `transport`.
pub fn is_bare_connections(document: &Value) -> bool {
    let Some(top) = document.as_object() else {
        return false;
    };
    !top.is_empty()
        && !top.contains_key("mcpServers")
        && !top.contains_key("servers")
        && top
            .values()
            .all(|entry| entry.get("transport").is_some_and(Value::is_string))
}
