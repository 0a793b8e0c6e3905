//! POST: one JSON-RPC message. The transport's checks in the order clients and the
//! conformance suite expect (what it accepts, what it sent, the body, the protocol version),
//! then which era the message belongs to, then its session: the message is answered in it, or,
//! for a 2026-07-28 request, on its own.

use std::sync::Arc;

use axum::body::Body;
use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode, request::Parts};
use http_body_util::{BodyExt, Limited};
use rmcp::model::{InitializeRequestParams, RequestId, ServerJsonRpcMessage, ServerResult};

use super::{
    Endpoint, Settings,
    checks::{self, VersionHeader},
    limits,
    reply::{self, Begun, EventIds, EventStream, RefusalResponse},
};
use crate::{
    config::Limits,
    policy::{EndpointName, Viewer},
    principal::Principal,
    protocol::{Era, MCP_SESSION_ID, MODERN},
    session::{Caller, Served, Session, has_modern_meta, meta_of, meta_version, negotiate, serve},
    wire::{self, Fields, Message, OwnedRequest},
};

/// How a message's era was told.
struct Classified {
    era: Era,
    /// The message is an `initialize` with valid parameters: a handshake.
    handshake: Option<InitializeRequestParams>,
    /// A 2026-07-28 request whose `_meta` lacks what the lifecycle requires.
    meta_malformed: bool,
}

impl Endpoint {
    pub(super) async fn post(&self, request: Request<Body>, settings: &Settings) -> Response<Body> {
        let (max_body, body_timeout) = (settings.max_body, settings.body_timeout);
        let limits = settings.limiter.limits();
        let (parts, body) = request.into_parts();
        if !checks::accepts_both(&parts.headers) {
            return reply::refusal(
                StatusCode::NOT_ACCEPTABLE,
                "Not Acceptable: Client must accept both application/json and text/event-stream",
            );
        }
        if !crate::wire::media::is_json(&parts.headers) {
            return reply::refusal(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "Unsupported Media Type: Content-Type must be application/json",
            );
        }
        let reading = tokio::time::timeout(body_timeout, Limited::new(body, max_body).collect());
        let Ok(body) = reading.await else {
            let message = format!(
                "Request Timeout: the body did not arrive within {}s",
                body_timeout.as_secs_f64()
            );
            return reply::refusal(StatusCode::REQUEST_TIMEOUT, &message);
        };
        let body = match body {
            Ok(body) => body.to_bytes(),
            Err(error) if error.is::<http_body_util::LengthLimitError>() => {
                let message = format!("Payload Too Large: request body exceeds {max_body} bytes");
                return reply::refusal(StatusCode::PAYLOAD_TOO_LARGE, &message);
            }
            Err(_) => {
                return reply::refusal(
                    StatusCode::BAD_REQUEST,
                    "Bad Request: the body could not be read",
                );
            }
        };
        if wire::nested_deeper_than(&body, limits.max_json_depth) {
            let message = format!(
                "Invalid Request: the JSON is nested deeper than {} levels",
                limits.max_json_depth
            );
            return reply::error(StatusCode::BAD_REQUEST, None, -32600, &message);
        }
        let message = match wire::parse(&body) {
            Ok(message) => message,
            Err(error) => {
                return reply::error(
                    StatusCode::BAD_REQUEST,
                    None,
                    error.code(),
                    &error.to_string(),
                );
            }
        };
        let version = VersionHeader::of(&parts.headers);
        if version == VersionHeader::Invalid {
            return reply::refusal(
                StatusCode::BAD_REQUEST,
                "Bad Request: Invalid MCP-Protocol-Version header encoding",
            );
        }
        let session_id = parts
            .headers
            .get(MCP_SESSION_ID)
            .and_then(|value| value.to_str().ok());
        let classified = match classify(&message, version, session_id.is_some()) {
            Ok(classified) => classified,
            Err(response) => return *response,
        };
        if let Err(response) = self.standard_headers(&parts, &message, version) {
            return *response;
        }
        match (classified.era, session_id) {
            (Era::Legacy, Some(id)) => match self.session_for(id, &parts.extensions).await {
                Ok(session)
                    if matches!(message, Message::Request(_))
                        && session.in_flight_count()
                            >= limits.max_in_flight_per_session as usize =>
                {
                    limits::too_many(
                        &format!(
                            "Too Many Requests: this session has {} requests being answered already",
                            limits.max_in_flight_per_session
                        ),
                        std::time::Duration::from_secs(1),
                    )
                }
                Ok(session) => self.in_session(session, message, &body, parts).await,
                Err(refusal) => *refusal,
            },
            (Era::Legacy, None) => match (message, classified.handshake) {
                (Message::Request(request), Some(params)) => {
                    if let Some(refusal) = self.session_quota(&parts, limits) {
                        return refusal;
                    }
                    self.open_session(request.id.get(), params, &parts).await
                }
                (Message::Request(request), None) if request.method == "server/discover" => {
                    self.stateless(&request, &body, parts, false).await
                }
                _ => reply::refusal(
                    StatusCode::BAD_REQUEST,
                    "Bad Request: Session ID is required",
                ),
            },
            (Era::Modern, _) => match message {
                Message::Request(request) => {
                    self.stateless(&request, &body, parts, classified.meta_malformed)
                        .await
                }
                Message::Notification(_) => reply::accepted(),
                Message::Response { .. } | Message::Error { .. } => reply::error(
                    StatusCode::BAD_REQUEST,
                    None,
                    -32600,
                    "stateless server does not accept JSON-RPC responses",
                ),
            },
        }
    }

    /// A message of a session's client.
    async fn in_session(
        &self,
        session: Arc<Session>,
        message: Message<'_>,
        body: &Bytes,
        parts: Parts,
    ) -> Response<Body> {
        match message {
            Message::Request(request) => {
                let request = OwnedRequest::new(body.clone(), &request);
                let ids = EventIds::Request(session.next_stream());
                // The session pins the user; what this request may see and do is decided by
                // the credentials it carries (a narrower token sees less).
                let (principal, _) = caller_of(&parts);
                let caller = Caller::Session(session, principal);
                let Served { work, messages } = serve(&self.gateway, caller, request, parts);
                // A session's client is always answered on a stream (it may resume one).
                match reply::begin(ids, work, messages).await {
                    Begun::Answered(answer) => EventStream::single(ids, answer),
                    Begun::Streaming(stream) => {
                        stream.counted(&self.gateway.metrics().streams_open)
                    }
                }
                .into_response()
            }
            Message::Notification(notification) => {
                notice(&session, notification);
                reply::accepted()
            }
            Message::Response { id, result } => {
                if !session.asks().answer(id, Ok(result)) {
                    // With replicas, the request may have been sent by another one.
                    session.relay(self.gateway.store(), body).await;
                }
                reply::accepted()
            }
            Message::Error { id, error } => {
                if let Some(id) = id
                    && !session.asks().answer(id, Err(error))
                {
                    session.relay(self.gateway.store(), body).await;
                }
                reply::accepted()
            }
        }
    }

    /// The refusal of a new session for a principal who has as many as they may.
    fn session_quota(&self, parts: &Parts, limits: &Limits) -> Option<Response<Body>> {
        let max = limits.max_sessions_per_principal?;
        let principal = parts.extensions.get::<Principal>()?;
        (self.sessions.count_for(principal) >= max as usize).then(|| {
            limits::too_many(
                &format!(
                    "Too Many Requests: this user has {max} sessions open; end one (DELETE) or wait until an idle one expires"
                ),
                std::time::Duration::from_secs(1),
            )
        })
    }

    /// `initialize` without a session: a new session, and the answer on its first stream.
    async fn open_session(
        &self,
        id: &str,
        params: InitializeRequestParams,
        parts: &Parts,
    ) -> Response<Body> {
        let (principal, endpoint) = caller_of(parts);
        let viewer = Viewer {
            endpoint: &endpoint,
            principal: &principal,
        };
        let catalog = self.gateway.catalog_for(viewer);
        let result = match negotiate(&self.gateway, &catalog, &params) {
            Ok(result) => result,
            Err(error) => {
                let message =
                    wire::write::error(Some(id), error.code.0, &error.message, error.data.as_ref());
                return EventStream::single(EventIds::Standalone, message).into_response();
            }
        };
        let session = self
            .new_session(
                params,
                result.protocol_version.clone(),
                principal,
                endpoint,
                catalog.versions(),
            )
            .await;
        let session_id = session.id().clone();
        let request_id = serde_json::from_str::<RequestId>(id).unwrap_or(RequestId::Number(0));
        let answer =
            ServerJsonRpcMessage::response(ServerResult::InitializeResult(result), request_id);
        let answer = serde_json::to_vec(&answer).unwrap_or_default();
        let mut response = EventStream::single(EventIds::Standalone, answer.into()).into_response();
        if let Ok(value) = HeaderValue::from_str(&session_id) {
            response.headers_mut().insert(MCP_SESSION_ID, value);
        }
        response
    }

    /// A request that stands alone (2026-07-28, or `server/discover`): answered with JSON, or
    /// with a stream if something is sent before the answer.
    async fn stateless(
        &self,
        request: &wire::Request<'_>,
        body: &Bytes,
        parts: Parts,
        meta_malformed: bool,
    ) -> Response<Body> {
        let (principal, endpoint) = caller_of(&parts);
        let request = OwnedRequest::new(body.clone(), request);
        let Served { work, messages } = serve(
            &self.gateway,
            Caller::Stateless {
                principal,
                endpoint,
            },
            request,
            parts,
        );
        match reply::begin(EventIds::None, work, messages).await {
            Begun::Answered(answer) => {
                reply::json(reply::modern_status(&answer, meta_malformed), answer)
            }
            Begun::Streaming(stream) => stream.into_response(),
        }
    }

    /// The SEP-2243 headers of a 2026-07-28 message must agree with its body.
    fn standard_headers(
        &self,
        parts: &Parts,
        message: &Message<'_>,
        version: VersionHeader<'_>,
    ) -> Result<(), RefusalResponse> {
        let modern = version.text().is_some_and(|v| Era::of(v) == Era::Modern);
        let (id, method, params) = match message {
            Message::Request(request) if modern => {
                (Some(request.id), request.method, request.params)
            }
            Message::Notification(notification) if modern => {
                (None, notification.method, notification.params)
            }
            _ => return Ok(()),
        };
        let params = params.and_then(Fields::of);
        let param_headers = (method == "tools/call")
            .then(|| params.as_ref()?.get("name").and_then(wire::string))
            .flatten()
            .and_then(|name| {
                let (principal, endpoint) = caller_of(parts);
                let catalog = self.gateway.catalog_for(Viewer {
                    endpoint: &endpoint,
                    principal: &principal,
                });
                catalog.tool_route(&name)?.param_headers.clone()
            });
        checks::standard_headers(
            &parts.headers,
            method,
            params.as_ref(),
            param_headers.as_deref(),
        )
        .map_err(|reason| {
            Box::new(reply::error(
                StatusCode::BAD_REQUEST,
                id.map(|id| id.get()),
                -32020,
                &reason,
            ))
        })
    }
}

/// Who made the request and the endpoint it came to, as the front found them.
fn caller_of(parts: &Parts) -> (Principal, EndpointName) {
    let extensions = &parts.extensions;
    (
        extensions.get::<Principal>().cloned().unwrap_or_default(),
        extensions
            .get::<EndpointName>()
            .cloned()
            .unwrap_or_default(),
    )
}

/// Which era `message` belongs to, as rmcp's transport decides it; or the answer refusing it.
fn classify(
    message: &Message<'_>,
    version: VersionHeader<'_>,
    in_session: bool,
) -> Result<Classified, RefusalResponse> {
    let legacy_header = matches!(version, VersionHeader::Absent)
        || matches!(version, VersionHeader::Known(v) if Era::of(v) == Era::Legacy);
    let Message::Request(request) = message else {
        let era = version.text().map_or(Era::Legacy, Era::of);
        if let VersionHeader::Unknown(v) = version {
            return Err(Box::new(unsupported_version(v)));
        }
        return Ok(Classified {
            era,
            handshake: None,
            meta_malformed: false,
        });
    };
    // The hot case: a request in a session that speaks a legacy version.
    if in_session && legacy_header && request.method != "initialize" {
        return Ok(Classified {
            era: Era::Legacy,
            handshake: None,
            meta_malformed: false,
        });
    }
    let params = request.params.and_then(Fields::of);
    let meta = params.as_ref().and_then(meta_of);
    let meta_version = meta_version(meta.as_ref());
    if let VersionHeader::Unknown(v) = version
        && meta_version.is_none()
    {
        return Err(Box::new(unsupported_version(v)));
    }
    let id = Some(request.id.get());
    let handshake = (request.method == "initialize")
        .then(|| serde_json::from_str::<InitializeRequestParams>(request.params?.get()).ok())
        .flatten();
    if let Some(params) = &handshake {
        if let Some(header) = version.text()
            && header != params.protocol_version.as_str()
        {
            let message = format!(
                "Invalid Request: MCP-Protocol-Version header ({header}) does not match initialize params.protocolVersion ({})",
                params.protocol_version
            );
            return Err(Box::new(reply::error(
                StatusCode::BAD_REQUEST,
                id,
                -32600,
                &message,
            )));
        }
        return Ok(Classified {
            era: Era::Legacy,
            handshake,
            meta_malformed: false,
        });
    }
    if let Some(meta_version) = &meta_version {
        let message = match version.text() {
            None => Some(
                "request _meta protocolVersion requires MCP-Protocol-Version header".to_owned(),
            ),
            Some(header) if header != meta_version => Some(format!(
                "MCP-Protocol-Version header ({header}) does not match request _meta protocolVersion ({meta_version})"
            )),
            Some(_) => None,
        };
        if let Some(message) = message {
            return Err(Box::new(reply::error(
                StatusCode::BAD_REQUEST,
                id,
                -32020,
                &message,
            )));
        }
    }
    let complete_meta = has_modern_meta(meta.as_ref());
    let stated = meta_version
        .as_deref()
        .or(version.text())
        .unwrap_or("2025-03-26");
    let era = if complete_meta || stated >= MODERN.as_str() {
        Era::Modern
    } else {
        Era::Legacy
    };
    Ok(Classified {
        era,
        handshake: None,
        meta_malformed: era == Era::Modern && !complete_meta,
    })
}

fn unsupported_version(version: &str) -> Response<Body> {
    reply::refusal(
        StatusCode::BAD_REQUEST,
        &format!("Bad Request: Unsupported MCP-Protocol-Version: {version}"),
    )
}

/// A notification of a session's client.
fn notice(session: &Arc<Session>, notification: wire::Notification<'_>) {
    match notification.method {
        "notifications/cancelled" => {
            let id = notification
                .params
                .and_then(Fields::of)
                .and_then(|params| params.get("requestId"));
            if let Some(id) = id {
                session.cancel(id.get());
            }
        }
        "notifications/roots/list_changed" => {
            let session = session.clone();
            tokio::spawn(async move { session.upstreams().roots_changed().await });
        }
        // `initialized`, and progress on what the client was asked: nothing to do.
        _ => {}
    }
}
