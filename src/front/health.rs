//! `GET /healthz`: is the gateway up, and how is each upstream and the shared store doing.
//! Always 200 while the gateway runs (it serves whatever upstreams are ready); `status` says
//! `degraded` when an upstream is not ready or the shared store does not answer.
//!
//! It is the one route open to any `Host` (load balancers probe by address), and to those it
//! shows states only. Authorization links are never shown here: each user gets their own
//! where they authenticate (`/oauth/pending`, the errors of their calls).

use axum::{
    Json,
    extract::State,
    response::{IntoResponse, Response},
};
use http::{HeaderMap, Uri};
use serde::Serialize;

use super::AppState;
use crate::{
    store::StoreStatus,
    upstream::{UpstreamState, UpstreamStatus},
};

#[derive(Serialize)]
pub struct Health {
    status: &'static str,
    sessions: usize,
    tools: usize,
    store: StoreStatus,
    upstreams: Vec<UpstreamHealth>,
}

#[derive(Serialize)]
pub struct UpstreamHealth {
    name: String,
    #[serde(flatten)]
    status: UpstreamStatus,
}

/// What a request to a host that is not allowed is told.
#[derive(Serialize)]
struct States {
    status: &'static str,
    upstreams: Vec<UpstreamState>,
}

pub async fn health(State(state): State<AppState>, uri: Uri, headers: HeaderMap) -> Response {
    let upstreams: Vec<UpstreamHealth> = state
        .gateway
        .live()
        .upstreams
        .iter()
        .map(|u| UpstreamHealth {
            name: u.name().to_string(),
            status: (*u.health().status()).clone(),
        })
        .collect();
    let all_ready = upstreams
        .iter()
        .all(|u| u.status.state == UpstreamState::Ready);
    let store = state.gateway.store().status();
    let status = if all_ready && store.up {
        "ok"
    } else {
        "degraded"
    };
    if state.mcp.host_refusal(&uri, &headers).is_some() {
        let upstreams = upstreams.iter().map(|u| u.status.state).collect();
        return Json(States { status, upstreams }).into_response();
    }
    Json(Health {
        status,
        store,
        sessions: state.mcp.session_count(),
        tools: state.gateway.live().catalog.tools().len(),
        upstreams,
    })
    .into_response()
}
