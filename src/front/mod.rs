//! The HTTP front: one listener serving the MCP endpoint and the operational endpoints. Every
//! route checks `Host` first (`guard`); `/healthz` alone answers other hosts, with states only.
//!
//! `serve` takes a bound listener and a shutdown future, so tests bind port 0 and stop it at
//! will. HTTP/1.1 and HTTP/2 (prior knowledge) are both accepted.

mod connect;
mod graceful;
mod guard;
mod health;
mod mcp;
mod oauth;
mod pages;
mod repoll;
mod serve;

use std::{future::Future, sync::Arc};

use axum::{
    Router,
    extract::{Request, State},
    middleware::{self, Next},
    response::{IntoResponse, Response},
    routing::{get, post},
};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use guard::Guard;
pub use mcp::{Held, McpEndpoint, beyond_quota, read_whole, refusal, refusal_retry};
pub use serve::serve_connections;

use crate::{
    auth::{self, AdminToken},
    gateway::Gateway,
};

/// State shared by the non-MCP routes.
#[derive(Clone)]
struct AppState {
    gateway: Arc<Gateway>,
    mcp: McpEndpoint,
    /// The operators' token, which lists every pending authorization where users do not
    /// authenticate.
    admin: AdminToken,
}

/// The whole HTTP application for `gateway`, around its MCP endpoint `mcp`. Every route but
/// `/healthz` (which then shows only states, for load balancers' probes) first checks that the
/// request was sent to an allowed host; the MCP endpoint checks it itself.
pub fn app(gateway: Arc<Gateway>, mcp: McpEndpoint, admin: AdminToken) -> Router {
    let path = gateway.live().config.server.endpoint_path.clone();
    let metrics_here = gateway.live().config.admin.metrics_on_main_listener;
    let state = AppState {
        gateway,
        mcp: mcp.clone(),
        admin,
    };
    let router = Router::new();
    let router = if metrics_here {
        router.route("/metrics", get(metrics))
    } else {
        router
    };
    router
        .route(auth::METADATA_PREFIX, get(resource_metadata))
        .route(
            &format!("{}/{{*path}}", auth::METADATA_PREFIX),
            get(resource_metadata),
        )
        .route("/oauth/callback", get(oauth::callback))
        .route(
            "/oauth/connect/{id}",
            get(connect::start).post(connect::prove),
        )
        .route("/oauth/signin", get(connect::signed_in))
        .route("/oauth/pending", get(oauth::pending))
        .route("/oauth/client-metadata.json", get(oauth::client_metadata))
        .route("/oauth/forget/{upstream}", post(oauth::forget))
        .route_layer(middleware::from_fn_with_state(state.clone(), allowed_host))
        .route("/healthz", get(health::health))
        .route_service(&path, mcp.clone())
        // Virtual endpoints (`[endpoints]`), which a reload may add: the MCP endpoint knows
        // their paths and answers 404 for any other.
        .fallback_service(mcp)
        .with_state(state)
}

/// Refuses a request sent to a host that is not allowed (DNS rebinding) before its route
/// sees it.
async fn allowed_host(State(state): State<AppState>, request: Request, next: Next) -> Response {
    match state.mcp.host_refusal(request.uri(), request.headers()) {
        None => next.run(request).await,
        Some(refusal) => refusal,
    }
}

/// The gateway's protected-resource metadata (RFC 9728), at the well-known path and under it
/// (where clients look for the endpoint's path); 404 without `[auth]`. Any page may read it.
async fn resource_metadata(State(state): State<AppState>, uri: http::Uri) -> Response {
    let Some(metadata) = state.mcp.authenticator().metadata_at(uri.path()) else {
        return http::StatusCode::NOT_FOUND.into_response();
    };
    (
        [
            (http::header::CONTENT_TYPE, "application/json"),
            (http::header::ACCESS_CONTROL_ALLOW_ORIGIN, "*"),
        ],
        metadata,
    )
        .into_response()
}

/// `/metrics` on the MCP listener (`admin.metrics_on_main_listener`).
async fn metrics(State(state): State<AppState>) -> Response {
    metrics_response(&state.gateway)
}

/// `gateway`'s metrics in the Prometheus text format, as `/metrics` serves them (here and on
/// the admin listener).
pub fn metrics_response(gateway: &Gateway) -> Response {
    (
        [(
            http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        gateway.render_metrics(),
    )
        .into_response()
}

/// The front of one gateway: its MCP endpoint, and the token that ends every event stream.
pub struct Front {
    pub mcp: McpEndpoint,
    admin: AdminToken,
    streams: CancellationToken,
}

impl Front {
    /// The front of `gateway`; `admin` is the operators' token.
    pub fn new(gateway: Arc<Gateway>, admin: AdminToken) -> Self {
        let streams = CancellationToken::new();
        Self {
            mcp: McpEndpoint::new(gateway, streams.clone()),
            admin,
            streams,
        }
    }

    /// Serves the front on `listener` until `shutdown` resolves; then requests in flight have
    /// `server.shutdown_grace_seconds` to be answered before they are cut.
    pub async fn serve(
        self,
        listener: TcpListener,
        gateway: Arc<Gateway>,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let mcp = self.mcp.clone();
        let app = app(gateway.clone(), self.mcp.clone(), self.admin);
        let (path, timeout) = {
            let server = &gateway.live().config.server;
            (server.endpoint_path.clone(), server.client_timeout)
        };
        let stopping = CancellationToken::new();
        let stop = {
            let stopping = stopping.clone();
            async move {
                shutdown.await;
                stopping.cancel();
            }
        };
        let streams = self.streams;
        let drain = tokio::spawn(async move {
            stopping.cancelled().await;
            // Standalone streams would hold the shutdown open; calls in flight may finish
            // within the grace period, and are cut after it.
            mcp.end_standalone_streams();
            tokio::time::sleep(gateway.live().config.server.shutdown_grace).await;
            streams.cancel();
        });
        let served = serve::serve_app(listener, app, (path, self.mcp), timeout, stop).await;
        drain.abort();
        served
    }
}

/// Serves `gateway` on `listener` until `shutdown` resolves, then drains open requests; with
/// an admin token nobody knows (where no operator needs one).
pub async fn serve(
    listener: TcpListener,
    gateway: Arc<Gateway>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    Front::new(gateway.clone(), AdminToken::unknowable())
        .serve(listener, gateway, shutdown)
        .await
}
