//! Replies of the MCP endpoint: plain statuses, single JSON-RPC messages as JSON, and event
//! streams. A request's stream carries what is sent to the client while the request is served
//! and ends with its answer; the work of the request runs inside the stream's body, so a
//! client that goes away takes its request with it.

use std::{
    collections::VecDeque,
    pin::Pin,
    sync::LazyLock,
    task::{Context, Poll, ready},
    time::Duration,
};

use axum::body::Body;
use bytes::Bytes;
use futures::future::BoxFuture;
use http::{HeaderMap, HeaderValue, Response, StatusCode, header};
use http_body::Frame;
use tokio::{sync::mpsc, time::Sleep};

use super::checks::{EVENT_STREAM, JSON};
use crate::downstream::PipeReceiver;
use crate::wire::{self, Answer, Outcome, sse};

/// How long a stream may stay silent before a comment keeps it open.
const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// Tells a buffering reverse proxy (nginx) to pass events on as they come.
const X_ACCEL_BUFFERING: http::HeaderName = http::HeaderName::from_static("x-accel-buffering");
/// The reconnection delay announced to clients of session streams.
pub const RETRY_MS: u64 = 3000;

/// A reply that refuses a request, boxed: it is the error of the checks that make one.
pub type RefusalResponse = Box<Response<Body>>;

/// A refusal of the transport (before or beside JSON-RPC): `status` with a JSON-RPC error
/// body without id, as MCP's SDKs answer: -32001 for an unknown session, else -32000.
pub fn refusal(status: StatusCode, message: &str) -> Response<Body> {
    let code = if status == StatusCode::NOT_FOUND {
        -32001
    } else {
        -32000
    };
    error(status, None, code, message)
}

/// `refusal`, with `Retry-After` (whole seconds, at least one).
pub fn refusal_retry(
    status: StatusCode,
    message: &str,
    retry_after: std::time::Duration,
) -> Response<Body> {
    let mut response = refusal(status, message);
    let seconds = retry_after.as_secs_f64().ceil().max(1.0) as u64;
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    response
}

/// One JSON-RPC message as the whole reply.
pub fn json(status: StatusCode, message: Bytes) -> Response<Body> {
    let mut response = Response::new(Body::from(message));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(JSON));
    response
}

/// A JSON-RPC error as the whole reply.
pub fn error(status: StatusCode, id: Option<&str>, code: i32, message: &str) -> Response<Body> {
    json(status, wire::write::error(id, code, message, None))
}

/// `202 Accepted`, for notifications and answers.
pub fn accepted() -> Response<Body> {
    let mut response = Response::new(Body::empty());
    *response.status_mut() = StatusCode::ACCEPTED;
    response
}

/// An empty `405`, naming the methods there are.
pub fn method_not_allowed(allowed: &'static str) -> Response<Body> {
    let mut response = refusal(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed");
    response
        .headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static(allowed));
    response
}

/// The HTTP status of a 2026-07-28 reply that is `answer`: errors of the request's
/// lifecycle are 400, an unknown method 404, everything else 200.
pub fn modern_status(answer: &Answer, meta_malformed: bool) -> StatusCode {
    match answer.code() {
        // Unsupported version, missing client capability, headers that disagree with the body.
        Some(-32022..=-32020) => StatusCode::BAD_REQUEST,
        Some(-32602) if meta_malformed => StatusCode::BAD_REQUEST,
        Some(-32601) => StatusCode::NOT_FOUND,
        _ => StatusCode::OK,
    }
}

/// The reply to an answer that refuses a call beyond a quota: 429 with `Retry-After` and the
/// JSON-RPC error as the body; `None` for any other answer.
pub fn beyond_quota(answer: &Answer) -> Option<Response<Body>> {
    let Outcome::Error {
        retry_after: Some(retry_after),
        ..
    } = answer.outcome
    else {
        return None;
    };
    let seconds = retry_after.as_secs().max(1);
    let mut response = json(StatusCode::TOO_MANY_REQUESTS, answer.message.clone());
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    Some(response)
}

/// The work of a request: resolves to its answer.
pub type Work = BoxFuture<'static, Answer>;

/// How a request's reply begins.
pub enum Begun {
    /// The answer came before anything else: the whole reply is this one message.
    Answered(Answer),
    /// Something comes before the answer: the reply is a stream.
    Streaming(EventStream),
}

/// Runs a request's work until its reply can begin: the reply's headers wait for its first
/// content, so that a quick answer goes out with them in one write. A session's stream
/// begins within two `grace::STEP`s at the latest: its client may count requests in flight until
/// their replies begin (rmcp's client allows 16), and must not wait for slow calls to end.
pub async fn begin(ids: EventIds, mut work: Work, mut messages: PipeReceiver) -> Begun {
    let grace = async {
        match ids {
            EventIds::Request(_) => tokio::time::sleep_until(super::grace::ends()).await,
            EventIds::None | EventIds::Standalone | EventIds::Framed => {
                std::future::pending().await
            }
        }
    };
    tokio::select! {
        biased;
        Some(first) = messages.recv() => {
            Begun::Streaming(EventStream::request(ids, Some(first), work, messages))
        }
        answer = &mut work => {
            // What the request sent just before it finished goes out before its answer.
            let mut sent = Vec::new();
            while let Some(message) = messages.try_recv() {
                sent.push(message);
            }
            if sent.is_empty() {
                return Begun::Answered(answer);
            }
            let mut stream = EventStream::new(ids, Source::Ended);
            for message in sent.iter().chain([&answer.message]) {
                stream.push_message(message);
            }
            Begun::Streaming(stream)
        }
        _ = grace => Begun::Streaming(EventStream::request(ids, None, work, messages)),
    }
}

/// How a stream names its events.
#[derive(Clone, Copy)]
pub enum EventIds {
    /// No ids (2026-07-28 replies, which cannot be resumed).
    None,
    /// `{index}/{stream}` on the `stream`th request stream of a session.
    Request(u64),
    /// `{index}` on a session's standalone stream.
    Standalone,
    /// The messages come as whole events with their ids (a standalone stream whose events a
    /// shared store keeps, under the store's ids).
    Framed,
}

/// An event id, `{index}` or `{index}/{stream}`, written without allocating.
struct EventId {
    text: [u8; EventId::MAX_LEN],
    len: usize,
}

impl EventId {
    /// Two `u64`s and a slash.
    const MAX_LEN: usize = 41;

    fn new(index: u64, stream: Option<u64>) -> Self {
        let mut id = Self {
            text: [0; Self::MAX_LEN],
            len: 0,
        };
        id.push(itoa::Buffer::new().format(index).as_bytes());
        if let Some(stream) = stream {
            id.push(b"/");
            id.push(itoa::Buffer::new().format(stream).as_bytes());
        }
        id
    }

    fn push(&mut self, bytes: &[u8]) {
        self.text[self.len..self.len + bytes.len()].copy_from_slice(bytes);
        self.len += bytes.len();
    }

    fn as_str(&self) -> &str {
        // Digits and a slash.
        std::str::from_utf8(&self.text[..self.len]).unwrap_or_default()
    }
}

/// The body of an event stream. What is ready at once goes out in one piece: a request whose
/// answer comes quickly is written with its priming event in one write.
pub struct EventStream {
    /// The priming event, until it goes out: with the first message of a request's stream, at
    /// once on a standalone one.
    priming: Option<Bytes>,
    ready: VecDeque<Bytes>,
    source: Source,
    ids: EventIds,
    next_index: u64,
    keep_alive: Option<Pin<Box<Sleep>>>,
    /// The open-streams gauge, while this stream is counted in it.
    counted: Option<prometheus::IntGauge>,
}

impl Drop for EventStream {
    fn drop(&mut self) {
        if let Some(gauge) = &self.counted {
            gauge.dec();
        }
    }
}

enum Source {
    /// A request being served: what it sends the client, then its answer.
    Request {
        work: Option<Work>,
        messages: PipeReceiver,
    },
    /// A standalone stream: messages until the session lets go of it.
    Channel(mpsc::Receiver<Bytes>),
    Ended,
}

impl EventStream {
    /// The stream of a request: `first` (if the request already sent something), then what
    /// `messages` brings, then the answer `work` resolves to.
    pub fn request(
        ids: EventIds,
        first: Option<Bytes>,
        work: Work,
        messages: PipeReceiver,
    ) -> Self {
        let mut stream = Self::new(
            ids,
            Source::Request {
                work: Some(work),
                messages,
            },
        );
        if let Some(first) = first {
            stream.push_message(&first);
        }
        stream
    }

    /// A standalone stream fed by `messages`.
    pub fn channel(ids: EventIds, messages: mpsc::Receiver<Bytes>) -> Self {
        Self::new(ids, Source::Channel(messages))
    }

    /// A stream of one message, written with its priming event (if it has one) in one piece.
    pub fn single(ids: EventIds, message: Bytes) -> Self {
        let mut stream = Self::unprimed(ids, Source::Ended);
        let priming = stream.has_priming().then(|| stream.next_id());
        let priming = priming
            .as_ref()
            .map(|id| id.as_ref().map_or("", EventId::as_str));
        let id = stream.next_id();
        let id = id.as_ref().map(EventId::as_str);
        // Sized exactly (for an answer without line breaks), so that `freeze` keeps it as it is.
        let mut out = Vec::with_capacity(
            priming.map_or(0, |priming| sse::priming_event_len(priming, RETRY_MS))
                + sse::message_event_len(id, &message),
        );
        if let Some(priming) = priming {
            sse::write_priming_event(&mut out, priming, RETRY_MS);
        }
        sse::write_message_event(&mut out, id, &message);
        stream.ready.push_back(wire::freeze(out));
        stream
    }

    /// A stream with nothing in it, ended at once.
    pub fn ended() -> Self {
        Self::new(EventIds::None, Source::Ended)
    }

    fn new(ids: EventIds, source: Source) -> Self {
        let mut stream = Self::unprimed(ids, source);
        if stream.has_priming() {
            // A priming event: an id to resume from, and how long to wait before reconnecting.
            let id = stream.next_id();
            let priming = sse::priming_event(id.as_ref().map_or("", EventId::as_str), RETRY_MS);
            match ids {
                EventIds::Request(_) => stream.priming = Some(priming),
                _ => stream.ready.push_back(priming),
            }
        }
        stream
    }

    fn unprimed(ids: EventIds, source: Source) -> Self {
        Self {
            priming: None,
            ready: VecDeque::new(),
            source,
            ids,
            next_index: 0,
            keep_alive: None,
            counted: None,
        }
    }

    /// Whether the stream begins with a priming event: all but 2026-07-28 replies do.
    fn has_priming(&self) -> bool {
        !matches!(self.ids, EventIds::None)
    }

    /// Counts this stream in `gauge` while it is open.
    pub fn counted(mut self, gauge: &prometheus::IntGauge) -> Self {
        gauge.inc();
        self.counted = Some(gauge.clone());
        self
    }

    fn is_ended(&self) -> bool {
        matches!(self.source, Source::Ended)
    }

    /// The priming event (if still held) and every ready event, as one piece.
    fn take_ready(&mut self) -> Bytes {
        let size = self.priming.as_ref().map_or(0, Bytes::len)
            + self.ready.iter().map(Bytes::len).sum::<usize>();
        if self.priming.is_none() && self.ready.len() == 1 {
            return self.ready.pop_front().unwrap_or_default();
        }
        let mut out = Vec::with_capacity(size);
        if let Some(priming) = self.priming.take() {
            out.extend_from_slice(&priming);
        }
        for event in self.ready.drain(..) {
            out.extend_from_slice(&event);
        }
        wire::freeze(out)
    }

    fn next_id(&mut self) -> Option<EventId> {
        let index = self.next_index;
        self.next_index += 1;
        match self.ids {
            EventIds::None => None,
            EventIds::Request(stream) => Some(EventId::new(index, Some(stream))),
            EventIds::Standalone => Some(EventId::new(index, None)),
            EventIds::Framed => None,
        }
    }

    fn push_message(&mut self, message: &[u8]) {
        let id = self.next_id();
        self.ready.push_back(sse::message_event(
            id.as_ref().map(EventId::as_str),
            message,
        ));
    }

    /// The reply that streams this body.
    pub fn into_response(self) -> Response<Body> {
        // The headers are made once and copied: copying a small map costs less than filling
        // one (a hash and a probe per header).
        static HEADERS: LazyLock<HeaderMap> = LazyLock::new(|| {
            let mut headers = HeaderMap::with_capacity(3);
            headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(EVENT_STREAM));
            headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
            headers.insert(X_ACCEL_BUFFERING, HeaderValue::from_static("no"));
            headers
        });
        let mut response = Response::new(Body::new(self));
        *response.headers_mut() = HEADERS.clone();
        response
    }

    /// Moves whatever the source has ready into `ready`; `Ready(())` once something was moved
    /// or the source ended.
    fn poll_source(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        match &mut self.source {
            Source::Ended => Poll::Ready(()),
            Source::Channel(messages) => {
                match ready!(messages.poll_recv(cx)) {
                    Some(event) if matches!(self.ids, EventIds::Framed) => {
                        self.ready.push_back(event);
                    }
                    Some(message) => self.push_message(&message),
                    None => self.source = Source::Ended,
                }
                Poll::Ready(())
            }
            Source::Request { work, messages } => {
                if let Poll::Ready(Some(message)) = messages.poll_recv(cx) {
                    self.push_message(&message);
                    return Poll::Ready(());
                }
                let Some(pending) = work else {
                    self.source = Source::Ended;
                    return Poll::Ready(());
                };
                let answer = ready!(pending.as_mut().poll(cx));
                // What the request sent just before it finished goes out before its answer.
                let mut sent = Vec::new();
                while let Some(message) = messages.try_recv() {
                    sent.push(message);
                }
                self.source = Source::Ended;
                for message in sent {
                    self.push_message(&message);
                }
                self.push_message(&answer.message);
                Poll::Ready(())
            }
        }
    }
}

impl http_body::Body for EventStream {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        loop {
            // Everything the source has now goes out together.
            while !this.is_ended() && this.poll_source(cx).is_ready() {}
            if !this.ready.is_empty() || (this.is_ended() && this.priming.is_some()) {
                this.keep_alive = None;
                return Poll::Ready(Some(Ok(Frame::data(this.take_ready()))));
            }
            if this.is_ended() {
                return Poll::Ready(None);
            }
            let keep_alive = this
                .keep_alive
                .get_or_insert_with(|| Box::pin(tokio::time::sleep(KEEP_ALIVE)));
            ready!(keep_alive.as_mut().poll(cx));
            this.keep_alive = None;
            this.ready.push_back(Bytes::from_static(sse::KEEP_ALIVE));
        }
    }

    fn is_end_stream(&self) -> bool {
        self.is_ended() && self.ready.is_empty() && self.priming.is_none()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        if !self.is_ended() {
            return http_body::SizeHint::default();
        }
        // All there is is ready: its length is known, and no chunked encoding is needed.
        let len = self.priming.as_ref().map_or(0, Bytes::len)
            + self.ready.iter().map(Bytes::len).sum::<usize>();
        http_body::SizeHint::with_exact(len as u64)
    }
}

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt;

    use super::*;

    async fn events(stream: EventStream) -> Vec<sse::Event> {
        let body = stream.collect().await.unwrap().to_bytes();
        let mut reader = sse::Reader::new(1 << 20);
        reader.push(&body);
        let mut events = Vec::new();
        while let Some(event) = reader.next_event().unwrap() {
            events.push(event);
        }
        events
    }

    #[tokio::test]
    async fn a_request_stream_primes_then_passes_messages_then_the_answer() {
        let (sender, messages) = crate::downstream::pipe(4);
        let work: Work = Box::pin(async move {
            sender.send(Bytes::from_static(b"{\"n\":1}")).await.unwrap();
            sender.send(Bytes::from_static(b"{\"n\":2}")).await.unwrap();
            Answer::result(Bytes::from_static(b"{\"answer\":true}"))
        });
        let events = events(EventStream::request(
            EventIds::Request(7),
            None,
            work,
            messages,
        ))
        .await;
        assert_eq!(events.len(), 4);
        assert_eq!(events[0].id.as_deref(), Some("0/7"));
        assert_eq!(events[0].retry, Some(RETRY_MS));
        assert!(!events[0].has_data());
        assert_eq!(&events[1].data[..], b"{\"n\":1}");
        assert_eq!(events[3].id.as_deref(), Some("3/7"));
        assert_eq!(&events[3].data[..], b"{\"answer\":true}");
    }

    #[tokio::test]
    async fn a_single_answer_is_primed_and_numbered_as_a_stream_would_be() {
        let message = Bytes::from_static(b"{\"answer\":true}");
        let single = EventStream::single(EventIds::Request(7), message.clone());
        assert_eq!(single.ready.len(), 1, "one piece, to go out in one write");
        let primed = events(single).await;
        assert_eq!(primed.len(), 2);
        assert_eq!(primed[0].id.as_deref(), Some("0/7"));
        assert_eq!(primed[0].retry, Some(RETRY_MS));
        assert!(!primed[0].has_data());
        assert_eq!(primed[1].id.as_deref(), Some("1/7"));
        assert_eq!(primed[1].data, message);
        let modern = events(EventStream::single(EventIds::None, message.clone())).await;
        assert_eq!(modern.len(), 1);
        assert!(modern[0].id.is_none() && modern[0].retry.is_none());
        assert_eq!(modern[0].data, message);
    }

    #[tokio::test]
    async fn a_modern_stream_has_no_priming_and_no_ids() {
        let (_sender, messages) = crate::downstream::pipe(1);
        let work: Work = Box::pin(async { Answer::result(Bytes::from_static(b"{}")) });
        let first = Some(Bytes::from_static(b"{\"first\":1}"));
        let events = events(EventStream::request(EventIds::None, first, work, messages)).await;
        assert_eq!(events.len(), 2);
        assert!(events.iter().all(|e| e.id.is_none() && e.retry.is_none()));
    }

    #[test]
    fn modern_statuses_follow_the_error_code() {
        let error = |code: i32| Answer::error("1", code, "x");
        assert_eq!(modern_status(&error(-32601), false), StatusCode::NOT_FOUND);
        assert_eq!(
            modern_status(&error(-32022), false),
            StatusCode::BAD_REQUEST
        );
        assert_eq!(modern_status(&error(-32602), false), StatusCode::OK);
        assert_eq!(modern_status(&error(-32602), true), StatusCode::BAD_REQUEST);
        assert_eq!(modern_status(&error(-32603), false), StatusCode::OK);
        let result = Answer::result(Bytes::from_static(
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}",
        ));
        assert_eq!(modern_status(&result, true), StatusCode::OK);
    }
}
