//! POST: one JSON-RPC message. The transport's checks in the order clients and the
//! conformance suite expect (what it accepts, what it sent, the body, the protocol version),
//! then which era the message belongs to, then its session: the message is answered in it, or,
//! for a 2026-07-28 request, on its own.

use std::sync::Arc;

use axum::body::Body;
use http::{HeaderValue, Request, Response, StatusCode, request::Parts};
use rmcp::model::{InitializeRequestParams, RequestId, ServerJsonRpcMessage, ServerResult};

use super::{
    Endpoint, Settings,
    body::read_whole,
    checks::{self, VersionHeader},
    limits,
    reply::{self, Begun, EventIds, EventStream, RefusalResponse},
};
use crate::{
    catalog::Features,
    config::Limits,
    downstream::TaskSupport,
    error::GatewayError,
    gateway::Live,
    principal::Principal,
    protocol::{Era, MCP_SESSION_ID, MODERN},
    request::Caller,
    router::{Routed, Target},
    session::{Client, Served, Session, has_modern_meta, meta_version, negotiate, serve},
    wire::{self, Fields, Message, Parsed, ParsedRequest},
};

/// A request as it arrived: its head, who sent it, and the snapshot it is answered from
/// (loaded once, as it arrived).
type Arrival = (Parts, Caller, Arc<Live>);

/// How a message's era was told.
struct Classified {
    era: Era,
    /// The message is an `initialize` with valid parameters: a handshake.
    handshake: Option<InitializeRequestParams>,
    /// A 2026-07-28 request whose `_meta` lacks what the lifecycle requires.
    meta_malformed: bool,
}

impl Endpoint {
    pub(super) async fn post(
        &self,
        request: Request<Body>,
        (settings, live): (&Settings, Arc<Live>),
        caller: Caller,
    ) -> Response<Body> {
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
        let body = match read_whole(body, max_body, body_timeout).await {
            Ok(body) => body,
            Err(refused) => return refused,
        };
        if wire::nested_deeper_than(&body, limits.max_json_depth) {
            let message = format!(
                "Invalid Request: the JSON is nested deeper than {} levels",
                limits.max_json_depth
            );
            return reply::error(StatusCode::BAD_REQUEST, None, -32600, &message);
        }
        let parsed = match Parsed::read(body) {
            Ok(parsed) => parsed,
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
        let classified = match classify(&parsed, version, session_id.is_some()) {
            Ok(classified) => classified,
            Err(response) => return *response,
        };
        match (classified.era, session_id) {
            (Era::Legacy, Some(id)) => match self.session_for(id, &caller).await {
                Ok(session)
                    if matches!(parsed.message(), Message::Request(_))
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
                Ok(session) => {
                    let json = settings.json_response;
                    self.in_session(session, parsed, (parts, caller, live), json)
                        .await
                }
                Err(refusal) => *refusal,
            },
            (Era::Legacy, None) => match (parsed.into_request(), classified.handshake) {
                (Ok(request), Some(params)) => {
                    if let Some(refusal) = self.session_quota(&caller.principal, limits) {
                        return refusal;
                    }
                    let json = settings.json_response;
                    let capabilities = request.params().and_then(|p| p.get("capabilities"));
                    let tasks =
                        TaskSupport::declared_in(capabilities.and_then(Fields::of).as_ref());
                    // Boxed: once per session, and large.
                    Box::pin(self.open_session(request.id(), (params, tasks), (caller, live), json))
                        .await
                }
                (Ok(request), None) if request.method() == "server/discover" => {
                    let request = self.request(request, (parts, caller, live), Era::Modern);
                    self.stateless(request.await, None, false).await
                }
                _ => reply::refusal(
                    StatusCode::BAD_REQUEST,
                    "Bad Request: Session ID is required",
                ),
            },
            (Era::Modern, _) => {
                self.modern(parsed, (parts, caller, live), classified.meta_malformed)
                    .await
            }
        }
    }

    /// The request as the layers below see it, of a client of `era` (a session's is of the
    /// legacy one; one that stands alone, of 2026-07-28), answered from the snapshot in force
    /// once the caller's own lists of per-user upstreams are found.
    async fn request(
        &self,
        message: ParsedRequest,
        (parts, caller, live): Arrival,
        era: Era,
    ) -> crate::request::Request {
        self.gateway
            .discover_personal(&live, &caller.principal)
            .await;
        crate::request::Request::new(live, caller, era, message, parts.headers)
    }

    /// A message of a session's client. `json`: an answer that comes before anything else is
    /// sent as JSON (`[server] json_response`), not as a one-event stream.
    async fn in_session(
        &self,
        session: Arc<Session>,
        parsed: Parsed,
        arrival: Arrival,
        json: bool,
    ) -> Response<Body> {
        let parsed = match parsed.into_request() {
            Ok(message) => {
                // The session pins the user; what this request may see and do is decided by
                // the credentials it carries (a narrower token sees less).
                let request = (self.request(message, arrival, Era::Legacy).await)
                    .declaring(session.features());
                let ids = EventIds::Request(session.next_stream());
                let Served { work, messages } =
                    serve(&self.gateway, request, Client::Session(session), None);
                // A session's client is answered on a stream (it may resume one), or with
                // JSON in JSON mode when nothing came before the answer.
                return match reply::begin(ids, work, messages).await {
                    Begun::Answered(answer) => match reply::beyond_quota(&answer) {
                        Some(refusal) => return refusal,
                        None if json => return reply::json(StatusCode::OK, answer.message),
                        None => EventStream::single(ids, answer.message),
                    },
                    Begun::Streaming(stream) => {
                        stream.counted(&self.gateway.metrics().streams_open)
                    }
                }
                .into_response();
            }
            Err(parsed) => parsed,
        };
        let answered = match *parsed.message() {
            Message::Notification(notification) => {
                notice(&session, notification.method, parsed.params());
                return reply::accepted();
            }
            Message::Response { id, result } => session.asks().answer(id, Ok(result)),
            Message::Error {
                id: Some(id),
                error,
            } => session.asks().answer(id, Err(error)),
            Message::Error { id: None, .. } | Message::Request(_) => true,
        };
        if !answered {
            // With replicas, the request may have been sent by another one.
            session.relay(self.gateway.store(), parsed.body()).await;
        }
        reply::accepted()
    }

    /// The refusal of a new session for a principal who has as many as they may.
    fn session_quota(&self, principal: &Principal, limits: &Limits) -> Option<Response<Body>> {
        let max = limits.max_sessions_per_principal?;
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
        (params, tasks): (InitializeRequestParams, TaskSupport),
        (caller, live): (Caller, Arc<Live>),
        json: bool,
    ) -> Response<Body> {
        let catalog = live.view(caller.viewer(), Features::ALL);
        let result = match negotiate(&self.gateway, &catalog, &params) {
            Ok(result) => result,
            Err(error) => {
                let message =
                    wire::write::error(Some(id), error.code.0, &error.message, error.data.as_ref());
                return EventStream::single(EventIds::Standalone, message).into_response();
            }
        };
        let Caller {
            principal,
            endpoint,
        } = caller;
        let session = self
            .new_session(
                (params, tasks),
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
        let answer = crate::session::announce_tasks(answer.into(), &catalog);
        let mut response = if json {
            reply::json(StatusCode::OK, answer)
        } else {
            EventStream::single(EventIds::Standalone, answer).into_response()
        };
        if let Ok(value) = HeaderValue::from_str(&session_id) {
            response.headers_mut().insert(MCP_SESSION_ID, value);
        }
        response
    }

    /// A 2026-07-28 message. Its SEP-2243 headers must agree with its body: for a tool call,
    /// with the params its tool's schema names, so the tool is looked up here (once: the
    /// request goes on with what was found).
    async fn modern(
        &self,
        parsed: Parsed,
        arrival: Arrival,
        meta_malformed: bool,
    ) -> Response<Body> {
        let (parsed, arrival) = match parsed.into_request() {
            Ok(message) => {
                let request = self.request(message, arrival, Era::Modern).await;
                let found = (request.method() == Routed::Tool.method())
                    .then(|| Target::of(&request, Routed::Tool));
                let param_headers = found
                    .as_ref()
                    .and_then(|found| found.as_ref().ok()?.param_headers.as_deref());
                let checked = checks::standard_headers(
                    &request.headers,
                    request.method(),
                    request.message.params(),
                    param_headers,
                );
                if let Err(reason) = checked {
                    let id = Some(request.id());
                    return reply::error(StatusCode::BAD_REQUEST, id, -32020, &reason);
                }
                return self.stateless(request, found, meta_malformed).await;
            }
            Err(parsed) => (parsed, arrival),
        };
        match parsed.message() {
            Message::Notification(notification) => {
                let checked = checks::standard_headers(
                    &arrival.0.headers,
                    notification.method,
                    parsed.params(),
                    None,
                );
                match checked {
                    Ok(()) => reply::accepted(),
                    Err(reason) => reply::error(StatusCode::BAD_REQUEST, None, -32020, &reason),
                }
            }
            _ => reply::error(
                StatusCode::BAD_REQUEST,
                None,
                -32600,
                "stateless server does not accept JSON-RPC responses",
            ),
        }
    }

    /// A request that stands alone (2026-07-28, or `server/discover`): answered with JSON, or
    /// with a stream if something is sent before the answer.
    async fn stateless(
        &self,
        request: crate::request::Request,
        found: Option<Result<Target, GatewayError>>,
        meta_malformed: bool,
    ) -> Response<Body> {
        let Served { work, messages } = serve(
            &self.gateway,
            request,
            Client::Alone(self.sessions.parked().clone()),
            found,
        );
        match reply::begin(EventIds::None, work, messages).await {
            Begun::Answered(answer) => reply::beyond_quota(&answer).unwrap_or_else(|| {
                reply::json(
                    reply::modern_status(&answer, meta_malformed),
                    answer.message,
                )
            }),
            Begun::Streaming(stream) => stream.into_response(),
        }
    }
}

/// Which era `message` belongs to, as rmcp's transport decides it; or the answer refusing it.
fn classify(
    parsed: &Parsed,
    version: VersionHeader<'_>,
    in_session: bool,
) -> Result<Classified, RefusalResponse> {
    let message = parsed.message();
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
    let meta = parsed.meta();
    let meta_version = meta_version(meta);
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
    let complete_meta = has_modern_meta(meta);
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
fn notice(session: &Arc<Session>, method: &str, params: Option<&Fields<'_>>) {
    match method {
        "notifications/cancelled" => {
            if let Some(id) = params.and_then(|params| params.get("requestId")) {
                session.cancel(id.get());
            }
        }
        crate::downstream::TASK_STATUS => {
            if let Some(params) = params {
                session.asks().reports.pass_status(params);
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
