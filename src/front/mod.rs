//! The HTTP front: one listener serving the MCP endpoint and the operational endpoints.
//!
//! `serve` takes a bound listener and a shutdown future, so tests bind port 0 and stop it at
//! will. HTTP/1.1 and HTTP/2 (prior knowledge) are both accepted.

mod health;
mod mcp;
mod oauth;

use std::{future::Future, net::SocketAddr, sync::Arc};

use axum::{
    Router,
    routing::{get, post},
};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use mcp::McpEndpoint;

use crate::gateway::Gateway;

/// State shared by the non-MCP routes.
#[derive(Clone)]
struct AppState {
    gateway: Arc<Gateway>,
    mcp: McpEndpoint,
}

/// The whole HTTP application for `gateway`.
pub fn app(gateway: Arc<Gateway>, shutdown: CancellationToken) -> Router {
    let mcp = McpEndpoint::new(gateway.clone(), shutdown);
    let path = gateway.config().server.endpoint_path.clone();
    Router::new()
        .route_service(&path, mcp.clone())
        .route("/healthz", get(health::health))
        .route("/oauth/callback", get(oauth::callback))
        .route("/oauth/pending", get(oauth::pending))
        .route("/oauth/client-metadata.json", get(oauth::client_metadata))
        .route("/oauth/forget/{upstream}", post(oauth::forget))
        .with_state(AppState { gateway, mcp })
}

/// Serves `gateway` on `listener` until `shutdown` resolves, then drains open requests.
pub async fn serve(
    listener: TcpListener,
    gateway: Arc<Gateway>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let streams = CancellationToken::new();
    let app = app(gateway, streams.clone());
    let stop = async move {
        shutdown.await;
        // Long-lived SSE streams would hold graceful shutdown open forever; end them first.
        streams.cancel();
    };
    // Replies go out at once rather than waiting for the client's delayed ACK.
    let listener = axum::serve::ListenerExt::tap_io(listener, |stream| {
        let _ = stream.set_nodelay(true);
    });
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(stop)
    .await
}
