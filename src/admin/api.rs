//! The admin API's handlers: the state of the gateway (status, servers in the shape of the
//! Cloudflare Agents SDK's `getMcpServers()`, the merged catalog, sessions), and what an
//! operator may do (reload, start or forget an upstream's authorization). JSON in and out;
//! every refusal is a status with `{"error": "..."}`.

use std::sync::Arc;

use axum::{
    Json,
    extract::{Path, Query, State},
    response::{IntoResponse, Response},
};
use http::StatusCode;
use serde::Serialize;
use serde_json::{Value, json};

use super::Admin;
use crate::session::short_hash;
use crate::{
    catalog::Rejected,
    clock::unix_seconds,
    config::TransportConfig,
    gateway::{JournalError, Live, ReloadEntry, ReloadOutcome, Trigger},
    principal::Principal,
    upstream::{Upstream, sandbox::Report},
};

/// An error answer: `status` and `{"error": message}`.
pub fn error(status: StatusCode, message: &str) -> Response {
    (status, Json(json!({ "error": message }))).into_response()
}

pub async fn not_found() -> Response {
    error(
        StatusCode::NOT_FOUND,
        "no such admin resource; the admin API's routes are in docs/src/admin-api.md",
    )
}

/// One upstream as operators see it.
#[derive(Serialize)]
pub struct Server {
    name: String,
    /// `file` or `overlay` (added through this API).
    defined_in: &'static str,
    state: &'static str,
    since: u64,
    transport: Option<&'static str>,
    target: String,
    session: &'static str,
    protocol_version: Option<String>,
    last_error: Option<String>,
    retries: u32,
    auth_url: Option<String>,
    counts: Counts,
    /// Definitions the upstream listed that are not served (unreadable, or a second of a name).
    rejected: Vec<Rejected>,
    in_flight: usize,
    /// A sandboxed stdio server's: what this kernel enforces of it, and what it cannot.
    #[serde(skip_serializing_if = "Option::is_none")]
    sandbox: Option<crate::upstream::sandbox::Report>,
}

#[derive(Serialize)]
struct Counts {
    tools: usize,
    prompts: usize,
    resources: usize,
    resource_templates: usize,
}

pub fn server(upstream: &Upstream, live: &Live) -> Server {
    let status = upstream.health().status();
    let config = upstream.config();
    let catalog = upstream.catalog().unwrap_or_default();
    let target = match &config.transport {
        TransportConfig::Http(http) => http.url.to_string(),
        TransportConfig::Stdio(stdio) => std::iter::once(stdio.command.as_str())
            .chain(stdio.args.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" "),
    };
    Server {
        name: upstream.name().to_string(),
        defined_in: if live
            .config
            .overlay
            .added
            .iter()
            .any(|n| n == upstream.name().as_str())
        {
            "overlay"
        } else {
            "file"
        },
        state: if upstream.is_retired() {
            "draining"
        } else {
            status.state.as_str()
        },
        since: unix_seconds(status.since),
        transport: status.transport,
        target,
        session: match config.session {
            crate::config::SessionMode::Shared => "shared",
            crate::config::SessionMode::PerClient => "per_client",
        },
        protocol_version: status.protocol_version.clone(),
        last_error: status.last_error.clone(),
        retries: status.retries,
        auth_url: status.authorization_url.clone(),
        counts: Counts {
            tools: catalog.tools.len(),
            prompts: catalog.prompts.len(),
            resources: catalog.resources.len(),
            resource_templates: catalog.templates.len(),
        },
        rejected: catalog.rejected.clone(),
        in_flight: upstream.load().in_flight(),
        sandbox: match &config.transport {
            TransportConfig::Stdio(stdio) => (stdio.sandbox.as_ref())
                .map(|sandbox| Report::of(sandbox, crate::upstream::sandbox::kernel())),
            TransportConfig::Http(_) => None,
        },
    }
}

#[derive(Serialize)]
pub struct Status {
    version: &'static str,
    started: u64,
    config: ConfigInfo,
    traffic: Traffic,
    servers: Vec<Server>,
    /// Upstreams configured but switched off (`enabled = false`, or through the admin API).
    disabled: Vec<String>,
    /// Pinned tools' changes (and new tools) waiting for an operator.
    held: Vec<crate::pins::Held>,
    /// Tool calls waiting for an operator's approval.
    approvals: Vec<crate::approval::Pending>,
    recent_errors: Vec<JournalError>,
    reloads: Vec<ReloadEntry>,
}

#[derive(Serialize)]
struct ConfigInfo {
    path: String,
    generation: u64,
}

#[derive(Serialize, PartialEq)]
pub struct Traffic {
    requests_total: u64,
    errors_total: u64,
    tool_calls_total: u64,
    requests_in_flight: i64,
    sessions: usize,
    streams: i64,
}

/// `GET /api/status`: what the status page shows.
pub async fn status(State(admin): State<Admin>) -> Json<Status> {
    let gateway = &admin.gateway;
    let live = gateway.live();
    Json(Status {
        version: env!("CARGO_PKG_VERSION"),
        started: unix_seconds(gateway.started()),
        config: ConfigInfo {
            path: live.config.source.display().to_string(),
            generation: live.generation,
        },
        traffic: traffic(&admin),
        servers: live.upstreams.iter().map(|u| server(u, &live)).collect(),
        disabled: live.config.disabled.clone(),
        held: gateway.pins().held(),
        approvals: gateway.approvals().list(),
        recent_errors: gateway.journal().errors(),
        reloads: gateway.journal().reloads(),
    })
}

/// The gateway's traffic so far, and now.
pub fn traffic(admin: &Admin) -> Traffic {
    let totals = admin.gateway.metrics().totals();
    Traffic {
        requests_total: totals.requests,
        errors_total: totals.errors,
        tool_calls_total: totals.tool_calls,
        requests_in_flight: totals.in_flight,
        sessions: admin.mcp.session_count(),
        streams: totals.streams,
    }
}

/// `GET /api/servers`: the full picture of each server, in the shape of the Cloudflare Agents
/// SDK's `getMcpServers()`: servers by name (state, URL, authorization link, what it said of
/// itself at the handshake: server info, capabilities, instructions, protocol version), then
/// every tool, prompt, resource and resource template as the server defined it (its own name,
/// schemas and all), each with the `serverId` it came from.
pub async fn servers(State(admin): State<Admin>) -> Json<Value> {
    let live = admin.gateway.live();
    let mut servers = serde_json::Map::new();
    let mut lists: [Vec<Value>; 4] = Default::default();
    for upstream in &live.upstreams {
        let name = upstream.name().as_str();
        let mut entry = json!(server(upstream, &live));
        let handshake = upstream.shared().ok().map(|c| c.server().clone());
        let catalog = upstream.catalog();
        let instructions = (catalog.as_ref())
            .and_then(|catalog| catalog.instructions.clone())
            .or_else(|| handshake.as_ref()?.instructions.clone());
        if let Some(entry) = entry.as_object_mut() {
            let url = match &upstream.config().transport {
                TransportConfig::Http(http) => Some(http.url.to_string()),
                TransportConfig::Stdio(_) => None,
            };
            entry.insert("server_url".into(), json!(url));
            entry.insert(
                "server_info".into(),
                json!(handshake.as_ref().map(|h| &h.server_info)),
            );
            entry.insert(
                "capabilities".into(),
                json!(handshake.as_ref().map(|h| &h.capabilities)),
            );
            entry.insert("instructions".into(), json!(instructions));
        }
        servers.insert(name.to_owned(), entry);
        let Some(catalog) = catalog else {
            continue;
        };
        let [tools, prompts, resources, templates] = &mut lists;
        tools.extend(catalog.tools.iter().map(|t| from_server(t, name)));
        prompts.extend(catalog.prompts.iter().map(|p| from_server(p, name)));
        resources.extend(catalog.resources.iter().map(|r| from_server(r, name)));
        templates.extend(catalog.templates.iter().map(|t| from_server(t, name)));
    }
    let [tools, prompts, resources, templates] = lists;
    Json(json!({
        "servers": servers,
        "tools": tools,
        "prompts": prompts,
        "resources": resources,
        "resource_templates": templates,
    }))
}

/// `definition` as JSON, with the name of the server that listed it.
fn from_server(definition: &impl Serialize, server: &str) -> Value {
    let mut value = json!(definition);
    if let Some(object) = value.as_object_mut() {
        object.insert("serverId".into(), json!(server));
    }
    value
}

/// `GET /api/catalog`: the merged catalog as clients see it.
pub async fn catalog(State(admin): State<Admin>) -> Json<Value> {
    let catalog = admin.gateway.live().catalog.clone();
    Json(json!({
        "generation": catalog.generation(),
        "tools": catalog.tools(),
        "prompts": catalog.prompts(),
        "resources": catalog.resources(),
        "resource_templates": catalog.templates(),
    }))
}

/// `GET /api/sessions`: client sessions, without their ids (a short hash instead) or anything
/// secret.
pub async fn sessions(State(admin): State<Admin>) -> Json<Value> {
    let table = admin.mcp.sessions();
    let now = table.now();
    let sessions: Vec<Value> = table
        .sessions()
        .iter()
        .map(|session| {
            let client = &session.client().client_info;
            json!({
                "id_hash": short_hash(session.id()),
                "age_seconds": session.opened().elapsed().map(|d| d.as_secs()).unwrap_or(0),
                "idle_seconds": now.saturating_sub(session.last_active()) / 1000,
                "protocol_version": session.version().to_string(),
                "client": format!("{} {}", client.name, client.version),
                "upstream_sessions": session.upstreams().open_names(),
            })
        })
        .collect();
    Json(json!({ "count": sessions.len(), "sessions": sessions }))
}

/// `POST /api/reload`: reloads the configuration file; 422 with the problems if it is invalid.
pub async fn reload(State(admin): State<Admin>) -> Response {
    let entry = admin.gateway.reload_from_file(Trigger::Admin).await;
    let status = match entry.outcome {
        ReloadOutcome::Rejected => StatusCode::UNPROCESSABLE_ENTITY,
        _ => StatusCode::OK,
    };
    (status, Json(entry)).into_response()
}

fn upstream_named(admin: &Admin, name: &str) -> Result<Arc<Upstream>, Box<Response>> {
    admin.gateway.live().upstream(name).cloned().ok_or_else(|| {
        Box::new(error(
            StatusCode::NOT_FOUND,
            &format!("no upstream named `{name}` is configured"),
        ))
    })
}

/// Whom `POST /api/upstreams/{name}/authorize` acts for.
#[derive(serde::Deserialize)]
pub struct For {
    /// A principal as listed (`anonymous`, `user:jwt:SUB`, `user:key:NAME`); by default the
    /// one whose token the upstream's shared connection uses.
    principal: Option<String>,
}

/// `POST /api/upstreams/{name}/authorize[?principal=…]`: the link to authorize Switchyard at an
/// upstream for a principal (made now if there is none yet).
pub async fn authorize(
    State(admin): State<Admin>,
    Path(name): Path<String>,
    Query(target): Query<For>,
) -> Response {
    let upstream = match upstream_named(&admin, &name) {
        Ok(upstream) => upstream,
        Err(response) => return *response,
    };
    let Some(auth) = upstream.auth() else {
        return error(
            StatusCode::CONFLICT,
            &format!("upstream `{name}` does not use OAuth"),
        );
    };
    let principal = match target.principal.as_deref().map(Principal::parse) {
        None => auth.service_grant().await.principal.clone(),
        Some(Some(principal)) => principal,
        Some(None) => {
            return error(
                StatusCode::BAD_REQUEST,
                "`principal` must be `anonymous` or `user:…`, as /oauth/pending lists them",
            );
        }
    };
    let link = auth.link_for(&principal).await.unwrap_or_else(|error| {
        tracing::warn!(upstream = %name, %error, "cannot start an authorization");
        None
    });
    match link {
        Some(link) => {
            Json(json!({ "url": link.url, "principal": principal.as_str() })).into_response()
        }
        None => error(
            StatusCode::CONFLICT,
            &format!("upstream `{name}` needs no authorization for {principal} now"),
        ),
    }
}

/// `DELETE /api/upstreams/{name}/authorization`: revokes and forgets an upstream's tokens.
pub async fn forget(State(admin): State<Admin>, Path(name): Path<String>) -> Response {
    let upstream = match upstream_named(&admin, &name) {
        Ok(upstream) => upstream,
        Err(response) => return *response,
    };
    let forgotten = admin.gateway.oauth().forget(upstream.name()).await;
    let outcome = if forgotten.is_some() { "ok" } else { "error" };
    super::audit_change(&admin, "forget OAuth tokens", &name, outcome);
    match forgotten {
        Some(tokens) => Json(json!({ "forgotten": true, "tokens": tokens })).into_response(),
        None => error(
            StatusCode::CONFLICT,
            &format!("upstream `{name}` does not use OAuth"),
        ),
    }
}
