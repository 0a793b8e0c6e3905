//! The MCP endpoint (`/mcp` by default): the streamable HTTP transport for both protocol eras,
//! served by Switchyard itself.
//!
//! Every request passes the Host/Origin guard. A POST carries one JSON-RPC message: clients
//! that `initialize` get a session (`Mcp-Session-Id`) and their requests are answered on event
//! streams; 2026-07-28 requests stand alone and are answered with JSON, or a stream when
//! something is sent before the answer. GET opens a session's standalone stream, DELETE ends a
//! session. The requests themselves are answered by `session::serve`.

mod checks;
mod get;
mod guard;
mod post;
mod reply;

use std::{
    convert::Infallible,
    sync::Arc,
    task::{Context, Poll},
};

use axum::body::Body;
use futures::future::BoxFuture;
use http::{Method, Request, Response};
use tokio_util::sync::CancellationToken;

use crate::{
    gateway::Gateway,
    session::{SessionTable, spawn_list_notifier},
};

/// The tower service behind the MCP endpoint path. Cheap to clone.
#[derive(Clone)]
pub struct McpEndpoint {
    inner: Arc<Endpoint>,
}

/// What every request of the endpoint needs.
struct Endpoint {
    gateway: Arc<Gateway>,
    sessions: Arc<SessionTable>,
    guard: guard::Guard,
    max_body: usize,
}

impl McpEndpoint {
    /// The endpoint for `gateway`; `shutdown` ends every session and stream.
    pub fn new(gateway: Arc<Gateway>, shutdown: CancellationToken) -> Self {
        let settings = &gateway.config().server;
        let sessions = SessionTable::new(settings.session_idle_timeout, shutdown.clone());
        spawn_list_notifier(gateway.clone(), Arc::downgrade(&sessions), shutdown.clone());
        let guard = guard::Guard::new(settings);
        let max_body = settings.max_request_body_bytes;
        let sessions_at_shutdown = sessions.clone();
        tokio::spawn(async move {
            shutdown.cancelled().await;
            for session in sessions_at_shutdown.sessions() {
                sessions_at_shutdown.remove(session.id());
            }
        });
        Self {
            inner: Arc::new(Endpoint {
                gateway,
                sessions,
                guard,
                max_body,
            }),
        }
    }

    /// How many client sessions are open.
    pub fn session_count(&self) -> usize {
        self.inner.sessions.len()
    }
}

impl Endpoint {
    async fn handle(&self, request: Request<Body>) -> Response<Body> {
        if let Err((status, message)) = self.guard.check(request.uri(), request.headers()) {
            return reply::text(status, message);
        }
        match *request.method() {
            Method::POST => self.post(request).await,
            Method::GET => self.get(request),
            Method::DELETE => self.delete(request),
            _ => reply::method_not_allowed("GET, POST, DELETE"),
        }
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
        let inner = self.inner.clone();
        Box::pin(async move { Ok(inner.handle(request).await) })
    }
}
