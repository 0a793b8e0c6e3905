//! HTTP/1.1 connections to a plain-HTTP upstream, driven by the requests that use them.
//!
//! hyper's pooled client runs each connection as a task of its own: a request hands its
//! message to that task, is woken with the answer's head, and wakes the task again for each
//! piece of the body it reads, often while that task is still running on another thread,
//! which makes the runtime wake a third. Here a request takes an idle connection, polls it
//! from its own task while it waits for its answer and reads the body, and puts it back when
//! the body has ended: no task per connection, and no wake from one task to another.
//!
//! An answer whose reader was done before its end arrived (an event stream, whose end comes
//! after the answer's event) goes back with its connection, and is read to its end when the
//! connection is next taken.
//!
//! While any connection is idle, a sweep looks them over now and then: it closes those idle
//! past their time and those the upstream closed, which would otherwise wait, half closed,
//! for the next request.

use std::{
    collections::VecDeque,
    future::{Future, poll_fn},
    pin::{Pin, pin},
    sync::{
        Arc, Mutex, PoisonError, Weak,
        atomic::{AtomicBool, Ordering::SeqCst},
    },
    task::{Context, Poll, Waker},
    time::{Duration, Instant},
};

use bytes::Bytes;
use http::{HeaderValue, Request, Response, Uri, header};
use http_body::{Body, Frame, SizeHint};
use http_body_util::Full;
use hyper::{body::Incoming, client::conn::http1};
use hyper_util::{client::legacy::connect::HttpConnector, rt::TokioIo};
use tokio::net::TcpStream;
use tower::Service;

use super::BoxError;
use crate::wake::NotedWakes;

/// The most idle connections kept; past it the longest idle is closed.
const MAX_IDLE: usize = 512;
/// How long a connection may stay idle before it is closed.
const IDLE_FOR: Duration = Duration::from_secs(90);
/// How many idle connections whose last answer is still ending are passed over before a
/// request opens a connection of its own.
const PASS_OVER: usize = 4;
/// The most frames of an answer's unread end read when its connection is taken.
const REST_FRAMES: usize = 16;
/// How often idle connections are looked over while there are any.
const SWEEP_EVERY: Duration = if cfg!(test) {
    Duration::from_millis(50)
} else {
    Duration::from_secs(10)
};

/// The idle connections to one upstream, and how to open another.
pub struct Pool {
    connector: HttpConnector,
    /// The upstream's scheme and authority (where connections go).
    target: Uri,
    /// `Host`, for a request that does not name it.
    host: HeaderValue,
    /// The most recently used last: it is taken first, the longest idle dropped first.
    idle: Mutex<VecDeque<Idle>>,
    /// Whether a sweep is due (set and cleared under `idle`'s lock).
    sweeping: AtomicBool,
}

struct Idle {
    link: Box<Link>,
    /// The unread end of the connection's last answer.
    rest: Option<Incoming>,
    /// When it is closed if still unused (or its answer not ended).
    until: Instant,
}

impl Pool {
    /// A pool for `uri`'s authority (an `http` URI), connecting with `connector`.
    pub fn new(connector: HttpConnector, uri: &Uri) -> Option<Self> {
        let authority = uri.authority()?;
        let target = Uri::builder()
            .scheme("http")
            .authority(authority.clone())
            .path_and_query("/")
            .build()
            .ok()?;
        Some(Self {
            connector,
            target,
            host: super::host_of(uri)?,
            idle: Mutex::new(VecDeque::new()),
            sweeping: AtomicBool::new(false),
        })
    }

    /// Sends `request` (whose URI's path is the one used) on an idle connection, or a new
    /// one. A request an idle connection turned out to be closed for goes on another.
    pub async fn send(
        self: &Arc<Self>,
        mut request: Request<Full<Bytes>>,
    ) -> Result<Response<Driven>, BoxError> {
        let path = request.uri().path_and_query().cloned();
        *request.uri_mut() = path.map_or_else(|| Uri::from_static("/"), Uri::from);
        request
            .headers_mut()
            .entry(header::HOST)
            .or_insert_with(|| self.host.clone());
        // One future for all of it, not one per step: every step would hold the request.
        loop {
            let (mut link, reused) = match self.take() {
                Some(link) => (link, true),
                // Boxed: opening a connection is rare, and its states are large.
                None => (Box::pin(self.connect()).await?, false),
            };
            let ready = poll_fn(|cx| link.drive(cx, |cx, sender| sender.poll_ready(cx))).await;
            let unsent = if matches!(ready, Some(Ok(()))) {
                // Handing the request over wakes the connection: it is polled next anyway.
                let (sent, _) = link.wakes.round(|_| link.sender.try_send_request(request));
                let mut sent = pin!(sent);
                match poll_fn(|cx| link.drive(cx, |cx, _| sent.as_mut().poll(cx))).await {
                    Some(Ok(response)) => {
                        let pool = self.clone();
                        return Ok(response.map(|body| Driven {
                            body,
                            link: Some(link),
                            pool,
                        }));
                    }
                    Some(Err(mut error)) => match error.take_message() {
                        Some(request) => request,
                        None => return Err(error.into_error().into()),
                    },
                    None => return Err("the connection closed before the answer came".into()),
                }
            } else {
                request
            };
            // The connection had closed before the request went: another one.
            if !reused {
                return Err("the connection closed before the request went".into());
            }
            request = unsent;
        }
    }

    async fn connect(&self) -> Result<Box<Link>, BoxError> {
        let io = self.connector.clone().call(self.target.clone()).await?;
        let (sender, conn) = http1::Builder::new().handshake(io).await?;
        Ok(Box::new(Link::new(sender, conn)))
    }

    /// The most recently used idle connection that is ready for a request.
    fn take(&self) -> Option<Box<Link>> {
        let now = Instant::now();
        let mut passed = 0;
        loop {
            let mut idle = self.lock().pop_back()?;
            if idle.until < now {
                continue;
            }
            match idle.read_rest() {
                Rest::Ended => return Some(idle.link),
                Rest::Broken => {}
                Rest::Coming => {
                    self.lock().push_front(idle);
                    passed += 1;
                    if passed == PASS_OVER {
                        return None;
                    }
                }
            }
        }
    }

    /// Keeps `link` for the next request, with the unread end of its answer (`rest`), for
    /// `keep` at most.
    fn put(self: &Arc<Self>, link: Box<Link>, rest: Option<Incoming>, keep: Duration) {
        // The request that used it is done: a wake must not reach its task.
        link.wakes.forget();
        let now = Instant::now();
        let mut closed = Vec::new();
        {
            let mut idle = self.lock();
            while idle
                .front()
                .is_some_and(|oldest| oldest.until < now || idle.len() >= MAX_IDLE)
            {
                closed.extend(idle.pop_front());
            }
            idle.push_back(Idle {
                link,
                rest,
                until: now + keep,
            });
            // Read and set under the lock, as the sweep clears it: no swap needed.
            if !self.sweeping.load(SeqCst)
                && let Ok(runtime) = tokio::runtime::Handle::try_current()
            {
                self.sweeping.store(true, SeqCst);
                drop(runtime.spawn(sweep(Arc::downgrade(self))));
            }
        }
        // Their sockets are closed here, not under the lock.
        drop(closed);
    }

    /// Closes the idle connections past their time and those that have ended, reads what
    /// has come of answers' ends, and says whether any connection is still idle (when none
    /// is, the sweep is no longer due).
    fn sweep_once(&self) -> bool {
        let now = Instant::now();
        let mut closed = Vec::new();
        let any = {
            let mut idle = self.lock();
            let mut kept = VecDeque::with_capacity(idle.len());
            for mut entry in idle.drain(..) {
                if entry.until >= now && entry.is_open() {
                    kept.push_back(entry);
                } else {
                    closed.push(entry);
                }
            }
            *idle = kept;
            let any = !idle.is_empty();
            self.sweeping.store(any, SeqCst);
            any
        };
        drop(closed);
        any
    }

    /// How many connections are idle, and whether a sweep is due.
    #[cfg(test)]
    pub(super) fn idle_state(&self) -> (usize, bool) {
        let idle = self.lock();
        (idle.len(), self.sweeping.load(SeqCst))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Idle>> {
        self.idle.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Sweeps `pool`'s idle connections every `SWEEP_EVERY` until none is left, or the pool is
/// gone (its upstream removed or replaced by a reload).
async fn sweep(pool: Weak<Pool>) {
    loop {
        tokio::time::sleep(SWEEP_EVERY).await;
        match pool.upgrade() {
            Some(pool) if pool.sweep_once() => {}
            _ => return,
        }
    }
}

impl Idle {
    /// Reads what has come of its answer's unread end, without waiting, and keeps what is
    /// still coming; `Ended` when nothing is left of it.
    fn read_rest(&mut self) -> Rest {
        let Some(mut rest) = self.rest.take() else {
            return Rest::Ended;
        };
        let read = self.link.read_rest(&mut rest);
        if matches!(read, Rest::Coming) {
            self.rest = Some(rest);
        }
        read
    }

    /// Whether its connection is still open, with its answer's end read as far as it has
    /// come.
    fn is_open(&mut self) -> bool {
        match self.read_rest() {
            Rest::Broken => false,
            // Reading it polled the connection, and found it open.
            Rest::Coming => true,
            Rest::Ended => {
                let mut cx = Context::from_waker(Waker::noop());
                let ready = (self.link).drive(&mut cx, |cx, sender| sender.poll_ready(cx));
                matches!(ready, Poll::Ready(Some(Ok(())))) && self.link.conn.is_some()
            }
        }
    }
}

enum Rest {
    Ended,
    Coming,
    Broken,
}

/// One connection: hyper's two halves of it, and the waker it is polled with.
struct Link {
    sender: http1::SendRequest<Full<Bytes>>,
    /// `None` once it has ended (closed, or failed): dropped then, which hands requests it
    /// had not sent back to their senders.
    conn: Option<http1::Connection<TokioIo<TcpStream>, Full<Bytes>>>,
    /// The waker they are polled with: a wake that comes while the request's task is polling
    /// them (the body asking the connection for more, the connection handing over the answer)
    /// has them polled again at once; only other wakes (the socket, from the runtime's
    /// driver) reach the task.
    wakes: NotedWakes,
}

impl Link {
    fn new(
        sender: http1::SendRequest<Full<Bytes>>,
        conn: http1::Connection<TokioIo<TcpStream>, Full<Bytes>>,
    ) -> Self {
        Self {
            sender,
            conn: Some(conn),
            wakes: NotedWakes::default(),
        }
    }

    /// Polls the connection, then `step`, until `step` is ready or nothing more can happen
    /// before a wake from outside. `None` if the connection ended with `step` still waiting.
    fn drive<T>(
        &mut self,
        cx: &mut Context<'_>,
        mut step: impl FnMut(&mut Context<'_>, &mut http1::SendRequest<Full<Bytes>>) -> Poll<T>,
    ) -> Poll<Option<T>> {
        self.wakes.register(cx.waker());
        loop {
            let (conn, sender) = (&mut self.conn, &mut self.sender);
            let (polled, again) = self.wakes.round(|inner| {
                if let Some(live) = conn.as_mut()
                    && Pin::new(live).poll(inner).is_ready()
                {
                    *conn = None;
                }
                step(inner, sender)
            });
            if let Poll::Ready(out) = polled {
                return Poll::Ready(Some(out));
            }
            if !again {
                return if self.conn.is_none() {
                    Poll::Ready(None)
                } else {
                    Poll::Pending
                };
            }
        }
    }

    /// Reads what has come of `rest`, without waiting for more. An answer that still brings
    /// frame after frame once its reader is done (`REST_FRAMES`) is not waited for: its
    /// connection is closed rather than hold up the request that found it.
    fn read_rest(&mut self, rest: &mut Incoming) -> Rest {
        let mut cx = Context::from_waker(Waker::noop());
        for _ in 0..REST_FRAMES {
            match self.drive(&mut cx, |cx, _| Pin::new(&mut *rest).poll_frame(cx)) {
                Poll::Ready(Some(Some(Ok(_)))) => continue,
                Poll::Ready(Some(None)) => return Rest::Ended,
                Poll::Ready(Some(Some(Err(_))) | None) => return Rest::Broken,
                Poll::Pending => return Rest::Coming,
            }
        }
        Rest::Broken
    }
}

/// An answer's body, read by polling its connection too; the connection goes back to its
/// pool when the body ends, and is closed if the body is dropped before (unless `park`ed).
pub struct Driven {
    body: Incoming,
    link: Option<Box<Link>>,
    pool: Arc<Pool>,
}

impl Driven {
    /// The reader is done before the end: the connection goes back with what is left, read
    /// when it is next taken, if it ends within `wait`.
    pub fn park(self, wait: Duration) {
        if let Some(link) = self.link {
            self.pool.put(link, Some(self.body), wait);
        }
    }
}

impl Body for Driven {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        let Some(link) = this.link.as_mut() else {
            return Pin::new(&mut this.body).poll_frame(cx).map_err(Into::into);
        };
        let body = &mut this.body;
        match link.drive(cx, |cx, _| Pin::new(&mut *body).poll_frame(cx)) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Some(Some(Ok(frame)))) => Poll::Ready(Some(Ok(frame))),
            Poll::Ready(Some(None)) => {
                if let Some(link) = this.link.take() {
                    this.pool.put(link, None, IDLE_FOR);
                }
                Poll::Ready(None)
            }
            Poll::Ready(Some(Some(Err(error)))) => {
                this.link = None;
                Poll::Ready(Some(Err(error.into())))
            }
            Poll::Ready(None) => {
                this.link = None;
                Poll::Ready(Some(Err(
                    "the connection closed before the answer ended".into()
                )))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
