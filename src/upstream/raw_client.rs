//! The raw path's HTTP client: pooled keep-alive connections, the platform's TLS trust.

use std::{
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::Duration,
};

use bytes::Bytes;
use futures::{TryFutureExt, future::MapOk};
use http::Uri;
use http_body_util::Full;
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::{
    client::legacy::{
        Client,
        connect::{Connected, Connection, HttpConnector},
    },
    rt::TokioExecutor,
};
use pin_project_lite::pin_project;

type Tls = hyper_rustls::HttpsConnector<HttpConnector>;

/// The pooled HTTP client of an upstream's raw path (keep-alive connections, no cap on them).
pub type RawClient = Client<Quiet<Tls>, Full<Bytes>>;

/// A raw client with the same TLS trust as the rest of Switchyard's HTTP (the platform's).
pub fn raw_client(connect_timeout: Duration) -> Result<RawClient, String> {
    use rustls_platform_verifier::BuilderVerifierExt;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .and_then(|builder| builder.with_platform_verifier())
        .map_err(|error| error.to_string())?
        .with_no_client_auth();
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    http.set_connect_timeout(Some(connect_timeout));
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .enable_http2()
        .wrap_connector(http);
    Ok(Client::builder(TokioExecutor::new()).build(Quiet(connector)))
}

/// A connector whose connections tell the client only what it needs of them (HTTP/2 agreed,
/// a proxy), not the addresses hyper_util would otherwise put into every response's
/// extensions: nothing reads them, and that costs three allocations per answer.
#[derive(Clone)]
pub struct Quiet<C>(C);

impl<C> tower::Service<Uri> for Quiet<C>
where
    C: tower::Service<Uri>,
{
    type Response = QuietStream<C::Response>;
    type Error = C::Error;
    type Future = MapOk<C::Future, fn(C::Response) -> QuietStream<C::Response>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let quiet: fn(C::Response) -> QuietStream<C::Response> = |stream| QuietStream { stream };
        self.0.call(uri).map_ok(quiet)
    }
}

pin_project! {
    /// A connection of `Quiet`'s: the stream as it is, its `Connected` without extras.
    pub struct QuietStream<S> {
        #[pin]
        stream: S,
    }
}

impl<S: Connection> Connection for QuietStream<S> {
    fn connected(&self) -> Connected {
        let full = self.stream.connected();
        let quiet = Connected::new().proxy(full.is_proxied());
        if full.is_negotiated_h2() {
            quiet.negotiated_h2()
        } else {
            quiet
        }
    }
}

impl<S: Read> Read for QuietStream<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<std::io::Result<()>> {
        self.project().stream.poll_read(cx, buf)
    }
}

impl<S: Write> Write for QuietStream<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.project().stream.poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.project().stream.poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.project().stream.poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        self.project().stream.poll_write_vectored(cx, bufs)
    }
}
