//! Adding and removing upstreams at runtime. A change is made to the overlay (see
//! `config::Overlay`), checked merged with the configuration file exactly as a load would check
//! it, written so that it survives a restart, and then applied as a reload.

use std::{path::PathBuf, time::Duration};

use axum::{
    Json,
    body::Bytes,
    extract::{Path, Query, State},
    response::{IntoResponse, Response},
};
use http::StatusCode;
use serde_json::{Map, Value, json};

use super::{Admin, api::error};
use crate::{
    config::{Config, ConfigError, Overlay, ProcessVars, load_overlaid, privileged_key},
    gateway::Trigger,
};

/// How long `POST /api/upstreams` waits for the new upstream's first connection by default,
/// and at most.
const FIRST_CONNECT: Duration = Duration::from_secs(5);
const FIRST_CONNECT_MOST: Duration = Duration::from_secs(30);

/// How long to wait for an added upstream (`?wait_seconds=`).
#[derive(serde::Deserialize)]
pub struct Wait {
    wait_seconds: Option<String>,
}

/// `POST /api/upstreams[?wait_seconds=S]`: adds an upstream. The body is `{"name": NAME, ...}`
/// with the keys of an `[upstreams.NAME]` table. 201 with the reload and the new upstream as
/// `/api/servers` shows it once its first connection ended either way (ready, failed, or
/// waiting for authorization, with its `auth_url`) or `S` seconds passed (5 by default, 0 to
/// 30; `connecting` then); 400 for another `S` or a body that is not such an object, 403 for one that would
/// run a program or read the gateway's files or environment (unless `[admin] allow_commands`),
/// 409 if the name is taken, 422 with every problem if the upstream is invalid. Nothing of a
/// refused request is written.
pub async fn add(State(admin): State<Admin>, Query(wait): Query<Wait>, body: Bytes) -> Response {
    let wait = match wait.wait_seconds.as_deref().map(str::parse::<f64>) {
        None => FIRST_CONNECT,
        Some(Ok(seconds)) if (0.0..=FIRST_CONNECT_MOST.as_secs_f64()).contains(&seconds) => {
            Duration::from_secs_f64(seconds)
        }
        Some(_) => {
            return error(
                StatusCode::BAD_REQUEST,
                "`wait_seconds` must be a number of seconds from 0 to 30",
            );
        }
    };
    let (name, entry) = match entry(&body) {
        Ok(entry) => entry,
        Err(message) => return error(StatusCode::BAD_REQUEST, &message),
    };
    let editing = admin.editing.lock().await;
    let config = admin.gateway.live().config.clone();
    if !config.admin.allow_commands
        && let Some(key) = privileged_key(&entry)
    {
        return error(
            StatusCode::FORBIDDEN,
            &format!(
                "`{key}` would run a program on the gateway's host or read its files or \
                 environment; upstreams added through the admin API may do so only with \
                 [admin] allow_commands = true in the configuration file"
            ),
        );
    }
    if defines(&config, &name) {
        return error(
            StatusCode::CONFLICT,
            &format!(
                "an upstream named `{name}` already exists; remove it first \
                 (DELETE /api/upstreams/{name})"
            ),
        );
    }
    let added = name.clone();
    let answer = edit(&admin, &config, move |overlay| overlay.add(&added, entry)).await;
    drop(editing);
    let outcome = if answer.is_ok() { "ok" } else { "error" };
    super::audit_change(&admin, "add upstream", &name, outcome);
    let reload = match answer {
        Ok(reload) => reload,
        Err(response) => return response,
    };
    let live = admin.gateway.live();
    let server = match live.upstream(&name) {
        Some(upstream) => {
            let _ = tokio::time::timeout(wait, upstream.health().wait_settled()).await;
            Some(super::api::server(upstream, &live))
        }
        None => None,
    };
    (
        StatusCode::CREATED,
        Json(json!({ "name": name, "reload": reload, "server": server })),
    )
        .into_response()
}

/// `DELETE /api/upstreams/{name}`: removes an upstream, whether the file or the overlay defines
/// it; its calls in flight get the shutdown grace period. 404 if there is none of that name.
pub async fn remove(State(admin): State<Admin>, Path(name): Path<String>) -> Response {
    let _editing = admin.editing.lock().await;
    let config = admin.gateway.live().config.clone();
    if !defines(&config, &name) {
        return error(
            StatusCode::NOT_FOUND,
            &format!("no upstream named `{name}` is configured"),
        );
    }
    let removed = name.clone();
    let answer = edit(&admin, &config, move |overlay| overlay.remove(&removed)).await;
    let outcome = if answer.is_ok() { "ok" } else { "error" };
    super::audit_change(&admin, "remove upstream", &name, outcome);
    match answer {
        Ok(reload) => Json(json!({ "name": name, "reload": reload })).into_response(),
        Err(response) => response,
    }
}

/// `POST /api/upstreams/{name}/disable`: switches the upstream off — its connection closes
/// (calls in flight get the grace period) and its items leave the catalog — and keeps it off
/// across restarts (in the overlay), configured as it was. 200 with the reload; 404 if there
/// is none of that name.
pub async fn disable(State(admin): State<Admin>, Path(name): Path<String>) -> Response {
    switch(&admin, &name, false).await
}

/// `POST /api/upstreams/{name}/enable`: switches an upstream the admin API switched off on
/// again. 200 with the reload; 404 if there is none of that name; 409 if the configuration
/// file itself says `enabled = false` (it is changed there).
pub async fn enable(State(admin): State<Admin>, Path(name): Path<String>) -> Response {
    switch(&admin, &name, true).await
}

async fn switch(admin: &Admin, name: &str, on: bool) -> Response {
    let _editing = admin.editing.lock().await;
    let config = admin.gateway.live().config.clone();
    if !defines(&config, name) && !config.disabled.iter().any(|d| d == name) {
        return error(
            StatusCode::NOT_FOUND,
            &format!("no upstream named `{name}` is configured"),
        );
    }
    if on
        && config.disabled.iter().any(|d| d == name)
        && !config.overlay.disabled.iter().any(|d| d == name)
    {
        return error(
            StatusCode::CONFLICT,
            &format!(
                "`{name}` is switched off in {} (`enabled = false`); switch it on there",
                config.source.display()
            ),
        );
    }
    let switched = name.to_owned();
    let answer = edit(admin, &config, move |overlay| {
        overlay.set_enabled(&switched, on)
    })
    .await;
    let outcome = if answer.is_ok() { "ok" } else { "error" };
    let action = if on {
        "enable upstream"
    } else {
        "disable upstream"
    };
    super::audit_change(admin, action, name, outcome);
    match answer {
        Ok(reload) => {
            Json(json!({ "name": name, "enabled": on, "reload": reload })).into_response()
        }
        Err(response) => response,
    }
}

/// `POST /api/upstreams/{name}/reconnect`: connects the upstream again from scratch (a fresh
/// connection, its failed attempts forgotten), also one that gave up after `max_attempts`.
/// 202 with its state as it starts again; 404 if there is none of that name (a disabled one
/// included: it has no connection).
pub async fn reconnect(State(admin): State<Admin>, Path(name): Path<String>) -> Response {
    let found = admin.gateway.reconnect(&name).await;
    lifecycle_answer(&admin, "reconnect upstream", &name, found, "reconnecting")
}

/// `POST /api/upstreams/{name}/rediscover`: has the upstream list its tools, prompts and
/// resources again now. 202; 404 if there is none of that name.
pub async fn rediscover(State(admin): State<Admin>, Path(name): Path<String>) -> Response {
    let found = admin.gateway.rediscover(&name);
    lifecycle_answer(&admin, "rediscover upstream", &name, found, "rediscovering")
}

fn lifecycle_answer(admin: &Admin, action: &str, name: &str, found: bool, doing: &str) -> Response {
    super::audit_change(admin, action, name, if found { "ok" } else { "unknown" });
    if !found {
        return error(
            StatusCode::NOT_FOUND,
            &format!("no upstream named `{name}` is running"),
        );
    }
    let state = admin
        .gateway
        .live()
        .upstream(name)
        .map(|upstream| json!(upstream.health().status()));
    (
        StatusCode::ACCEPTED,
        Json(json!({ "name": name, doing: true, "status": state })),
    )
        .into_response()
}

/// Whether `config` has an upstream called `name` (one the overlay adds disabled included).
fn defines(config: &Config, name: &str) -> bool {
    config.upstreams.iter().any(|u| u.name.as_str() == name)
        || config.overlay.added.iter().any(|added| added == name)
}

/// The name and the `[upstreams.NAME]` table of a request body.
fn entry(body: &[u8]) -> Result<(String, toml::Table), String> {
    let mut object: Map<String, Value> = serde_json::from_slice(body).map_err(|e| {
        format!("the body must be a JSON object with `name` and the upstream's settings: {e}")
    })?;
    let name = match object.remove("name") {
        Some(Value::String(name)) => name,
        Some(_) => return Err("`name` must be a string".into()),
        None => return Err("`name` is required".into()),
    };
    let table = toml::Table::try_from(object).map_err(|e| {
        format!("the upstream's settings cannot be stored: {e} (leave out keys that are null)")
    })?;
    Ok((name, table))
}

/// Applies `change` to the overlay, checks the merged configuration, writes the overlay and
/// reloads; the reload entry, or the refusal.
async fn edit(
    admin: &Admin,
    config: &Config,
    change: impl FnOnce(&mut Overlay) + Send + 'static,
) -> Result<Value, Response> {
    let source = config.source.clone();
    let at = config.overlay.path.clone();
    let checked = tokio::task::spawn_blocking(move || -> Result<Config, Refusal> {
        let mut overlay = Overlay::read(&at).map_err(Refusal::Invalid)?;
        change(&mut overlay);
        let config =
            load_overlaid(&source, Some(&overlay), &ProcessVars).map_err(Refusal::Invalid)?;
        overlay
            .write(&config.overlay.path)
            .map_err(|e| Refusal::Write(config.overlay.path.clone(), e))?;
        Ok(config)
    })
    .await
    .unwrap_or_else(|panic| std::panic::resume_unwind(panic.into_panic()));
    let config = checked.map_err(Refusal::into_response)?;
    let entry = admin.gateway.reload(Ok(config), Trigger::Admin).await;
    Ok(json!(entry))
}

/// Why an edit was not made.
enum Refusal {
    Invalid(ConfigError),
    Write(PathBuf, std::io::Error),
}

impl Refusal {
    fn into_response(self) -> Response {
        match self {
            Refusal::Invalid(problem) => (
                StatusCode::UNPROCESSABLE_ENTITY,
                Json(json!({
                    "error": "the change would make the configuration invalid; nothing was changed",
                    "problems": problem.problem_lines(),
                })),
            )
                .into_response(),
            Refusal::Write(path, e) => error(
                StatusCode::INTERNAL_SERVER_ERROR,
                &format!("cannot write the overlay file {}: {e}", path.display()),
            ),
        }
    }
}
