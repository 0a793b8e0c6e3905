//! The MCP endpoint (`/mcp` by default): streamable HTTP for both protocol eras.
//!
//! rmcp's `StreamableHttpService` does the protocol work: sessions with `Mcp-Session-Id` for
//! clients that `initialize` (POST, GET stream, DELETE, 404 for unknown sessions), stateless
//! service for 2026-07-28 clients, header checks, Host/Origin validation and the body limit.
//! `McpEndpoint` is the one place every MCP request passes through on its way there, which is
//! where a raw JSON-RPC fast path for the hottest methods sits beside rmcp's typed handling.

use std::{
    convert::Infallible,
    sync::Arc,
    task::{Context, Poll},
};

use axum::body::Body;
use futures::future::BoxFuture;
use http::{Request, Response};
use rmcp::transport::{
    StreamableHttpServerConfig, StreamableHttpService,
    streamable_http_server::session::local::SessionConfig,
};
use tokio_util::sync::CancellationToken;

use super::sessions::SessionTable;
use crate::{config::AllowedOrigins, gateway::Gateway, session::SessionHandler};

/// Buffered messages per session between its worker and its handler.
const SESSION_CHANNEL_CAPACITY: usize = 64;

/// The tower service behind the MCP endpoint path.
#[derive(Clone)]
pub struct McpEndpoint {
    rmcp: StreamableHttpService<SessionHandler, SessionTable>,
    sessions: Arc<SessionTable>,
}

impl McpEndpoint {
    /// The endpoint for `gateway`; `shutdown` ends every session and stream.
    pub fn new(gateway: Arc<Gateway>, shutdown: CancellationToken) -> Self {
        let settings = &gateway.config().server;
        let mut config = StreamableHttpServerConfig::default()
            .with_allowed_hosts(settings.allowed_hosts.clone())
            .with_max_request_body_bytes(settings.max_request_body_bytes)
            .with_json_response(true)
            .with_cancellation_token(shutdown);
        if settings.allowed_hosts.is_empty() {
            config = config.disable_allowed_hosts();
        }
        config = match &settings.allowed_origins {
            AllowedOrigins::Any => config.disable_allowed_origins(),
            // An empty list refuses every request that carries an Origin.
            AllowedOrigins::Only(origins) => config
                .with_allowed_origins(origins.clone())
                .enforce_origin_validation(),
        };
        let mut session_config = SessionConfig::default();
        session_config.keep_alive = Some(settings.session_idle_timeout);
        session_config.channel_capacity = SESSION_CHANNEL_CAPACITY;
        let sessions = Arc::new(SessionTable::new(session_config));
        let rmcp = StreamableHttpService::new(
            move || Ok(SessionHandler::new(gateway.clone())),
            sessions.clone(),
            config,
        );
        Self { rmcp, sessions }
    }

    /// How many downstream sessions are open.
    pub fn session_count(&self) -> usize {
        self.sessions.len()
    }
}

impl tower::Service<Request<Body>> for McpEndpoint {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let rmcp = self.rmcp.clone();
        Box::pin(async move { Ok(rmcp.handle(request).await.map(Body::new)) })
    }
}
