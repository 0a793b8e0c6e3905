//! The pass-through routes, `/servers/{name}/mcp` on `[server] passthrough_listen`: one
//! streamable-HTTP upstream proxied byte for byte by pingora's HTTP proxy (`proxy`), for
//! clients that want one server at the lowest overhead. Connections are accepted here, on
//! the gateway's runtime, and each is handed to pingora's proxy application over a
//! `downstream::ClientStream`, which lets the proxy send a response's pieces together. Calls
//! through it are counted by `[[quota]]` and audited as the MCP endpoint's are (`metered`).

mod downstream;
mod metered;
mod proxy;
mod route;

use std::sync::Arc;

use pingora::{
    protocols::l4::stream::Stream, proxy::HttpProxy, server::configuration::ServerConf,
    services::listening::Service,
};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::{front::McpEndpoint, gateway::Gateway};

pub use proxy::Passthrough;

type App = HttpProxy<Passthrough>;

/// Serves the pass-through routes on `listener` until `stop`; then lets the requests in
/// flight finish within `[server] shutdown_grace_seconds` (their connections close after
/// them; streams still open then are cut).
pub async fn serve(
    listener: TcpListener,
    gateway: Arc<Gateway>,
    endpoint: McpEndpoint,
    stop: CancellationToken,
) {
    let grace = gateway.live().config.server.shutdown_grace;
    let conf = Arc::new(ServerConf::default());
    let mut app = HttpProxy::new(Passthrough::new(gateway, endpoint), conf);
    app.handle_init_modules();
    let app = Arc::new(app);
    let (shutdown, watch) = tokio::sync::watch::channel(false);
    let tasks = tokio_util::task::TaskTracker::new();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = stop.cancelled() => break,
        };
        let (socket, _) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::warn!(%error, "the pass-through listener failed to accept");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = socket.set_nodelay(true);
        let stream: Stream = socket.into();
        tasks.spawn(Service::<App>::handle_event(
            Box::new(downstream::ClientStream::new(stream)),
            app.clone(),
            watch.clone(),
        ));
    }
    drop(listener);
    // Requests in flight finish; their connections are not kept alive.
    let _ = shutdown.send(true);
    tasks.close();
    let _ = tokio::time::timeout(grace, tasks.wait()).await;
}
