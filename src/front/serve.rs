//! The accept loop of the MCP listener (and the pass-through's): HTTP/1.1 and HTTP/2 on each
//! connection, with the request headers bounded in time and size (a client sending them byte
//! by byte cannot hold connections open), and a graceful end that stops accepting and lets
//! open requests finish.
//!
//! The end closes kept-alive HTTP/1.1 connections without cutting a request off: for a short
//! while (`LAME_DUCK`) requests still arriving on them are answered with `Connection: close`,
//! so their clients go to a new connection (in an upgrade, the new process) instead of
//! finding theirs reset under a request they had just sent. Then the idle ones are closed.

use std::{
    net::SocketAddr,
    pin::Pin,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    task::{Context, Poll, ready},
    time::Duration,
};

use axum::{Router, body::Body};
use hyper::{Request, body::Incoming};
use hyper_util::{
    rt::{TokioIo, TokioTimer},
    server::conn::auto,
};
use tokio::net::TcpListener;

use super::{
    McpEndpoint,
    graceful::Graceful,
    repoll::{Repolled, RepolledTasks},
};
use tower::ServiceExt;

/// The most a request's headers may take, in bytes.
const MAX_HEADER_BYTES: usize = 64 * 1024;
/// The wait after a failed accept (out of file descriptors, mostly) before the next one.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);
/// How long connections still open when the listener stops serve the requests that come,
/// closing after each, before the idle ones are closed.
const LAME_DUCK: Duration = Duration::from_secs(1);

/// Whether the listener is closing: an answer given on an HTTP/1 connection then says that the
/// connection closes after it.
#[derive(Clone, Default)]
struct Closing(Arc<AtomicBool>);

impl Closing {
    /// Marks `answer`, given to a request of `version`, if the listener is closing.
    fn mark<B>(&self, version: http::Version, answer: &mut hyper::Response<B>) {
        if version <= http::Version::HTTP_11 && self.0.load(Ordering::Relaxed) {
            answer.headers_mut().insert(
                http::header::CONNECTION,
                http::HeaderValue::from_static("close"),
            );
        }
    }

    fn begin(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// A connection's service, whose answers `Closing` marks.
struct Marking<S> {
    service: S,
    closing: Closing,
}

impl<S, B> hyper::service::Service<Request<Incoming>> for Marking<S>
where
    S: hyper::service::Service<Request<Incoming>, Response = hyper::Response<B>>,
{
    type Response = hyper::Response<B>;
    type Error = S::Error;
    type Future = Marked<S::Future>;

    fn call(&self, request: Request<Incoming>) -> Self::Future {
        Marked {
            version: request.version(),
            closing: self.closing.clone(),
            answer: self.service.call(request),
        }
    }
}

pin_project_lite::pin_project! {
    /// An answer on its way, marked when it is ready.
    struct Marked<F> {
        #[pin]
        answer: F,
        version: http::Version,
        closing: Closing,
    }
}

impl<F, B, E> Future for Marked<F>
where
    F: Future<Output = Result<hyper::Response<B>, E>>,
{
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let mut answer = ready!(this.answer.poll(cx))?;
        this.closing.mark(*this.version, &mut answer);
        Poll::Ready(Ok(answer))
    }
}

/// Serves `app` until `stop` resolves, then until its open requests are answered. A client
/// gets `client_timeout` to send a request's headers. Requests to the MCP endpoint's main
/// `path` go to `mcp` directly: the hot route skips the router's matching and its boxed
/// services (`app` routes the path to `mcp` as well).
pub async fn serve_app(
    listener: TcpListener,
    app: Router,
    (path, mcp): (String, McpEndpoint),
    client_timeout: Duration,
    stop: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let path: Arc<str> = path.into();
    let connection = move |_peer: SocketAddr| {
        let (app, mcp, path) = (app.clone(), mcp.clone(), path.clone());
        hyper::service::service_fn(move |request: Request<Incoming>| {
            let request = request.map(Body::new);
            if request.uri().path() == &*path {
                mcp.answer(request)
            } else {
                Box::pin(app.clone().oneshot(request))
            }
        })
    };
    serve_connections(listener, client_timeout, None, stop, connection).await;
    Ok(())
}

/// Serves each connection accepted on `listener` with the service `connection` makes for its
/// peer, until `stop` resolves; then lets the requests in flight finish, for at most `drain` if it is given
/// (connections still open then are left to end with the process).
pub async fn serve_connections<S, B>(
    listener: TcpListener,
    client_timeout: Duration,
    drain: Option<Duration>,
    stop: impl Future<Output = ()> + Send + 'static,
    connection: impl Fn(SocketAddr) -> S,
) where
    S: hyper::service::Service<Request<Incoming>, Response = hyper::Response<B>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    B: http_body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let mut builder = auto::Builder::new(RepolledTasks);
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(client_timeout)
        .max_buf_size(MAX_HEADER_BYTES);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_header_list_size(MAX_HEADER_BYTES as u32);
    let graceful = Graceful::default();
    let closing = Closing::default();
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
        let served = builder.serve_connection_with_upgrades(
            TokioIo::new(stream),
            Marking {
                service: connection(peer),
                closing: closing.clone(),
            },
        );
        // Polled again in place when it wakes itself, rather than yielding (`repoll`).
        let served = Repolled::new(graceful.watch(served.into_owned()));
        tokio::spawn(async move {
            // A client that goes away, or is cut off, is no error of the gateway's.
            let _ = served.await;
        });
    }
    drop(listener);
    closing.begin();
    let lame_duck = tokio::time::Instant::now() + LAME_DUCK;
    while graceful.count() > 0 && tokio::time::Instant::now() < lame_duck {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    match drain {
        Some(drain) => {
            let _ = tokio::time::timeout(drain, graceful.shutdown()).await;
        }
        None => graceful.shutdown().await,
    }
}
