//! Setting a target up before any load: the session handshake and its end (DELETE), the
//! setup queries (`tools/list` to resolve the tool's name per target, `resources/list` for a
//! resource to read), and the errors that stop a run when a target is not a working MCP server.

use std::{
    fmt::Write as _,
    sync::{Arc, OnceLock},
    time::Duration,
};

use bytes::Bytes;
use http::HeaderValue;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{
    BenchError,
    args::{Era, Plan, TargetSpec},
    check::{ErrorKind, Expect, Failure, check},
    load::Target,
    mcp::{CLIENT_NAME, Context, SESSION_VERSION, Template},
    procfs,
    progress::Progress,
    wire::{Conn, Endpoint, describe, send},
};

/// Pages of `tools/list` or `resources/list` read at most while resolving.
const MAX_PAGES: usize = 100;

/// Sets a target up: resolves its URL, checks its process, and (with a session, in the session
/// era) finds the tool to call and the resource to read. A target that is not a working MCP
/// server fails here, quoted.
pub async fn prepare(
    plan: &Plan,
    spec: &TargetSpec,
    progress: &Progress,
) -> Result<Target, BenchError> {
    let endpoint = Arc::new(Endpoint::resolve(&spec.url, &plan.headers).await?);
    if let Some(pid) = spec.pid {
        procfs::check_pid(pid)?;
    }
    let url = endpoint.url.clone();
    let mut conn = None;
    let context = match plan.era {
        Era::Session => open_session(&mut conn, &endpoint, plan.timeout)
            .await
            .map_err(|f| setup_error(&url, "initialize", f, plan.timeout))?,
        Era::Stateless => Context::stateless(),
    };
    let found = if plan.soak {
        Ok((plan.tool.clone(), None))
    } else {
        find_tool_and_resource(plan, &endpoint, &context, &mut conn).await
    };
    // The setup session is not part of the load.
    let _ = close_session(&mut conn, &endpoint, &context, plan.timeout).await;
    let (tool, resource) = found?;
    progress.note(&format!("{}: {url}: calling `{tool}`", spec.label));
    Ok(Target {
        label: spec.label.clone(),
        endpoint,
        tool,
        resource,
        pid: spec.pid,
    })
}

async fn find_tool_and_resource(
    plan: &Plan,
    endpoint: &Endpoint,
    context: &Context,
    conn: &mut Option<Conn>,
) -> Result<(String, Option<String>), BenchError> {
    let url = &endpoint.url;
    // Listed whatever the mix: in the stateless era this is the first request the target gets,
    // so a target that is not an MCP server fails here, quoted, and not during the load.
    let names = list_all(conn, endpoint, context, "tools/list", "name", plan.timeout)
        .await
        .map_err(|f| setup_error(url, "tools/list", f, plan.timeout))?;
    let tool = if plan.mix.call > 0 {
        resolve_tool(&names, &plan.tool).map_err(|reason| BenchError::Tool {
            url: url.clone(),
            reason,
        })?
    } else {
        plan.tool.clone()
    };
    let resource = if plan.mix.read > 0 {
        let listed = list_all(
            conn,
            endpoint,
            context,
            "resources/list",
            "uri",
            plan.timeout,
        )
        .await;
        let resource = match (&plan.resource, listed) {
            (Some(wanted), Ok(uris)) => resolve_resource(&uris, wanted),
            // A server may serve reads without listing anything.
            (Some(wanted), Err(_)) => Some(wanted.clone()),
            (None, Ok(uris)) => uris.into_iter().next(),
            (None, Err(failure)) => {
                return Err(setup_error(url, "resources/list", failure, plan.timeout));
            }
        };
        Some(resource.ok_or_else(|| BenchError::NoResource { url: url.clone() })?)
    } else {
        None
    };
    Ok((tool, resource))
}

/// A failed setup request as the error that stops the run.
pub fn setup_error(
    url: &str,
    step: &'static str,
    failure: Failure,
    timeout: Duration,
) -> BenchError {
    match failure.kind {
        ErrorKind::Timeout => BenchError::Timeout {
            url: url.to_owned(),
            step,
            timeout_ms: timeout.as_millis() as u64,
        },
        ErrorKind::Connection => BenchError::Connect {
            url: url.to_owned(),
            reason: failure.detail,
        },
        _ => BenchError::Setup {
            url: url.to_owned(),
            step,
            detail: failure.detail,
        },
    }
}

/// One setup request: sends `template` as id `id` and checks the answer; the result's JSON.
pub async fn request(
    conn: &mut Option<Conn>,
    endpoint: &Endpoint,
    template: &Template,
    id: u64,
    expect: Expect<'_>,
    timeout: Duration,
) -> Result<String, Failure> {
    let id = id.to_string();
    let reply = send(
        conn,
        endpoint,
        &template.headers,
        Some(template.body(&id)),
        Some(&id),
        timeout,
    )
    .await?;
    check(&reply, &id, expect).map(|result| result.get().to_owned())
}

// === Sessions ===

/// `initialize` and `notifications/initialized`: a session-era client context.
pub async fn open_session(
    conn: &mut Option<Conn>,
    endpoint: &Endpoint,
    timeout: Duration,
) -> Result<Context, Failure> {
    let context = initialize(conn, endpoint, timeout).await?;
    let body = Bytes::from_static(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    let reply = send(
        conn,
        endpoint,
        &context.headers(),
        Some(body),
        None,
        timeout,
    )
    .await?;
    if !reply.status.is_success() {
        return Err(Failure::new(
            ErrorKind::HttpStatus(reply.status.as_u16()),
            format!("notifications/initialized: {}", describe(&reply)),
        ));
    }
    Ok(context)
}

/// `initialize` (id 0): the version the server chose and the session id it gave, if any.
async fn initialize(
    conn: &mut Option<Conn>,
    endpoint: &Endpoint,
    timeout: Duration,
) -> Result<Context, Failure> {
    #[derive(Deserialize)]
    struct Initialized {
        #[serde(rename = "protocolVersion")]
        protocol_version: String,
    }
    static BODY: OnceLock<Bytes> = OnceLock::new();
    let body = BODY.get_or_init(|| {
        let params = json!({
            "protocolVersion": SESSION_VERSION,
            "capabilities": {},
            "clientInfo": {"name": CLIENT_NAME, "version": env!("CARGO_PKG_VERSION")},
        });
        let message = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params});
        Bytes::from(message.to_string())
    });
    // The version is negotiated by initialize itself: its POST carries no version header.
    let reply = send(conn, endpoint, &[], Some(body.clone()), Some("0"), timeout).await?;
    let result = check(&reply, "0", Expect::Any)?;
    let version = serde_json::from_str::<Initialized>(result.get())
        .ok()
        .and_then(|r| HeaderValue::from_str(&r.protocol_version).ok())
        .ok_or_else(|| {
            let reply = describe(&reply);
            let detail = format!("the initialize result has no protocolVersion: {reply}");
            Failure::new(ErrorKind::Invalid, detail)
        })?;
    Ok(Context {
        era: Era::Session,
        session: reply.session_id.clone(),
        version,
    })
}

/// Ends a session with DELETE; a server that does not allow it (405) has nothing to end.
pub async fn close_session(
    conn: &mut Option<Conn>,
    endpoint: &Endpoint,
    context: &Context,
    timeout: Duration,
) -> Result<(), Failure> {
    if context.session.is_none() {
        return Ok(());
    }
    let reply = send(conn, endpoint, &context.headers(), None, None, timeout).await?;
    if reply.status.is_success() || reply.status == http::StatusCode::METHOD_NOT_ALLOWED {
        Ok(())
    } else {
        Err(Failure::new(
            ErrorKind::HttpStatus(reply.status.as_u16()),
            format!("DELETE: {}", describe(&reply)),
        ))
    }
}

// === Setup queries ===

/// Every item's `field` (e.g. tool `name`, resource `uri`) of a paginated list method.
pub async fn list_all(
    conn: &mut Option<Conn>,
    endpoint: &Endpoint,
    context: &Context,
    method: &str,
    field: &str,
    timeout: Duration,
) -> Result<Vec<String>, Failure> {
    let items_key = if method == "tools/list" {
        "tools"
    } else {
        "resources"
    };
    let mut found = Vec::new();
    let mut cursor: Option<String> = None;
    for page in 0..MAX_PAGES {
        let params = cursor.as_ref().map(|c| json!({"cursor": c}));
        let template = Template::new(context, method, params, None);
        let result = request(
            conn,
            endpoint,
            &template,
            1 + page as u64,
            Expect::Any,
            timeout,
        )
        .await?;
        let value: Value = serde_json::from_str(&result).unwrap_or(Value::Null);
        let Some(items) = value.get(items_key).and_then(Value::as_array) else {
            return Err(Failure::new(
                ErrorKind::Invalid,
                format!("{method} has no `{items_key}` array"),
            ));
        };
        found.extend(
            items
                .iter()
                .filter_map(|item| item.get(field)?.as_str().map(str::to_owned)),
        );
        cursor = value
            .get("nextCursor")
            .and_then(Value::as_str)
            .map(str::to_owned);
        if cursor.is_none() {
            break;
        }
    }
    Ok(found)
}

/// The tool to call for `wanted`: the exact name, else the only one named `*__{wanted}`.
pub fn resolve_tool(names: &[String], wanted: &str) -> Result<String, String> {
    if names.iter().any(|n| n == wanted) {
        return Ok(wanted.to_owned());
    }
    let suffix = format!("__{wanted}");
    let matches: Vec<&String> = names.iter().filter(|n| n.ends_with(&suffix)).collect();
    match matches.as_slice() {
        [one] => Ok((*one).clone()),
        [] => {
            let mut listed: Vec<&str> = names.iter().take(20).map(String::as_str).collect();
            if names.len() > 20 {
                listed.push("…");
            }
            Err(format!(
                "no tool `{wanted}` or `*{suffix}` in tools/list ({})",
                if listed.is_empty() {
                    "empty".to_owned()
                } else {
                    listed.join(", ")
                }
            ))
        }
        many => {
            let mut list = String::new();
            for name in many {
                let _ = write!(list, "{name} ");
            }
            Err(format!(
                "`{wanted}` is ambiguous: {}(give the full name with --tool)",
                list
            ))
        }
    }
}

/// The resource to read for `wanted`: the URI listed as is, else the only one listed as
/// `*+{wanted}` (a gateway's `upstream+URI`), else `wanted` itself (e.g. from a template).
pub fn resolve_resource(uris: &[String], wanted: &str) -> Option<String> {
    if uris.iter().any(|u| u == wanted) {
        return Some(wanted.to_owned());
    }
    let suffix = format!("+{wanted}");
    let mut matches = uris.iter().filter(|u| u.ends_with(&suffix));
    match (matches.next(), matches.next()) {
        (Some(one), None) => Some(one.clone()),
        _ => Some(wanted.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tools_resolve_exactly_or_by_their_unique_prefix() {
        let names: Vec<String> = ["demo__echo", "demo__add", "other__add", "ping"]
            .map(String::from)
            .to_vec();
        assert_eq!(resolve_tool(&names, "echo").unwrap(), "demo__echo");
        assert_eq!(resolve_tool(&names, "ping").unwrap(), "ping");
        assert_eq!(resolve_tool(&names, "demo__add").unwrap(), "demo__add");
        assert!(
            resolve_tool(&names, "add")
                .unwrap_err()
                .contains("ambiguous")
        );
        assert!(
            resolve_tool(&names, "nope")
                .unwrap_err()
                .contains("demo__echo, demo__add")
        );
    }

    #[test]
    fn resources_resolve_exactly_or_by_their_unique_prefix() {
        let uris: Vec<String> = ["demo+demo://about", "notes+notes://a"]
            .map(String::from)
            .to_vec();
        let resolve = |wanted| resolve_resource(&uris, wanted).unwrap();
        assert_eq!(resolve("demo://about"), "demo+demo://about");
        assert_eq!(resolve("notes+notes://a"), "notes+notes://a");
        assert_eq!(resolve("demo://greeting/x"), "demo://greeting/x");
    }
}
