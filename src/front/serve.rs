//! The accept loop of the MCP listener: HTTP/1.1 and HTTP/2 on each connection, with the
//! request headers bounded in time and size (a client sending them byte by byte cannot hold
//! connections open), and a graceful end that stops accepting and lets open requests finish.

use std::{net::SocketAddr, time::Duration};

use axum::{Router, body::Body, extract::ConnectInfo};
use hyper::{Request, body::Incoming};
use hyper_util::{
    rt::{TokioExecutor, TokioIo, TokioTimer},
    server::{conn::auto, graceful::GracefulShutdown},
};
use tokio::net::TcpListener;
use tower::ServiceExt;

/// The most a request's headers may take, in bytes.
const MAX_HEADER_BYTES: usize = 64 * 1024;
/// The wait after a failed accept (out of file descriptors, mostly) before the next one.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// Serves `app` until `stop` resolves, then until its open requests are answered. A client
/// gets `client_timeout` to send a request's headers.
pub async fn serve_app(
    listener: TcpListener,
    app: Router,
    client_timeout: Duration,
    stop: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(client_timeout)
        .max_buf_size(MAX_HEADER_BYTES);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_header_list_size(MAX_HEADER_BYTES as u32);
    let graceful = GracefulShutdown::new();
    tokio::pin!(stop);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    tracing::warn!(%error, "cannot accept a connection");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
            () = &mut stop => break,
        };
        // Replies go out at once rather than waiting for the client's delayed ACK.
        let _ = stream.set_nodelay(true);
        let app = app.clone();
        let service = hyper::service::service_fn(move |request: Request<Incoming>| {
            let mut request = request.map(Body::new);
            request
                .extensions_mut()
                .insert(ConnectInfo::<SocketAddr>(peer));
            let app = app.clone();
            async move { app.oneshot(request).await }
        });
        let connection = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
        let connection = graceful.watch(connection.into_owned());
        tokio::spawn(async move {
            // A client that goes away, or is cut off, is no error of the gateway's.
            let _ = connection.await;
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}
