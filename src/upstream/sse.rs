//! The legacy HTTP+SSE client transport (protocol 2024-11-05), which rmcp no longer ships.
//!
//! A GET opens an event stream; its first `endpoint` event names the URL (relative to the stream's)
//! to POST client messages to. Everything the server sends, answers included, arrives as `message`
//! events on the stream. Every request goes through the connection's `RequestHook`.
//!
//! When the stream breaks and the server numbered its events (so it may resume), the transport
//! reconnects with backoff, sending `Last-Event-ID`. If the server gives back the same endpoint
//! the session goes on. If it gives another, or never numbered its events (most 2024-11-05
//! servers end the session with its stream), the session is gone: the transport ends at once, so
//! that the connection is re-established from `initialize` rather than posting into a void.
//!
//! The gateway's own requests may take a raw path (`SseTap`): posted as bytes, their answers
//! (and progress) taken off the stream before rmcp reads it, as the stdio tap does.

use std::{sync::Arc, time::Duration};

use arc_swap::ArcSwap;
use futures::{Stream, StreamExt};
use http::{HeaderMap, header};
use rmcp::{
    RoleClient,
    model::{ClientJsonRpcMessage, ServerJsonRpcMessage},
    transport::Transport,
};
use sse_stream::{Sse, SseStream};
use tokio::{sync::mpsc, task::JoinHandle};
use url::Url;

use super::lines::{Pending, Waiting};
use crate::hook::{HookError, RequestHeaders, RequestHook};

/// Reconnection attempts after the stream breaks, before the transport gives up.
const RECONNECT_ATTEMPTS: u32 = 5;
const FIRST_RECONNECT_DELAY: Duration = Duration::from_millis(250);
/// The longest one reconnection may take, up to the `endpoint` event (a server that accepts
/// the GET but never names its endpoint must not hold the session in limbo).
const RECONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Messages buffered between the stream reader and rmcp.
const INCOMING_CAPACITY: usize = 256;
/// The most of an error response body kept for the error message.
const ERROR_BODY_PREVIEW: usize = 512;

#[derive(Debug, thiserror::Error)]
pub enum SseError {
    #[error("HTTP request failed: {0}")]
    Http(#[from] reqwest::Error),
    #[error("the server answered {status}: {body}")]
    Status {
        status: reqwest::StatusCode,
        body: String,
    },
    #[error("the event stream ended before it named an endpoint")]
    NoEndpoint,
    #[error("the endpoint `{0}` is not a valid URL")]
    BadEndpoint(String),
    #[error("cannot serialize the message: {0}")]
    Serialize(#[from] serde_json::Error),
    #[error("{0}")]
    Hook(#[from] HookError),
    #[error("the event stream ended")]
    Ended,
}

type Events = std::pin::Pin<Box<dyn Stream<Item = Result<Sse, sse_stream::Error>> + Send>>;

/// Where and how client messages are posted.
struct Poster {
    http: reqwest::Client,
    endpoint: ArcSwap<Url>,
    hook: Arc<dyn RequestHook>,
}

impl Poster {
    async fn post(&self, message: ClientJsonRpcMessage) -> Result<(), SseError> {
        self.post_bytes(bytes::Bytes::from(serde_json::to_vec(&message)?))
            .await
    }

    async fn post_bytes(&self, body: bytes::Bytes) -> Result<(), SseError> {
        let url = (**self.endpoint.load()).clone();
        let request = |headers| {
            self.http
                .post(url.clone())
                .headers(headers)
                .header(header::CONTENT_TYPE, "application/json")
                .body(body.clone())
        };
        let response = send(self.hook.as_ref(), request).await?;
        if response.status().is_success() {
            return Ok(());
        }
        Err(status_error(response).await)
    }
}

/// Sends the request `build` makes with the hook's headers; if the upstream refuses it (401,
/// 403) and the hook has a new token, sends it once more.
async fn send(
    hook: &dyn RequestHook,
    build: impl Fn(HeaderMap) -> reqwest::RequestBuilder,
) -> Result<reqwest::Response, SseError> {
    let retries = hook.retries();
    let mut sent = RequestHeaders::new();
    hook.prepare(&mut sent).done().await?;
    let response = build(sent.clone()).send().await?;
    let status = response.status().as_u16();
    if !matches!(status, 401 | 403) {
        return Ok(response);
    }
    let challenge = response
        .headers()
        .get(header::WWW_AUTHENTICATE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    if !retries {
        hook.rejected(status, challenge.as_deref(), &RequestHeaders::new())
            .await;
        return Ok(response);
    }
    if !hook.rejected(status, challenge.as_deref(), &sent).await {
        return Ok(response);
    }
    let mut again = RequestHeaders::new();
    hook.prepare(&mut again).done().await?;
    Ok(build(again).send().await?)
}

async fn status_error(response: reqwest::Response) -> SseError {
    let status = response.status();
    let mut body = response.text().await.unwrap_or_default();
    if body.len() > ERROR_BODY_PREVIEW {
        body.truncate(body.floor_char_boundary(ERROR_BODY_PREVIEW));
        body.push('…');
    }
    SseError::Status { status, body }
}

/// A session over the legacy HTTP+SSE transport.
pub struct SseTransport {
    poster: Arc<Poster>,
    incoming: mpsc::Receiver<ServerJsonRpcMessage>,
    reader: JoinHandle<()>,
    /// The gateway's own requests waiting for what the stream brings about them.
    pending: Arc<Pending>,
}

/// The raw path of an SSE session: the gateway's own requests are posted as bytes (with ids
/// rmcp never uses), and what the stream brings about them is taken off before rmcp reads
/// the rest, as on a stdio upstream (`lines`).
pub struct SseTap {
    poster: Arc<Poster>,
    pending: Arc<Pending>,
}

impl SseTap {
    /// Posts request `body` (of id `id`) and waits for what concerns it.
    pub async fn send(&self, id: i64, body: bytes::Bytes) -> Result<Waiting, SseError> {
        let waiting = self.pending.wait(id).map_err(|_| SseError::Ended)?;
        self.poster.post_bytes(body).await?;
        Ok(waiting)
    }
}

impl SseTransport {
    /// Opens the event stream at `url` and waits for the server to name its endpoint.
    pub async fn connect(
        url: Url,
        http: reqwest::Client,
        hook: Arc<dyn RequestHook>,
    ) -> Result<Self, SseError> {
        let (mut events, endpoint) = open(&http, &url, hook.as_ref(), None).await?;
        let poster = Arc::new(Poster {
            http,
            endpoint: ArcSwap::from_pointee(endpoint),
            hook,
        });
        let (sender, incoming) = mpsc::channel(INCOMING_CAPACITY);
        let reader_poster = poster.clone();
        let pending: Arc<Pending> = Arc::default();
        let taken = pending.clone();
        let reader = tokio::spawn(async move {
            let mut last_event_id = None;
            loop {
                read(&mut events, &sender, &taken, &mut last_event_id).await;
                if sender.is_closed() {
                    break;
                }
                if last_event_id.is_none() {
                    tracing::debug!(%url, "the SSE stream ended and cannot be resumed");
                    break;
                }
                match reconnect(&reader_poster, &url, last_event_id.clone()).await {
                    Some(resumed) => events = resumed,
                    None => break,
                }
            }
            taken.end();
        });
        Ok(Self {
            poster,
            incoming,
            reader,
            pending,
        })
    }

    /// The raw path of this session.
    pub fn tap(&self) -> SseTap {
        SseTap {
            poster: self.poster.clone(),
            pending: self.pending.clone(),
        }
    }
}

/// Opens the stream and reads up to the `endpoint` event; returns the rest and the endpoint.
async fn open(
    http: &reqwest::Client,
    url: &Url,
    hook: &dyn RequestHook,
    last_event_id: Option<String>,
) -> Result<(Events, Url), SseError> {
    let request = |headers| {
        let request = http
            .get(url.clone())
            .headers(headers)
            .header(header::ACCEPT, "text/event-stream");
        match &last_event_id {
            Some(id) => request.header("last-event-id", id),
            None => request,
        }
    };
    let response = send(hook, request).await?;
    if !response.status().is_success() {
        return Err(status_error(response).await);
    }
    let mut events: Events = Box::pin(SseStream::from_byte_stream(response.bytes_stream()));
    while let Some(event) = events.next().await {
        let Ok(event) = event else {
            break;
        };
        if event.event.as_deref() == Some("endpoint") {
            let target = event.data.unwrap_or_default();
            let endpoint = url
                .join(target.trim())
                .map_err(|_| SseError::BadEndpoint(target.clone()))?;
            return Ok((events, endpoint));
        }
    }
    Err(SseError::NoEndpoint)
}

/// Passes `message` events on until the stream ends or rmcp stops listening.
async fn read(
    events: &mut Events,
    sender: &mpsc::Sender<ServerJsonRpcMessage>,
    pending: &Pending,
    last_event_id: &mut Option<String>,
) {
    while let Some(Ok(event)) = events.next().await {
        if event.id.is_some() {
            last_event_id.clone_from(&event.id);
        }
        if !matches!(event.event.as_deref(), None | Some("message")) {
            continue;
        }
        let Some(data) = event.data else {
            continue;
        };
        if pending.deliver(data.as_bytes()) {
            continue;
        }
        let message = match super::augmented::lift(data.as_bytes()) {
            Some(lifted) => Ok(lifted),
            None => serde_json::from_str::<ServerJsonRpcMessage>(&data),
        };
        match message {
            Ok(message) => {
                if sender.send(message).await.is_err() {
                    return;
                }
            }
            Err(error) => {
                tracing::warn!(%error, "an SSE upstream sent a message that is not JSON-RPC")
            }
        }
    }
}

/// Reopens the stream after it broke. `None` if that fails, or if the server started a new
/// session (another endpoint): the old one cannot go on.
async fn reconnect(poster: &Poster, url: &Url, last_event_id: Option<String>) -> Option<Events> {
    let mut delay = FIRST_RECONNECT_DELAY;
    for _ in 0..RECONNECT_ATTEMPTS {
        tokio::time::sleep(delay).await;
        delay *= 2;
        let reopen = open(
            &poster.http,
            url,
            poster.hook.as_ref(),
            last_event_id.clone(),
        );
        let Ok(reopened) = tokio::time::timeout(RECONNECT_TIMEOUT, reopen).await else {
            tracing::debug!(%url, "reconnecting the SSE stream timed out");
            continue;
        };
        match reopened {
            Ok((events, endpoint)) if endpoint == **poster.endpoint.load() => return Some(events),
            Ok(_) => {
                tracing::info!(%url, "the SSE upstream started a new session; reconnecting from initialize");
                return None;
            }
            Err(error) => tracing::debug!(%url, %error, "reconnecting the SSE stream failed"),
        }
    }
    None
}

impl Transport<RoleClient> for SseTransport {
    type Error = SseError;

    fn send(
        &mut self,
        item: ClientJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let poster = self.poster.clone();
        async move { poster.post(item).await }
    }

    async fn receive(&mut self) -> Option<ServerJsonRpcMessage> {
        self.incoming.recv().await
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.reader.abort();
        Ok(())
    }
}

impl Drop for SseTransport {
    fn drop(&mut self) {
        self.reader.abort();
    }
}
