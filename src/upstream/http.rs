//! The streamable HTTP upstream transport: rmcp's client worker over a reqwest client wrapped
//! so that the connection's `RequestHook` adds its headers to every request, and so that the
//! session id rmcp's worker negotiated is known to the raw path (`exchange`), which sends the
//! hot requests on the same upstream session without going through the worker.
//!
//! rmcp's own `custom_headers` are static and cloned per request; the wrapper replaces them with
//! the hook, which is per connection and may vary per request.

use std::{collections::HashMap, sync::Arc, time::Duration};

use futures::{StreamExt, stream::BoxStream};
use http::{HeaderName, HeaderValue};
use rmcp::{
    model::{ClientJsonRpcMessage, JsonRpcMessage, ServerJsonRpcMessage},
    transport::{
        StreamableHttpClientTransport,
        common::client_side_sse::ExponentialBackoff,
        streamable_http_client::{
            SseError, StreamableHttpClient, StreamableHttpClientTransportConfig,
            StreamableHttpError, StreamableHttpPostResponse,
        },
    },
};
use sse_stream::Sse;
use tokio::sync::mpsc;

use super::{augmented, session_slot::SessionSlot};
use crate::{
    config::HttpConfig,
    hook::{RequestHeaders, RequestHook},
};

/// How many requests one upstream connection may have in flight: no limit here. rmcp defaults
/// to 16, which would silently queue a busy gateway; the one limit is the upstream's
/// `max_concurrent_requests` (see `admission`), which fails visibly.
const MAX_IN_FLIGHT: usize = usize::MAX;
/// Messages buffered between the connection and its HTTP worker.
const CHANNEL_CAPACITY: usize = 256;
/// Attempts to resume a broken response stream before its requests fail. rmcp retries forever
/// by default, which leaves a call to a vanished upstream hanging; the server's own `retry`
/// hint still sets the least wait between attempts.
const STREAM_RESUME_ATTEMPTS: usize = 2;

/// The most redirects (within the upstream's origin) one request follows.
const MAX_REDIRECTS: usize = 5;

/// A reqwest client that runs a hook before each request.
#[derive(Clone)]
pub struct HookedClient {
    http: reqwest::Client,
    hook: Arc<dyn RequestHook>,
    /// rmcp's default event size limit, for the trait methods that take none.
    default_max_event: usize,
    /// Where the upstream session id in use is kept for the raw path.
    session: Arc<SessionSlot>,
    /// A stream that brings no event this long is ended with an error (rmcp then resumes it
    /// with `Last-Event-ID`, or fails what waited on it).
    stream_idle: Duration,
    /// Where requests to run as tasks, lifted off its streams, go to rmcp's handler.
    inject: mpsc::UnboundedSender<ServerJsonRpcMessage>,
    /// The `tasks` capability its `initialize` declares, if any (see `augmented`).
    declare: Option<serde_json::Value>,
}

/// The headers rmcp's worker passes with each request (protocol version and such).
type WorkerHeaders = HashMap<HeaderName, HeaderValue>;

type HttpResult<T> = Result<T, StreamableHttpError<reqwest::Error>>;

impl HookedClient {
    /// rmcp's headers with the hook's added.
    async fn headers(&self, mut headers: WorkerHeaders) -> HttpResult<WorkerHeaders> {
        let mut added = RequestHeaders::new();
        self.hook
            .prepare(&mut added)
            .done()
            .await
            .map_err(|e| StreamableHttpError::Io(std::io::Error::other(e)))?;
        let mut name = None;
        for (key, value) in added {
            // `HeaderMap`'s iterator names a header once, before all its values.
            if key.is_some() {
                name = key;
            }
            if let Some(name) = &name {
                headers.insert(name.clone(), value);
            }
        }
        Ok(headers)
    }
}

/// The headers `sent` as the hook is told of them.
fn as_request_headers(sent: &WorkerHeaders) -> RequestHeaders {
    sent.iter()
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect()
}

/// Every method runs the hook, then hands the request to reqwest. rmcp's worker calls the
/// `*_with_max_sse_event_size` variants; the others apply the same default limit. A request the
/// upstream refuses (401, 403) goes to the hook, which may renew its token and have it sent
/// once more. A copy of the request is kept for that only while the hook has a token it could
/// renew, so upstreams that need none pay nothing.
impl StreamableHttpClient for HookedClient {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<StreamableHttpPostResponse> {
        let limit = self.default_max_event;
        self.post_message_with_max_sse_event_size(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            limit,
        )
        .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> HttpResult<StreamableHttpPostResponse> {
        if let Some(answer) = self.session.answer_locally(&message) {
            return Ok(answer);
        }
        self.session.observe(session_id.as_deref());
        // What comes on the answer's stream is about this request.
        let origin = match &message {
            JsonRpcMessage::Request(request) => Some(request.id.clone()),
            _ => None,
        };
        let message = match &self.declare {
            Some(tasks) => augmented::declare(message, tasks),
            None => message,
        };
        let result = if !self.hook.retries() {
            let headers = self.headers(custom_headers).await?;
            let result = self
                .http
                .post_message_with_max_sse_event_size(
                    uri,
                    message,
                    session_id,
                    auth_header,
                    headers,
                    max_sse_event_size,
                )
                .await;
            self.heard(result).await
        } else {
            let send = |headers| {
                self.http.post_message_with_max_sse_event_size(
                    uri.clone(),
                    message.clone(),
                    session_id.clone(),
                    auth_header.clone(),
                    headers,
                    max_sse_event_size,
                )
            };
            self.retrying(custom_headers, send).await
        };
        // The answer to `initialize` names the session before any request carries it.
        if let Ok(
            StreamableHttpPostResponse::Json(_, Some(id))
            | StreamableHttpPostResponse::Sse(_, Some(id)),
        ) = &result
        {
            self.session.observe(Some(id));
        }
        match result {
            Ok(StreamableHttpPostResponse::Sse(stream, id)) => {
                let stream = augmented::lifting(stream, self.inject.clone(), origin);
                Ok(StreamableHttpPostResponse::Sse(
                    idle_limited(stream, self.stream_idle),
                    id,
                ))
            }
            other => other,
        }
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<()> {
        if self.session.is_kept() {
            // Other replicas go on with the session: it ends with the client's.
            return Ok(());
        }
        let send = |headers| {
            self.http.delete_session(
                uri.clone(),
                session_id.clone(),
                auth_header.clone(),
                headers,
            )
        };
        self.retrying(custom_headers, send).await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<BoxStream<'static, Result<Sse, SseError>>> {
        let limit = self.default_max_event;
        self.get_stream_with_max_sse_event_size(
            uri,
            session_id,
            last_event_id,
            auth_header,
            custom_headers,
            limit,
        )
        .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> HttpResult<BoxStream<'static, Result<Sse, SseError>>> {
        let send = |headers| {
            self.http.get_stream_with_max_sse_event_size(
                uri.clone(),
                session_id.clone(),
                last_event_id.clone(),
                auth_header.clone(),
                headers,
                max_sse_event_size,
            )
        };
        let stream = self.retrying(custom_headers, send).await?;
        let stream = augmented::lifting(stream, self.inject.clone(), None);
        Ok(idle_limited(stream, self.stream_idle))
    }
}

impl HookedClient {
    /// Prepares and sends a request; if the upstream refuses it and the hook has a new token,
    /// prepares and sends it once more.
    async fn retrying<T, F, Fut>(&self, custom_headers: WorkerHeaders, send: F) -> HttpResult<T>
    where
        F: Fn(WorkerHeaders) -> Fut,
        Fut: Future<Output = HttpResult<T>>,
    {
        if !self.hook.retries() {
            let headers = self.headers(custom_headers).await?;
            return self.heard(send(headers).await).await;
        }
        let headers = self.headers(custom_headers.clone()).await?;
        let sent = as_request_headers(&headers);
        let result = send(headers).await;
        let Some((status, challenge)) = refusal(&result) else {
            return result;
        };
        if !self
            .hook
            .rejected(status, challenge.as_deref(), &sent)
            .await
        {
            return result;
        }
        let headers = self.headers(custom_headers).await?;
        send(headers).await
    }
}

impl HookedClient {
    /// Tells the hook of a refusal it will not retry (it sent no token to renew).
    async fn heard<T>(&self, result: HttpResult<T>) -> HttpResult<T> {
        if let Some((status, challenge)) = refusal(&result) {
            self.hook
                .rejected(status, challenge.as_deref(), &RequestHeaders::new())
                .await;
        }
        result
    }
}

/// The status and `WWW-Authenticate` of a request the upstream refused for want of
/// (sufficient) authorization.
fn refusal<T>(result: &HttpResult<T>) -> Option<(u16, Option<String>)> {
    match result {
        Err(StreamableHttpError::AuthRequired(error)) => {
            Some((401, Some(error.www_authenticate_header.clone())))
        }
        Err(StreamableHttpError::InsufficientScope(error)) => {
            Some((403, Some(error.www_authenticate_header.clone())))
        }
        Err(StreamableHttpError::Client(error))
            if error.status() == Some(reqwest::StatusCode::UNAUTHORIZED) =>
        {
            Some((401, None))
        }
        Err(StreamableHttpError::UnexpectedServerResponse(text))
            if answered_status(text) == Some(401) =>
        {
            Some((401, None))
        }
        _ => None,
    }
}

/// The status of an answer rmcp reports as `HTTP {status}: {body}` (a 401 without
/// `WWW-Authenticate`, say): rmcp keeps no status beside the text, so it is read from where rmcp
/// writes it, never from the body.
fn answered_status(text: &str) -> Option<u16> {
    let code = text.strip_prefix("HTTP ")?.get(..3)?;
    code.bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| code.parse().ok())
        .flatten()
}

/// The HTTP client an upstream's connections share (one connection pool per upstream). It
/// follows redirects within the upstream's origin only: every request carries the upstream's
/// configured headers (API keys, the user's token), which must never reach another origin, so
/// a redirect elsewhere is answered to the caller as it came (a failure naming the status).
pub fn http_client(connect_timeout: Duration) -> reqwest::Client {
    let same_origin = reqwest::redirect::Policy::custom(|attempt| {
        let first = attempt.previous().first().map(|url| url.origin());
        if attempt.previous().len() > MAX_REDIRECTS || first != Some(attempt.url().origin()) {
            attempt.stop()
        } else {
            attempt.follow()
        }
    });
    reqwest::Client::builder()
        .connect_timeout(connect_timeout)
        .redirect(same_origin)
        .build()
        .unwrap_or_else(|error| {
            tracing::error!(%error, "cannot make the HTTP client for upstreams with its redirect policy; following none");
            reqwest::Client::builder()
                .connect_timeout(connect_timeout)
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap_or_default()
        })
}

/// A transport to `config.url` whose requests pass through `hook`, and which keeps the
/// session id it uses in `session`.
pub fn transport(
    config: &HttpConfig,
    stream_idle: Duration,
    http: reqwest::Client,
    hook: Arc<dyn RequestHook>,
    (session, inject, declare): (
        Arc<SessionSlot>,
        mpsc::UnboundedSender<ServerJsonRpcMessage>,
        Option<serde_json::Value>,
    ),
) -> StreamableHttpClientTransport<HookedClient> {
    let mut transport_config = StreamableHttpClientTransportConfig::with_uri(config.url.as_str())
        .max_concurrent_requests(MAX_IN_FLIGHT)
        .reinit_on_expired_session(true);
    transport_config.channel_buffer_capacity = CHANNEL_CAPACITY;
    let mut backoff = ExponentialBackoff::default();
    backoff.max_times = Some(STREAM_RESUME_ATTEMPTS);
    backoff.base_duration = Duration::from_millis(250);
    backoff.max_delay = Some(Duration::from_secs(2));
    transport_config.retry_config = Arc::new(backoff);
    let client = HookedClient {
        http,
        hook,
        default_max_event: transport_config.max_sse_event_size,
        session,
        stream_idle,
        inject,
        declare,
    };
    StreamableHttpClientTransport::with_client(client, transport_config)
}

/// The upstream's event stream, ended with an error when no event comes for `idle`: a stream
/// that has stalled (its peer gone without closing it) is then resumed or given up, instead of
/// being waited on for ever.
fn idle_limited(
    stream: BoxStream<'static, Result<Sse, SseError>>,
    idle: Duration,
) -> BoxStream<'static, Result<Sse, SseError>> {
    futures::stream::unfold(Some(stream), move |stream| async move {
        let mut stream = stream?;
        match tokio::time::timeout(idle, stream.next()).await {
            Ok(Some(item)) => Some((item, Some(stream))),
            Ok(None) => None,
            Err(_) => {
                let stalled = format!("the stream brought nothing for {}s", idle.as_secs_f64());
                Some((Err(SseError::Body(stalled.into())), None))
            }
        }
    })
    .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(data: &str) -> Result<Sse, SseError> {
        Ok(Sse::default().data(data))
    }

    #[tokio::test]
    async fn a_stream_that_stalls_ends_with_an_error() {
        let stalls = futures::stream::iter([event("1"), event("2")])
            .chain(futures::stream::pending())
            .boxed();
        let mut limited = idle_limited(stalls, Duration::from_millis(50));
        assert!(limited.next().await.unwrap().is_ok());
        assert!(limited.next().await.unwrap().is_ok());
        let error = limited.next().await.unwrap().unwrap_err();
        assert!(error.to_string().contains("nothing for 0.05s"), "{error}");
        assert!(limited.next().await.is_none(), "it ends after the error");

        let ends = futures::stream::iter([event("1")]).boxed();
        let mut limited = idle_limited(ends, Duration::from_millis(50));
        assert!(limited.next().await.unwrap().is_ok());
        assert!(limited.next().await.is_none(), "an ending stream just ends");
    }

    #[test]
    fn a_status_is_read_where_rmcp_writes_it_not_in_the_body() {
        assert_eq!(answered_status("HTTP 401 Unauthorized: go away"), Some(401));
        assert_eq!(
            answered_status("HTTP 500 Internal Server Error: 401"),
            Some(500)
        );
        assert_eq!(answered_status("unexpected: error 401"), None);
        assert_eq!(answered_status("HTTP 4x1"), None);
    }
}
