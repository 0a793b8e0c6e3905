//! A connector for the pooled client that tells it only what it needs of each connection.

use std::{
    pin::Pin,
    task::{Context, Poll},
};

use futures::{TryFutureExt, future::MapOk};
use http::Uri;
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::client::legacy::connect::{Connected, Connection};
use pin_project_lite::pin_project;

/// A connector whose connections tell the client only what it needs of them (HTTP/2 agreed,
/// a proxy), not the addresses hyper_util would otherwise put into every response's
/// extensions: nothing reads them, and that costs three allocations per answer.
#[derive(Clone)]
pub struct Quiet<C>(pub C);

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
