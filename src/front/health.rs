//! `GET /healthz`: is the gateway up, and how is each upstream doing. Always 200 while the
//! gateway runs (it serves whatever upstreams are ready); `status` says `degraded` otherwise.

use axum::{Json, extract::State};
use serde::Serialize;

use super::AppState;
use crate::upstream::{UpstreamState, UpstreamStatus};

#[derive(Serialize)]
pub struct Health {
    status: &'static str,
    sessions: usize,
    tools: usize,
    upstreams: Vec<UpstreamHealth>,
}

#[derive(Serialize)]
pub struct UpstreamHealth {
    name: String,
    #[serde(flatten)]
    status: UpstreamStatus,
}

pub async fn health(State(state): State<AppState>) -> Json<Health> {
    let upstreams: Vec<UpstreamHealth> = state
        .gateway
        .upstreams()
        .iter()
        .map(|u| UpstreamHealth {
            name: u.name().to_string(),
            status: (*u.status()).clone(),
        })
        .collect();
    let all_ready = upstreams
        .iter()
        .all(|u| u.status.state == UpstreamState::Ready);
    Json(Health {
        status: if all_ready { "ok" } else { "degraded" },
        sessions: state.mcp.session_count(),
        tools: state.gateway.catalog().tools().len(),
        upstreams,
    })
}
