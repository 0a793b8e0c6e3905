//! The client's connection as pingora's proxy writes to it. Writes wait in a small buffer
//! until pingora flushes (as on pingora's own listeners), and the proxy may put off the
//! next flush (`ClientStream::hold`) when it knows another one follows at once: so a POST's
//! streaming answer goes out as one send (header, event, end of stream) instead of three,
//! which costs both ends a wake-up and a system call each.

use std::{
    io,
    pin::Pin,
    sync::{
        Arc,
        atomic::{AtomicU32, AtomicU64, Ordering},
    },
    task::{Context, Poll},
};

use async_trait::async_trait;
use pingora::protocols::{
    GetProxyDigest, GetSocketDigest, GetTimingDigest, Peek, Shutdown, SocketDigest, Ssl,
    TimingDigest, UniqueID, UniqueIDType, l4::stream::Stream, raw_connect::ProxyDigest,
};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufWriter, ReadBuf};

/// What waits for a flush; a larger write goes straight on.
const BUFFER: usize = 16 * 1024;

#[derive(Debug)]
pub struct ClientStream {
    stream: BufWriter<Stream>,
    /// Flushes still to put off, each one followed by another flush for sure.
    held: AtomicU32,
    /// Bytes written so far: tells the proxy whether what it filtered is written yet.
    written: AtomicU64,
}

impl ClientStream {
    pub fn new(stream: Stream) -> Self {
        Self {
            stream: BufWriter::with_capacity(BUFFER, stream),
            held: AtomicU32::new(0),
            written: AtomicU64::new(0),
        }
    }

    /// The connection under a pingora session, if it is one of ours.
    pub fn of(stream: Option<&pingora::protocols::Stream>) -> Option<&Self> {
        stream?.as_ref().as_any().downcast_ref()
    }

    /// Puts off the next flush: the caller knows pingora flushes again right after it (or
    /// when the next piece of the same response comes), so both go out in one send.
    pub fn hold(&self) {
        self.held.fetch_add(1, Ordering::Relaxed);
    }

    /// The bytes written to the connection so far.
    pub fn written(&self) -> u64 {
        self.written.load(Ordering::Relaxed)
    }

    fn count(&self, written: &Poll<io::Result<usize>>) {
        if let Poll::Ready(Ok(n)) = written {
            self.written.fetch_add(*n as u64, Ordering::Relaxed);
        }
    }

    /// Takes one put-off flush, if there is one.
    fn skip_flush(&self) -> bool {
        self.held
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
            .is_ok()
    }
}

impl AsyncRead for ClientStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for ClientStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let written = Pin::new(&mut self.stream).poll_write(cx, buf);
        self.count(&written);
        written
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let written = Pin::new(&mut self.stream).poll_write_vectored(cx, bufs);
        self.count(&written);
        written
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.skip_flush() {
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

#[async_trait]
impl Shutdown for ClientStream {
    async fn shutdown(&mut self) {
        if let Err(error) = AsyncWriteExt::shutdown(&mut self.stream).await {
            tracing::debug!(%error, "a pass-through connection did not shut down cleanly");
        }
    }
}

impl UniqueID for ClientStream {
    fn id(&self) -> UniqueIDType {
        self.stream.get_ref().id()
    }
}

impl Ssl for ClientStream {}

impl Peek for ClientStream {}

impl GetTimingDigest for ClientStream {
    fn get_timing_digest(&self) -> Vec<Option<TimingDigest>> {
        self.stream.get_ref().get_timing_digest()
    }
}

impl GetProxyDigest for ClientStream {
    fn get_proxy_digest(&self) -> Option<Arc<ProxyDigest>> {
        self.stream.get_ref().get_proxy_digest()
    }
}

impl GetSocketDigest for ClientStream {
    fn get_socket_digest(&self) -> Option<Arc<SocketDigest>> {
        self.stream.get_ref().get_socket_digest()
    }
}
