//! The pass-through proxy (pingora's `ProxyHttp`): `/servers/{name}/mcp` forwards requests to
//! one streamable-HTTP upstream and its answers back as they are, bytes and streams alike.
//!
//! What the MCP endpoint checks is checked first, by the same code: the Host/Origin guard,
//! the principal's authentication and `[limits]`. Then policy: a principal that may not see
//! the upstream gets the answer of an unknown one. On the way up, the client's credential for
//! Switchyard is taken off and the upstream's own headers go on: its fixed and per-user
//! headers, the client headers its rules pass on, the user's OAuth token. Nothing of the
//! catalog applies: names, URIs and lists are the upstream's own.

use std::{sync::Arc, time::Instant};

use async_trait::async_trait;
use axum::body::Body;
use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Response, StatusCode, header};
use pingora::{
    Error, ErrorSource, ErrorType, Result,
    http::{RequestHeader, ResponseHeader},
    modules::http::HttpModules,
    prelude::HttpPeer,
    proxy::{FailToProxy, ProxyHttp, Session},
};

use super::{
    downstream::ClientStream,
    metered::Metered,
    route::{Routes, UpstreamAddr},
};
use crate::{
    config::HttpProtocol,
    front::{Held, McpEndpoint, refusal, refusal_retry},
    gateway::Gateway,
    hook::RequestHook,
    names::UpstreamName,
    policy::EndpointName,
    upstream::Upstream,
};

/// The longest refusal body read back from the MCP endpoint's answer.
const MAX_REFUSAL: usize = 64 * 1024;

pub struct Passthrough {
    gateway: Arc<Gateway>,
    endpoint: McpEndpoint,
    routes: Routes,
}

impl Passthrough {
    pub fn new(gateway: Arc<Gateway>, endpoint: McpEndpoint) -> Self {
        Self {
            gateway,
            endpoint,
            routes: Routes::default(),
        }
    }
}

/// What one request carries from filter to filter.
pub struct Ctx {
    started: Instant,
    /// The upstream the request goes to, once known.
    upstream: Option<Target>,
    /// Why Switchyard answers itself instead of the upstream (status, message).
    refusal: Option<(StatusCode, String)>,
    /// Switchyard's own answer instead of the upstream's, whole.
    answer: Option<Response<Bytes>>,
    /// What is counted and recorded of the request (`[[quota]]`, the audit log), if any.
    metered: Option<Metered>,
    /// The principal's place under `[limits]`, held until the request is done.
    _held: Option<Held>,
    /// Whether the request is a POST (its streaming answer is the reply to a message).
    post: bool,
    /// Whether the answer's body runs until a last chunk (or the connection's end) rather
    /// than for a stated length.
    open_ended: bool,
    /// How much the client's connection had taken when the last chunk of the answer's
    /// body went through the filter: unchanged, the chunk is not written yet.
    chunk_filtered_at: Option<u64>,
}

struct Target {
    upstream: Arc<Upstream>,
    route: Arc<UpstreamAddr>,
    hook: Arc<dyn RequestHook>,
    forwarded: Vec<(HeaderName, HeaderValue)>,
}

/// The upstream name of a pass-through path.
fn route(path: &str) -> Option<&str> {
    path.strip_prefix("/servers/")?
        .strip_suffix("/mcp")
        .filter(|name| !name.is_empty() && !name.contains('/'))
}

#[async_trait]
impl ProxyHttp for Passthrough {
    type CTX = Ctx;

    /// No modules: the pass-through neither compresses nor rewrites what goes by.
    fn init_downstream_modules(&self, _modules: &mut HttpModules) {}

    fn new_ctx(&self) -> Ctx {
        Ctx {
            started: Instant::now(),
            upstream: None,
            refusal: None,
            answer: None,
            metered: None,
            _held: None,
            post: false,
            open_ended: false,
            chunk_filtered_at: None,
        }
    }

    async fn request_filter(&self, session: &mut Session, ctx: &mut Ctx) -> Result<bool> {
        ctx.post = session.req_header().method == http::Method::POST;
        match self.admit(session.req_header(), ctx).await {
            Ok(()) => Ok(false),
            Err(response) => {
                answer(session, response).await;
                Ok(true)
            }
        }
    }

    async fn request_body_filter(
        &self,
        _session: &mut Session,
        body: &mut Option<Bytes>,
        end_of_stream: bool,
        ctx: &mut Ctx,
    ) -> Result<()> {
        let Some(metered) = ctx.metered.as_mut() else {
            return Ok(());
        };
        if let Err(refused) = metered.body(&self.gateway, body, end_of_stream).await {
            let status = refused.status().as_u16();
            let (parts, body) = refused.into_parts();
            let body = axum::body::to_bytes(body, MAX_REFUSAL)
                .await
                .unwrap_or_default();
            ctx.answer = Some(Response::from_parts(parts, body));
            return Err(Error::explain(
                ErrorType::HTTPStatus(status),
                "Switchyard refused the call",
            ));
        }
        Ok(())
    }

    async fn upstream_peer(&self, _session: &mut Session, ctx: &mut Ctx) -> Result<Box<HttpPeer>> {
        let target = ctx.upstream.as_ref().ok_or_else(|| {
            Error::explain(
                ErrorType::InternalError,
                "no upstream chosen for the request",
            )
        })?;
        let route = &target.route;
        Ok(Box::new(HttpPeer::new(
            route.addr,
            route.tls,
            route.sni.clone(),
        )))
    }

    async fn upstream_request_filter(
        &self,
        _session: &mut Session,
        request: &mut RequestHeader,
        ctx: &mut Ctx,
    ) -> Result<()> {
        let Some(target) = &ctx.upstream else {
            return Ok(());
        };
        // Of the client's headers, the protocol's go on; the others only as the upstream's
        // rules forward them (its credentials for Switchyard, never).
        let dropped: Vec<HeaderName> = request
            .headers
            .keys()
            .filter(|name| !is_protocol_header(name))
            .cloned()
            .collect();
        for name in &dropped {
            request.remove_header(name);
        }
        request.set_uri(http::Uri::from(target.route.path.clone()));
        request.insert_header(header::HOST, target.route.authority.clone())?;
        for (name, value) in &target.forwarded {
            request.insert_header(name.clone(), value.clone())?;
        }
        let mut added = HeaderMap::new();
        if let Err(error) = target.hook.prepare(&mut added).done().await {
            ctx.refusal = Some((StatusCode::UNAUTHORIZED, error.to_string()));
            return Err(Error::explain(
                ErrorType::HTTPStatus(401),
                "the upstream's authorization is missing",
            ));
        }
        let mut name = None;
        for (key, value) in added {
            if key.is_some() {
                name = key;
            }
            if let Some(name) = &name {
                request.insert_header(name.clone(), value)?;
            }
        }
        Ok(())
    }

    async fn response_filter(
        &self,
        session: &mut Session,
        response: &mut ResponseHeader,
        ctx: &mut Ctx,
    ) -> Result<()> {
        let status = response.status.as_u16();
        ctx.open_ended = !response.headers.contains_key(header::CONTENT_LENGTH);
        if let Some(metered) = ctx.metered.as_mut() {
            metered.answered(is_event_stream(response));
        }
        if ctx.post && status == 200 && ctx.open_ended && is_event_stream(response) {
            // A POST's event stream: its header goes out with the first event, which the
            // upstream sends at once (the reply, or the priming event of a longer stream).
            if let Some(downstream) = ClientStream::of(session.stream()) {
                downstream.hold();
            }
        }
        if let Some(target) = &ctx.upstream
            && (status == 401 || status == 403)
        {
            // The token was refused: the hook renews it for the next request.
            let challenge = response
                .headers
                .get(header::WWW_AUTHENTICATE)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            target
                .hook
                .rejected(status, challenge.as_deref(), &HeaderMap::new())
                .await;
        }
        Ok(())
    }

    fn response_body_filter(
        &self,
        session: &mut Session,
        body: &mut Option<Bytes>,
        end_of_stream: bool,
        ctx: &mut Ctx,
    ) -> Result<Option<std::time::Duration>> {
        if let Some(metered) = ctx.metered.as_mut() {
            metered.answer(body.as_ref());
        }
        let Some(downstream) = ClientStream::of(session.stream()).filter(|_| ctx.open_ended) else {
            return Ok(None);
        };
        let chunk = body.as_ref().is_some_and(|b| !b.is_empty());
        if end_of_stream {
            // The last chunk (or the end after a chunk still to be written in the same
            // batch): pingora writes the end of the stream and flushes right after it.
            if chunk || ctx.chunk_filtered_at == Some(downstream.written()) {
                downstream.hold();
            }
        } else if chunk {
            ctx.chunk_filtered_at = Some(downstream.written());
        }
        Ok(None)
    }

    async fn fail_to_proxy(
        &self,
        session: &mut Session,
        error: &Error,
        ctx: &mut Ctx,
    ) -> FailToProxy {
        if let Some(response) = ctx.answer.take() {
            let code = response.status().as_u16();
            answer(session, response.map(Body::from)).await;
            return FailToProxy {
                error_code: code,
                can_reuse_downstream: false,
            };
        }
        let refused = ctx.refusal.take();
        let Some((status, message)) = refused.or_else(|| failure(error, ctx)) else {
            // The client's connection broke: there is no one to answer.
            return FailToProxy {
                error_code: 0,
                can_reuse_downstream: false,
            };
        };
        let code = status.as_u16();
        answer(session, refusal(status, &message)).await;
        FailToProxy {
            error_code: code,
            can_reuse_downstream: false,
        }
    }

    async fn logging(&self, session: &mut Session, _error: Option<&Error>, ctx: &mut Ctx) {
        let Some(target) = &ctx.upstream else {
            return;
        };
        let status = session.response_written().map(|r| r.status.as_u16());
        if let Some(metered) = ctx.metered.as_mut() {
            metered.finish(&self.gateway, status);
        }
        target
            .route
            .series
            .record(&session.req_header().method, status, ctx.started);
    }
}

impl Passthrough {
    /// Admits the request and finds its upstream, or gives the answer refusing it.
    async fn admit(&self, request: &RequestHeader, ctx: &mut Ctx) -> Result<(), Response<Body>> {
        let not_found = |what: &str| {
            refusal(
                StatusCode::NOT_FOUND,
                &format!("Not Found: {what}; the pass-through routes are /servers/{{name}}/mcp"),
            )
        };
        let name = route(request.uri.path()).ok_or_else(|| not_found("no such route"))?;
        let (principal, held) = self.endpoint.admit(&request.uri, &request.headers).await?;
        ctx._held = Some(held);
        let unknown = || not_found(&format!("no upstream is named `{name}`"));
        let name = UpstreamName::new(name).map_err(|_| unknown())?;
        let live = self.gateway.live();
        let upstream = live.upstream(name.as_str()).ok_or_else(unknown)?.clone();
        let access = live.catalog.access();
        let sees = access
            .view_key(&EndpointName::MAIN, &principal)
            .is_some_and(|key| access.sees_upstream(&key, name.as_str()));
        if !sees {
            // As for an unknown upstream: policy does not tell what it hides.
            return Err(unknown());
        }
        let url = match upstream.http_transport() {
            Some((url, HttpProtocol::StreamableHttp)) => url,
            Some((_, HttpProtocol::Auto)) => {
                return Err(refusal_retry(
                    StatusCode::SERVICE_UNAVAILABLE,
                    &format!(
                        "Service Unavailable: `{name}`'s transport is not known yet (Switchyard \
                         is still connecting to it)"
                    ),
                    std::time::Duration::from_secs(1),
                ));
            }
            _ => {
                return Err(refusal(
                    StatusCode::BAD_REQUEST,
                    &format!(
                        "Bad Request: `{name}` is not a streamable-HTTP upstream (the \
                         pass-through routes proxy only those); use the MCP endpoint"
                    ),
                ));
            }
        };
        let metrics = self.gateway.metrics();
        let route = self
            .routes
            .to(&upstream, url, metrics)
            .await
            .map_err(|reason| {
                refusal(
                    StatusCode::BAD_GATEWAY,
                    &format!("Bad Gateway: `{name}` cannot be reached: {reason}"),
                )
            })?;
        if ctx.post {
            ctx.metered = Metered::of(&self.gateway, &principal, &upstream);
        }
        ctx.upstream = Some(Target {
            hook: upstream.request_hook(&principal).await,
            forwarded: upstream.config().forwarded(&request.headers),
            route,
            upstream,
        });
        Ok(())
    }
}

/// The answer to a request that failed on its way through (`None`: the client's connection
/// broke). The client learns whose side failed and the system's reason, not pingora's
/// context (the upstream's address), which goes to the log.
fn failure(error: &Error, ctx: &Ctx) -> Option<(StatusCode, String)> {
    let upstream = ctx
        .upstream
        .as_ref()
        .map_or("the upstream", |t| t.upstream.name().as_str());
    let root = error.root_cause();
    let reason = match root.downcast_ref::<Error>() {
        Some(innermost) => innermost.etype().as_str().to_owned(),
        None => root.to_string(),
    };
    match error.esource() {
        ErrorSource::Upstream => {
            tracing::warn!(upstream, %error, "a pass-through request failed upstream");
            Some((
                StatusCode::BAD_GATEWAY,
                format!("Bad Gateway: `{upstream}` cannot be reached: {reason}"),
            ))
        }
        ErrorSource::Downstream => match error.etype() {
            ErrorType::ReadError | ErrorType::WriteError | ErrorType::ConnectionClosed => None,
            _ => Some((
                StatusCode::BAD_REQUEST,
                format!("Bad Request: the request could not be read: {reason}"),
            )),
        },
        ErrorSource::Internal | ErrorSource::Unset => {
            tracing::error!(upstream, %error, "a pass-through request failed in Switchyard");
            Some((
                StatusCode::INTERNAL_SERVER_ERROR,
                "Internal Server Error: Switchyard failed to proxy the request".to_owned(),
            ))
        }
    }
}

/// Whether a client's header is part of the protocol (the body's framing, what the client
/// accepts, the MCP headers), and so goes on to the upstream as it is.
fn is_protocol_header(name: &HeaderName) -> bool {
    matches!(
        *name,
        header::CONTENT_TYPE
            | header::CONTENT_LENGTH
            | header::TRANSFER_ENCODING
            | header::ACCEPT
            | header::ACCEPT_ENCODING
            | header::HOST
    ) || name.as_str().starts_with("mcp-")
        || name == "last-event-id"
}

/// Whether an answer is an event stream.
fn is_event_stream(response: &ResponseHeader) -> bool {
    crate::wire::media::is_event_stream(&response.headers)
}

/// Writes `response` (one of Switchyard's own) to the client.
async fn answer(session: &mut Session, response: Response<Body>) {
    let (parts, body) = response.into_parts();
    let body = axum::body::to_bytes(body, MAX_REFUSAL)
        .await
        .unwrap_or_else(|_| Bytes::new());
    let Ok(mut header) = ResponseHeader::build(parts.status, Some(parts.headers.len() + 1)) else {
        return;
    };
    for (name, value) in &parts.headers {
        let _ = header.append_header(name.clone(), value.clone());
    }
    let _ = header.insert_header(header::CONTENT_LENGTH, body.len());
    if session
        .write_response_header(Box::new(header), body.is_empty())
        .await
        .is_ok()
        && !body.is_empty()
    {
        let _ = session.write_response_body(Some(body), true).await;
    }
}

#[cfg(test)]
mod tests {
    use super::route;

    #[test]
    fn routes_name_one_upstream() {
        assert_eq!(route("/servers/notes/mcp"), Some("notes"));
        assert_eq!(route("/servers//mcp"), None);
        assert_eq!(route("/servers/a/b/mcp"), None);
        assert_eq!(route("/servers/notes"), None);
        assert_eq!(route("/mcp"), None);
    }
}
