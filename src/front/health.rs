//! `GET /healthz`: is the gateway up, and how is each upstream and the shared store doing.
//! Always 200 while the gateway runs (it serves whatever upstreams are ready); `status` says
//! `degraded` when an upstream is not ready or the shared store does not answer.
//! Authorization links are shown only to this machine: whoever follows one decides which
//! account the upstream is used with.

use std::net::SocketAddr;

use axum::{
    Json,
    extract::{ConnectInfo, State},
};
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

pub async fn health(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
) -> Json<Health> {
    let local = peer.ip().is_loopback();
    let upstreams: Vec<UpstreamHealth> = state
        .gateway
        .upstreams()
        .iter()
        .map(|u| {
            let mut status = (*u.status()).clone();
            if !local {
                status.authorization_url = None;
            }
            UpstreamHealth {
                name: u.name().to_string(),
                status,
            }
        })
        .collect();
    let all_ready = upstreams
        .iter()
        .all(|u| u.status.state == UpstreamState::Ready);
    let store = state.gateway.store().status();
    Json(Health {
        status: if all_ready && store.up {
            "ok"
        } else {
            "degraded"
        },
        store,
        sessions: state.mcp.session_count(),
        tools: state.gateway.catalog().tools().len(),
        upstreams,
    })
}
