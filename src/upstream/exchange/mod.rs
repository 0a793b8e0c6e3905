//! The raw path to an upstream: a hot request goes out as the bytes it came in (only its id and
//! name rewritten) and its answer comes back as bytes. To a streamable-HTTP upstream it is
//! posted (`post`) on the upstream session rmcp's worker opened, over a keep-alive connection
//! (`raw_client`), and answered by a JSON body or an event stream; to a stdio upstream it is a
//! line written between rmcp's (`lines`); to a legacy SSE upstream it is posted beside rmcp's
//! messages and answered on the session's stream (`sse::SseTap`). What the upstream sends about the request besides
//! the answer (progress, log messages, requests for the client) is handed to the caller one
//! message at a time.
//!
//! rmcp keeps everything else: the handshake, the standalone stream, notifications, answers to
//! the upstream's requests, re-initialization, and deleting the session at the end.

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use bytes::Bytes;
use http::{HeaderName, HeaderValue, StatusCode, Uri};
use http_body_util::BodyExt;

mod post;

use post::HttpRoute;

use super::{
    lines::{Ended, Lines, Waiting},
    raw_client::{RawClient, UpstreamBody},
    session_slot::SessionSlot,
    sse::SseTap,
};
use crate::{
    error::with_causes,
    hook::{HookError, RequestHook},
    protocol::Era,
    wire::{
        self,
        media::{is_event_stream, is_json},
        sse,
    },
};

/// The largest answer or event accepted from an upstream (rmcp's limit too).
const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;
/// How often a stream that ended before its answer is resumed (with `Last-Event-ID`).
const RESUME_ATTEMPTS: usize = 2;
/// The wait before resuming when the upstream gave no `retry`.
const DEFAULT_RETRY: Duration = Duration::from_millis(250);
/// How long the end of an answered stream is awaited (see `Exchange::finish`).
const FINISH_WAIT: Duration = Duration::from_secs(1);
/// The most of an error body kept for the error message.
const ERROR_BODY_PREVIEW: usize = 300;

/// Where raw request ids start: past every id rmcp's `u32` counter gives its own requests.
const RAW_IDS: u64 = 1 << 32;

/// The failure of a request to a stdio process that ended.
fn ended(_: Ended) -> ExchangeError {
    ExchangeError::Transport("the process ended before it answered".into())
}

/// Why a raw exchange failed.
#[derive(Debug, thiserror::Error)]
pub enum ExchangeError {
    /// The upstream refused the request for want of authorization (after one renewal).
    #[error("it refused the request with HTTP {status}")]
    Refused { status: u16 },
    /// The upstream no longer knows the session (it restarted, or dropped it).
    #[error("it no longer knows the session")]
    SessionGone,
    #[error("it answered HTTP {status}: {body}")]
    Status { status: u16, body: String },
    /// The request could not be sent, or the answer not read.
    #[error("{0}")]
    Transport(String),
    /// What came back is not an answer to the request.
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Hook(#[from] HookError),
}

impl ExchangeError {
    /// Whether the failure says the connection itself is broken.
    pub fn is_transport_failure(&self) -> bool {
        matches!(self, ExchangeError::Transport(_))
    }
}

/// How raw requests reach one upstream connection.
pub struct RawLink {
    era: Era,
    next_id: AtomicU64,
    route: Route,
    /// What a 2026-07-28 upstream wants in every request's `_meta` (the protocol version and
    /// the client's identity and capabilities), for the gateway's own requests.
    context: Option<serde_json::Map<String, serde_json::Value>>,
}

/// The way a raw request goes.
enum Route {
    /// A POST of its own (streamable HTTP).
    Http(Box<HttpRoute>),
    /// A line written between rmcp's (stdio).
    Lines(Lines),
    /// A message posted beside rmcp's, answered on the session's event stream (legacy SSE).
    Sse(SseTap),
}

/// One request on its way: where it goes and what it is.
pub struct Outgoing<'a> {
    /// The upstream request id (one rmcp never uses for its own requests).
    pub id: i64,
    pub method: &'a str,
    /// For `Mcp-Name` (2026-07-28 upstreams): the tool or prompt name, or resource URI.
    pub name: &'a str,
    /// The whole JSON-RPC request.
    pub body: Bytes,
    /// Headers of the client's request the upstream's rules pass on.
    pub forwarded: &'a [(HeaderName, HeaderValue)],
    /// For 2026-07-28 upstreams: the `Mcp-Param-*` headers of a tool call's annotated
    /// arguments (see `catalog::header_values`).
    pub params: &'a [(HeaderName, HeaderValue)],
    /// The upstream session to send it in, if not the connection's own: a task lives in the
    /// session that created it, whichever replica or connection asks after it.
    pub session: Option<&'a str>,
}

/// What the upstream sent next on an exchange.
pub enum Step {
    /// The answer: the JSON-RPC message, and whether it is a result or an error.
    Answer(Answer),
    /// Another message (a notification, or a request for the client), as JSON text.
    Message(Bytes),
}

/// An upstream's answer, as the bytes it came in.
pub struct Answer {
    message: Bytes,
    /// Where its `result` (or `error`) is in `message`.
    payload: std::ops::Range<usize>,
    pub is_error: bool,
}

impl Answer {
    /// The answer `message`, whose `result` or `error` is `payload` (a slice of it).
    fn new(message: Bytes, payload: &str, is_error: bool) -> Self {
        let start = payload.as_ptr() as usize - message.as_ptr() as usize;
        Self {
            payload: start..start + payload.len(),
            message,
            is_error,
        }
    }

    /// The `result` (or `error`) JSON text of the answer.
    pub fn payload(&self) -> &str {
        // A slice of what serde_json read as UTF-8 text, at a value's boundaries.
        std::str::from_utf8(&self.message[self.payload.clone()]).unwrap_or("{}")
    }
}

impl RawLink {
    pub fn new(
        client: RawClient,
        uri: Uri,
        era: Era,
        version: &str,
        session: Arc<SessionSlot>,
        hook: Arc<dyn RequestHook>,
        stream_idle: Duration,
    ) -> Option<Self> {
        let route = HttpRoute::new(era, client, uri, version, session, hook, stream_idle)?;
        Some(Self {
            era,
            next_id: AtomicU64::new(RAW_IDS),
            route: Route::Http(Box::new(route)),
            context: None,
        })
    }

    /// The raw path of a stdio connection, through the `lines` it taps.
    pub fn lines(era: Era, lines: Lines) -> Self {
        Self {
            era,
            next_id: AtomicU64::new(RAW_IDS),
            route: Route::Lines(lines),
            context: None,
        }
    }

    /// The raw path of a legacy SSE connection, through the `tap` on its event stream.
    pub fn sse(era: Era, tap: SseTap) -> Self {
        Self {
            era,
            next_id: AtomicU64::new(RAW_IDS),
            route: Route::Sse(tap),
            context: None,
        }
    }

    /// This link, putting `context` in the `_meta` of the gateway's own requests (a
    /// 2026-07-28 upstream's lifecycle keys).
    pub fn with_context(mut self, context: serde_json::Map<String, serde_json::Value>) -> Self {
        self.context = Some(context);
        self
    }

    pub fn era(&self) -> Era {
        self.era
    }

    /// A fresh id for a raw request: above the range rmcp numbers its own requests in
    /// (`u32`), and below 2^53, so that servers written in JavaScript read it exactly.
    pub fn next_id(&self) -> i64 {
        self.next_id.fetch_add(1, Ordering::Relaxed) as i64
    }

    /// Sends a request of the gateway's own (`method` with `params`, JSON text) and reads it to
    /// its answer. What the upstream sends on the way is handed to `on_message`.
    pub async fn request(
        &self,
        method: &str,
        mut params: serde_json::Value,
        mut on_message: impl FnMut(Bytes),
    ) -> Result<Answer, ExchangeError> {
        if let (Some(context), Some(params)) = (&self.context, params.as_object_mut()) {
            let meta = params
                .entry("_meta")
                .or_insert_with(|| serde_json::Value::Object(Default::default()));
            if let Some(meta) = meta.as_object_mut() {
                meta.extend(context.iter().map(|(k, v)| (k.clone(), v.clone())));
            }
        }
        let id = self.next_id();
        let params = params.to_string();
        let body = wire::write::request(
            itoa::Buffer::new().format(id),
            method,
            Some(params.as_bytes()),
        )
        .into();
        let outgoing = Outgoing {
            id,
            method,
            name: "",
            body,
            forwarded: &[],
            params: &[],
            session: None,
        };
        let mut exchange = self.start(&outgoing).await?;
        loop {
            match exchange.next().await? {
                Step::Answer(answer) => {
                    exchange.finish();
                    return Ok(answer);
                }
                Step::Message(message) => on_message(message),
            }
        }
    }

    /// Sends `outgoing` and waits (over HTTP) for the answer's headers.
    pub async fn start(&self, outgoing: &Outgoing<'_>) -> Result<Exchange<'_>, ExchangeError> {
        match &self.route {
            Route::Http(http) => http.start(self, outgoing).await,
            Route::Lines(lines) => Ok(Exchange::waiting(
                self,
                outgoing.id,
                lines.send(outgoing.id, &outgoing.body).map_err(ended)?,
            )),
            Route::Sse(tap) => {
                let waiting = tap.send(outgoing.id, outgoing.body.clone()).await.map_err(
                    |error| match error {
                        super::SseError::Status { status, .. }
                            if matches!(status.as_u16(), 401 | 403) =>
                        {
                            ExchangeError::Refused {
                                status: status.as_u16(),
                            }
                        }
                        other => ExchangeError::Transport(crate::error::cause(&other)),
                    },
                )?;
                Ok(Exchange::waiting(self, outgoing.id, waiting))
            }
        }
    }

    fn http(&self) -> Option<&HttpRoute> {
        match &self.route {
            Route::Http(http) => Some(http),
            Route::Lines(_) | Route::Sse(_) => None,
        }
    }
}

/// A request sent on the raw path, read until its answer.
pub struct Exchange<'a> {
    link: &'a RawLink,
    /// The request id, to know the answer by.
    id: i64,
    session: Option<Arc<HeaderValue>>,
    body: Body,
    reader: sse::Reader,
    last_event: Option<String>,
    retry: Option<Duration>,
    resumes: usize,
}

enum Body {
    /// A JSON answer, read whole.
    Json(Option<Bytes>),
    Stream(UpstreamBody),
    /// An answer yet to come on a stdio connection.
    Waiting(Waiting),
}

impl<'a> Exchange<'a> {
    /// A request written to a stdio connection: only its answer comes this way.
    fn waiting(link: &'a RawLink, id: i64, waiting: Waiting) -> Self {
        Self {
            link,
            id,
            session: None,
            body: Body::Waiting(waiting),
            reader: sse::Reader::new(0),
            last_event: None,
            retry: None,
            resumes: 0,
        }
    }

    async fn begin(
        link: &'a RawLink,
        id: i64,
        session: Option<Arc<HeaderValue>>,
        response: http::Response<UpstreamBody>,
    ) -> Result<Self, ExchangeError> {
        let status = response.status();
        if status == StatusCode::NOT_FOUND && session.is_some() {
            return Err(ExchangeError::SessionGone);
        }
        if !status.is_success() || status == StatusCode::ACCEPTED {
            // A 2026-07-28 server answers some errors with a 4xx status and the JSON-RPC error.
            if !status.is_success() && is_json(response.headers()) {
                let body = read_whole(response.into_body()).await?;
                if matches!(wire::parse(&body), Ok(wire::Message::Error { id: error_id, .. }) if error_id.is_none_or(|e| is_id(e.get(), id)))
                {
                    return Ok(Self {
                        link,
                        id,
                        session,
                        body: Body::Json(Some(body)),
                        reader: sse::Reader::new(MAX_MESSAGE_BYTES),
                        last_event: None,
                        retry: None,
                        resumes: 0,
                    });
                }
                return Err(ExchangeError::Status {
                    status: status.as_u16(),
                    body: preview(&body),
                });
            }
            return Err(status_error(response).await);
        }
        let body = if is_event_stream(response.headers()) {
            Body::Stream(response.into_body())
        } else {
            Body::Json(Some(read_whole(response.into_body()).await?))
        };
        Ok(Self {
            link,
            id,
            session,
            body,
            reader: sse::Reader::new(MAX_MESSAGE_BYTES),
            last_event: None,
            retry: None,
            resumes: 0,
        })
    }

    /// The next message of the exchange: the answer ends it.
    pub async fn next(&mut self) -> Result<Step, ExchangeError> {
        loop {
            let stream = match &mut self.body {
                Body::Json(body) => {
                    let message = body.take().ok_or_else(|| {
                        ExchangeError::Invalid("its answer was already read".into())
                    })?;
                    return self.classify(message);
                }
                Body::Waiting(waiting) => {
                    let message = waiting.next().await.map_err(ended)?;
                    return self.classify(message);
                }
                Body::Stream(stream) => stream,
            };
            let event = self
                .reader
                .next_event()
                .map_err(|error| ExchangeError::Invalid(error.to_string()))?;
            if let Some(event) = event {
                if let Some(id) = event.id {
                    self.last_event = Some(id);
                }
                if let Some(retry) = event.retry {
                    self.retry = Some(Duration::from_millis(retry));
                }
                if event.data.is_empty() {
                    continue;
                }
                return self.classify(event.data);
            }
            let idle = self
                .link
                .http()
                .map_or(Duration::MAX, HttpRoute::stream_idle);
            match tokio::time::timeout(idle, stream.frame()).await {
                Ok(Some(Ok(frame))) => {
                    if let Ok(data) = frame.into_data() {
                        self.reader.push_chunk(data);
                    }
                }
                Ok(Some(Err(error))) => self.resume(with_causes(&*error)).await?,
                Ok(None) => {
                    self.resume("the stream ended before the answer".into())
                        .await?
                }
                Err(_) => {
                    let stalled = format!("the stream brought nothing for {}s", idle.as_secs_f64());
                    self.resume(stalled).await?
                }
            }
        }
    }

    /// Reads the rest of the stream after the answer (its end, normally), so that the
    /// connection serves the next request: a connection whose answer was not read to its end
    /// is closed. The client's answer does not wait for it (`UpstreamBody::release`,
    /// `FINISH_WAIT` at most).
    pub fn finish(self) {
        if let Body::Stream(stream) = self.body {
            stream.release(FINISH_WAIT);
        }
    }

    /// Reads on where the stream broke off, if the upstream gave its events ids.
    async fn resume(&mut self, why: String) -> Result<(), ExchangeError> {
        let Some(last_event) = self.last_event.clone() else {
            return Err(ExchangeError::Transport(why));
        };
        if self.resumes == RESUME_ATTEMPTS {
            return Err(ExchangeError::Transport(format!(
                "{why} (resumed {RESUME_ATTEMPTS} times)"
            )));
        }
        self.resumes += 1;
        tokio::time::sleep(self.retry.unwrap_or(DEFAULT_RETRY)).await;
        let Some(http) = self.link.http() else {
            return Err(ExchangeError::Transport(why));
        };
        let response = http.resume(self.session.as_deref(), &last_event).await?;
        if !response.status().is_success() || !is_event_stream(response.headers()) {
            return Err(status_error(response).await);
        }
        self.body = Body::Stream(response.into_body());
        self.reader = sse::Reader::new(MAX_MESSAGE_BYTES);
        Ok(())
    }

    /// The answer, if `message` is it; otherwise another message to pass on.
    fn classify(&self, message: Bytes) -> Result<Step, ExchangeError> {
        let answer = match wire::parse(&message) {
            Ok(wire::Message::Response { id, result }) if is_id(id.get(), self.id) => {
                Some((result.get(), false))
            }
            Ok(wire::Message::Error { id, error })
                if id.is_none_or(|id| is_id(id.get(), self.id)) =>
            {
                Some((error.get(), true))
            }
            Ok(wire::Message::Response { .. } | wire::Message::Error { .. }) => {
                return Err(ExchangeError::Invalid(
                    "it answered a request other than the one sent".into(),
                ));
            }
            Ok(_) => None,
            Err(error) => {
                return Err(ExchangeError::Invalid(format!(
                    "it sent a message that is not JSON-RPC ({error})"
                )));
            }
        };
        Ok(match answer {
            Some((payload, is_error)) => {
                Step::Answer(Answer::new(message.clone(), payload, is_error))
            }
            None => Step::Message(message),
        })
    }
}

/// Whether `text` (an id as the upstream wrote it) is request id `id`.
fn is_id(text: &str, id: i64) -> bool {
    text.parse::<i64>() == Ok(id)
}

async fn read_whole(body: UpstreamBody) -> Result<Bytes, ExchangeError> {
    let limited = http_body_util::Limited::new(body, MAX_MESSAGE_BYTES);
    limited
        .collect()
        .await
        .map(|collected| collected.to_bytes())
        .map_err(|error| ExchangeError::Transport(format!("reading its answer: {error}")))
}

async fn status_error(response: http::Response<UpstreamBody>) -> ExchangeError {
    let status = response.status().as_u16();
    let limited = http_body_util::Limited::new(response.into_body(), ERROR_BODY_PREVIEW * 4);
    let body = limited
        .collect()
        .await
        .map(|collected| collected.to_bytes())
        .unwrap_or_default();
    ExchangeError::Status {
        status,
        body: preview(&body),
    }
}

/// The start of an error body, as text.
fn preview(body: &[u8]) -> String {
    let mut text = String::from_utf8_lossy(body).trim().to_owned();
    if text.len() > ERROR_BODY_PREVIEW {
        text.truncate(text.floor_char_boundary(ERROR_BODY_PREVIEW));
        text.push('…');
    }
    text
}
