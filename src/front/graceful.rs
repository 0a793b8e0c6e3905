//! The graceful end of a listener's connections: when it begins, each connection is told to
//! finish what it is serving and close, and the listener waits until all have.
//!
//! Every poll of every connection passes through here, so a connection only reads a flag; its
//! task's waker is kept (and compared, not cloned, on later polls) so that the end can wake a
//! connection that sits idle. hyper_util's `GracefulShutdown` polls a channel on each poll
//! instead, taking that channel's lock several times per request.

use std::{
    collections::HashMap,
    pin::Pin,
    sync::{
        Arc, Mutex, MutexGuard,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    task::{Context, Poll, Waker},
};

use hyper_util::server::graceful::GracefulConnection;
use pin_project_lite::pin_project;
use tokio::sync::Notify;

/// The connections of one listener, and their graceful end.
#[derive(Default)]
pub struct Graceful {
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Shared {
    /// Set once, when the end begins.
    ending: AtomicBool,
    /// The connections being served, by number, with the waker of each one's task (a noop
    /// until it is first polled). Locked when a connection starts, is first polled, or ends.
    open: Mutex<HashMap<u64, Waker>>,
    next: AtomicU64,
    /// Told when a connection ends after the end began.
    closed: Notify,
}

impl Shared {
    fn open(&self) -> MutexGuard<'_, HashMap<u64, Waker>> {
        self.open
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Graceful {
    /// `connection`, counted until it ends, and told to close when the end begins.
    pub fn watch<C: GracefulConnection>(&self, connection: C) -> Watched<C> {
        let number = self.shared.next.fetch_add(1, Ordering::Relaxed);
        self.shared.open().insert(number, Waker::noop().clone());
        Watched {
            connection,
            shared: self.shared.clone(),
            number,
            waker: None,
            told: false,
        }
    }

    /// How many connections are open.
    pub fn count(&self) -> usize {
        self.shared.open().len()
    }

    /// Tells every connection to close once it has answered what it is serving, and waits
    /// until all have.
    pub async fn shutdown(&self) {
        self.shared.ending.store(true, Ordering::SeqCst);
        let wakers: Vec<Waker> = self.shared.open().values().cloned().collect();
        for waker in wakers {
            waker.wake();
        }
        loop {
            let closed = self.shared.closed.notified();
            tokio::pin!(closed);
            closed.as_mut().enable();
            if self.count() == 0 {
                return;
            }
            closed.await;
        }
    }
}

pin_project! {
    /// A connection being served, watched for the end.
    pub struct Watched<C> {
        #[pin]
        connection: C,
        shared: Arc<Shared>,
        number: u64,
        // The waker kept in `open`, once the connection has been polled.
        waker: Option<Waker>,
        // It has been told to close.
        told: bool,
    }

    impl<C> PinnedDrop for Watched<C> {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            this.shared.open().remove(this.number);
            if this.shared.ending.load(Ordering::SeqCst) {
                this.shared.closed.notify_waiters();
            }
        }
    }
}

impl<C: GracefulConnection> Future for Watched<C> {
    type Output = C::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        if !*this.told {
            if !this
                .waker
                .as_ref()
                .is_some_and(|kept| kept.will_wake(cx.waker()))
            {
                let waker = cx.waker().clone();
                this.shared.open().insert(*this.number, waker.clone());
                *this.waker = Some(waker);
            }
            // Read after the waker is kept: an end that began meanwhile is seen here, or
            // wakes the waker kept.
            if this.shared.ending.load(Ordering::SeqCst) {
                *this.told = true;
                this.connection.as_mut().graceful_shutdown();
            }
        }
        this.connection.poll(cx)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use http_body_util::Empty;
    use hyper::{Response, body::Bytes, service::service_fn};
    use hyper_util::rt::{TokioExecutor, TokioIo};

    use super::*;

    /// An idle kept-alive connection is closed by the end, and `shutdown` returns once it
    /// has; a connection is counted from its start to its end.
    #[tokio::test]
    async fn the_end_closes_idle_connections_and_waits_for_them() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let graceful = Arc::new(Graceful::default());
        let serving = graceful.clone();
        tokio::spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            let service = service_fn(|_| async {
                Ok::<_, std::convert::Infallible>(Response::new(Empty::<Bytes>::new()))
            });
            let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            let connection = builder
                .serve_connection_with_upgrades(TokioIo::new(stream), service)
                .into_owned();
            let _ = serving.watch(connection).await;
        });
        let stream = tokio::net::TcpStream::connect(address).await.unwrap();
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .unwrap();
        let client = tokio::spawn(connection);
        let request = http::Request::get("/").body(Empty::<Bytes>::new()).unwrap();
        assert_eq!(sender.send_request(request).await.unwrap().status(), 200);
        assert_eq!(graceful.count(), 1, "the kept-alive connection is open");
        tokio::time::timeout(Duration::from_secs(5), graceful.shutdown())
            .await
            .expect("the idle connection closes when told to");
        assert_eq!(graceful.count(), 0);
        // The client sees its connection end.
        let ended = tokio::time::timeout(Duration::from_secs(5), client).await;
        assert!(ended.is_ok());
    }
}
