//! The load tool's HTTP/1.1 client: one hyper connection per worker over a `TcpStream` with
//! nodelay, kept alive and reopened when it closes. The URL is parsed once into an `Endpoint`;
//! requests reuse its pre-built headers. Replies are read as JSON or as an SSE stream, from
//! which only the JSON-RPC response with the request's id is kept. No redirect is followed.

use std::{net::SocketAddr, time::Duration};

use bytes::{Bytes, BytesMut};
use http::{
    HeaderMap, HeaderName, HeaderValue, Method, Request, StatusCode, Uri, header, uri::Authority,
};
use http_body_util::{BodyExt, Full};
use hyper::{body::Incoming, client::conn::http1};
use hyper_util::rt::TokioIo;
use tokio::{net::TcpStream, time::Instant};

use super::{
    BenchError,
    check::{ErrorKind, Failure, quote},
    sse::SseParser,
};

/// How much of a reply that is not the expected answer is kept, to quote it.
const QUOTE_KEEP: usize = 4096;
/// The largest JSON answer read; a bigger one is a wrong answer.
const MAX_BODY: usize = 16 << 20;
/// How long an SSE stream may stay open after its response before the connection is dropped
/// (a server SHOULD close it; keeping the connection needs the stream's end).
const STREAM_END_GRACE: Duration = Duration::from_millis(250);

pub const SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");

/// A parsed target URL and the headers every request to it carries.
#[derive(Debug)]
pub struct Endpoint {
    pub url: String,
    addr: SocketAddr,
    /// The origin-form request target (path and query).
    path: Uri,
    base: HeaderMap,
}

/// A URL the bench tools cannot use, for `reason`.
pub fn bad_url(url: &str, reason: &str) -> BenchError {
    BenchError::BadUrl {
        url: url.to_owned(),
        reason: reason.to_owned(),
    }
}

/// Parses an `http://host[:port]/path` URL into its URI and authority; an https URL is refused
/// for `https_reason`.
pub fn parse_http_url(url: &str, https_reason: &str) -> Result<(Uri, Authority), BenchError> {
    let uri: Uri = url.parse().map_err(|_| bad_url(url, "not a URL"))?;
    match uri.scheme_str() {
        Some("http") => {}
        Some("https") => return Err(bad_url(url, https_reason)),
        _ => return Err(bad_url(url, "the URL must start with http://")),
    }
    let authority = uri
        .authority()
        .cloned()
        .ok_or_else(|| bad_url(url, "no host"))?;
    Ok((uri, authority))
}

impl Endpoint {
    /// Parses `url` (http only) and resolves its host once.
    pub async fn resolve(
        url: &str,
        extra: &[(HeaderName, HeaderValue)],
    ) -> Result<Self, BenchError> {
        let bad = |reason: &str| bad_url(url, reason);
        let (uri, authority) = parse_http_url(
            url,
            "https is not supported: the load tool speaks plain http:// only \
             (measure the server behind its TLS terminator)",
        )?;
        let port = authority.port_u16().unwrap_or(80);
        let addr = tokio::net::lookup_host((authority.host(), port))
            .await
            .ok()
            .and_then(|mut addrs| addrs.next())
            .ok_or_else(|| BenchError::Connect {
                url: url.to_owned(),
                reason: format!("`{}` does not resolve", authority.host()),
            })?;
        let path = uri
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .parse()
            .map_err(|_| bad("bad path"))?;
        let mut base = HeaderMap::new();
        let host = HeaderValue::from_str(authority.as_str()).map_err(|_| bad("bad host"))?;
        base.insert(header::HOST, host);
        base.insert(
            header::ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        base.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        for (name, value) in extra {
            base.append(name.clone(), value.clone());
        }
        Ok(Self {
            url: url.to_owned(),
            addr,
            path,
            base,
        })
    }

    /// Opens a keep-alive connection.
    pub async fn connect(&self) -> Result<Conn, Failure> {
        let stream = TcpStream::connect(self.addr)
            .await
            .map_err(|e| Failure::new(ErrorKind::Connection, format!("connect: {e}")))?;
        let _ = stream.set_nodelay(true);
        let (sender, connection) = http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| Failure::new(ErrorKind::Connection, format!("handshake: {e}")))?;
        // The connection task ends when the connection closes or the sender is dropped.
        tokio::spawn(connection);
        Ok(Conn {
            sender,
            reusable: true,
        })
    }

    fn request(
        &self,
        method: Method,
        headers: &[(HeaderName, HeaderValue)],
        body: Bytes,
    ) -> Request<Full<Bytes>> {
        let mut request = Request::new(Full::new(body));
        *request.method_mut() = method;
        *request.uri_mut() = self.path.clone();
        let map = request.headers_mut();
        map.reserve(self.base.len() + headers.len());
        for (name, value) in &self.base {
            map.append(name.clone(), value.clone());
        }
        for (name, value) in headers {
            map.insert(name.clone(), value.clone());
        }
        request
    }
}

/// What came back for one request.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub content_type: String,
    pub session_id: Option<HeaderValue>,
    /// The JSON-RPC response: the JSON body, or the data of the SSE event with the request's id.
    pub message: Option<Bytes>,
    /// Otherwise, the start of what the body held (to quote it).
    pub other: Bytes,
    /// When the answer was complete (the matching event, or the end of the body).
    pub answered: Instant,
    /// The SSE stream stayed open after the response (the connection was given up).
    pub left_open: bool,
}

/// One keep-alive HTTP/1.1 connection, one request at a time.
pub struct Conn {
    sender: http1::SendRequest<Full<Bytes>>,
    /// False once a reply was abandoned mid-body: the connection cannot carry another request.
    reusable: bool,
}

impl Conn {
    /// Whether another request can go out on this connection.
    pub fn is_usable(&self) -> bool {
        self.reusable && !self.sender.is_closed()
    }

    /// POSTs `body`; for a request (`id` given) reads the answer with that id.
    pub async fn post(
        &mut self,
        endpoint: &Endpoint,
        headers: &[(HeaderName, HeaderValue)],
        body: Bytes,
        id: Option<&str>,
    ) -> Result<Reply, Failure> {
        let request = endpoint.request(Method::POST, headers, body);
        self.exchange(request, id).await
    }

    /// Sends DELETE (ends a session).
    pub async fn delete(
        &mut self,
        endpoint: &Endpoint,
        headers: &[(HeaderName, HeaderValue)],
    ) -> Result<Reply, Failure> {
        let request = endpoint.request(Method::DELETE, headers, Bytes::new());
        self.exchange(request, None).await
    }

    async fn exchange(
        &mut self,
        request: Request<Full<Bytes>>,
        id: Option<&str>,
    ) -> Result<Reply, Failure> {
        let broken = |e: hyper::Error| Failure::new(ErrorKind::Connection, e.to_string());
        self.sender.ready().await.map_err(broken)?;
        let response = self.sender.send_request(request).await.map_err(broken)?;
        let status = response.status();
        let content_type = response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        let session_id = response.headers().get(SESSION_ID).cloned();
        let mut reply = Reply {
            status,
            content_type,
            session_id,
            message: None,
            other: Bytes::new(),
            answered: Instant::now(),
            left_open: false,
        };
        let body = response.into_body();
        let sse = is_media_type(&reply.content_type, SSE);
        match id {
            // `read_sse` stamps the answer when the matching event arrives.
            Some(id) if status.is_success() && sse => return self.read_sse(body, id, reply).await,
            Some(_) if status.is_success() && is_media_type(&reply.content_type, JSON) => {
                reply.message = Some(read_capped(body, MAX_BODY).await?);
            }
            _ => reply.other = read_capped(body, QUOTE_KEEP).await?,
        }
        reply.answered = Instant::now();
        Ok(reply)
    }

    /// Reads SSE events until the response with `id`, then lets the stream end.
    async fn read_sse(
        &mut self,
        mut body: Incoming,
        id: &str,
        mut reply: Reply,
    ) -> Result<Reply, Failure> {
        let mut parser = SseParser::default();
        let mut seen = BytesMut::new();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| {
                Failure::new(
                    ErrorKind::Connection,
                    format!("reading the SSE stream: {e}"),
                )
            })?;
            let Ok(chunk) = frame.into_data() else {
                continue;
            };
            if seen.len() < QUOTE_KEEP {
                seen.extend_from_slice(&chunk[..chunk.len().min(QUOTE_KEEP - seen.len())]);
            }
            let mut found = None;
            parser.push(&chunk, |data| {
                let hit = has_id(data, id);
                if hit {
                    found = Some(Bytes::copy_from_slice(data));
                }
                hit
            });
            if let Some(message) = found {
                reply.message = Some(message);
                reply.answered = Instant::now();
                self.finish_stream(body, &mut reply).await;
                return Ok(reply);
            }
        }
        reply.other = seen.freeze();
        reply.answered = Instant::now();
        Ok(reply)
    }

    /// Waits briefly for the rest of a stream whose response has come, so the connection can
    /// carry the next request; gives the connection up if the stream stays open.
    async fn finish_stream(&mut self, mut body: Incoming, reply: &mut Reply) {
        if hyper::body::Body::is_end_stream(&body) {
            return;
        }
        let drain = async {
            while let Some(frame) = body.frame().await {
                if frame.is_err() {
                    return false;
                }
            }
            true
        };
        match tokio::time::timeout(STREAM_END_GRACE, drain).await {
            Ok(true) => {}
            Ok(false) => self.reusable = false,
            Err(_) => {
                self.reusable = false;
                reply.left_open = true;
            }
        }
    }
}

/// Sends one request on `conn` (connecting first if there is none) within `timeout`, and
/// drops the connection when it cannot carry another request.
pub async fn send(
    conn: &mut Option<Conn>,
    endpoint: &Endpoint,
    headers: &[(HeaderName, HeaderValue)],
    body: Option<Bytes>,
    id: Option<&str>,
    timeout: Duration,
) -> Result<Reply, Failure> {
    let exchange = async {
        if !conn.as_ref().is_some_and(Conn::is_usable) {
            *conn = Some(endpoint.connect().await?);
        }
        let Some(open) = conn.as_mut() else {
            return Err(Failure::new(ErrorKind::Connection, "no connection"));
        };
        match body {
            Some(body) => open.post(endpoint, headers, body, id).await,
            None => open.delete(endpoint, headers).await,
        }
    };
    let outcome = match tokio::time::timeout(timeout, exchange).await {
        Ok(outcome) => outcome,
        Err(_) => Err(Failure::new(
            ErrorKind::Timeout,
            format!("no answer within {} ms", timeout.as_millis()),
        )),
    };
    if outcome.is_err() || !conn.as_ref().is_some_and(Conn::is_usable) {
        *conn = None;
    }
    outcome
}

pub const JSON: &str = "application/json";
pub const SSE: &str = "text/event-stream";

/// Whether a `Content-Type` value is of media type `wanted` (whatever its parameters and case).
pub fn is_media_type(content_type: &str, wanted: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or("");
    essence.trim().eq_ignore_ascii_case(wanted)
}

/// Whether an SSE event's data is the JSON-RPC message with this id (a response, or a request
/// from the server that happens to share the id: the checker tells them apart).
pub fn has_id(data: &[u8], id: &str) -> bool {
    #[derive(serde::Deserialize)]
    struct Id<'a> {
        #[serde(borrow)]
        id: Option<&'a serde_json::value::RawValue>,
        method: Option<serde::de::IgnoredAny>,
    }
    match serde_json::from_slice::<Id>(data) {
        Ok(Id {
            id: Some(raw),
            method: None,
        }) => raw.get() == id,
        _ => false,
    }
}

/// Reads a body, keeping at most `cap` bytes (the rest is read and dropped, so the connection
/// stays usable).
async fn read_capped(mut body: Incoming, cap: usize) -> Result<Bytes, Failure> {
    let mut kept = BytesMut::new();
    while let Some(frame) = body.frame().await {
        let frame = frame
            .map_err(|e| Failure::new(ErrorKind::Connection, format!("reading the body: {e}")))?;
        if let Ok(chunk) = frame.into_data() {
            let room = cap.saturating_sub(kept.len());
            kept.extend_from_slice(&chunk[..chunk.len().min(room)]);
        }
    }
    Ok(kept.freeze())
}

/// Describes a reply that is not an answer: status, content type and a quote of the body.
pub fn describe(reply: &Reply) -> String {
    let reason = reply.status.canonical_reason().unwrap_or("");
    let body = reply.message.as_deref().unwrap_or(&reply.other);
    let content_type = if reply.content_type.is_empty() {
        "no content type"
    } else {
        &reply.content_type
    };
    format!(
        "HTTP {} {reason} ({content_type}): {}",
        reply.status.as_u16(),
        quote(body)
    )
}
