//! The pass-through routes, `/servers/{name}/mcp` on `[server] passthrough_listen`: one
//! streamable-HTTP upstream proxied as it is (`proxy`), for clients that want one server at
//! the lowest overhead. Requests go up over the upstream's own HTTP client (the raw path's),
//! and its answers come back as they stream (`relayed`). Calls through it are counted by
//! `[[quota]]` and audited as the MCP endpoint's are (`metered`).

mod metered;
mod proxy;
mod relayed;

use std::sync::Arc;

use hyper::{Request, body::Incoming};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::{
    front::{McpEndpoint, serve_connections},
    gateway::Gateway,
};

pub use proxy::Passthrough;

/// Serves the pass-through routes on `listener` until `stop`; then lets the requests in
/// flight finish within `[server] shutdown_grace_seconds` (their connections close after
/// them; streams still open then are left to end with the process).
pub async fn serve(
    listener: TcpListener,
    gateway: Arc<Gateway>,
    endpoint: McpEndpoint,
    stop: CancellationToken,
) {
    let server = &gateway.live().config.server;
    let (grace, client_timeout) = (server.shutdown_grace, server.client_timeout);
    let proxy = Arc::new(Passthrough::new(gateway, endpoint));
    let connection = move |_peer| {
        let proxy = proxy.clone();
        hyper::service::service_fn(move |request: Request<Incoming>| {
            let proxy = proxy.clone();
            async move { Ok::<_, std::convert::Infallible>(proxy.handle(request).await) }
        })
    };
    let stop = async move { stop.cancelled().await };
    serve_connections(listener, client_timeout, Some(grace), stop, connection).await;
}
