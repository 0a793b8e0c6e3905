//! Answering one client request. The hot methods take the raw path: `tools/call`,
//! `prompts/get` and `resources/read` are routed as the bytes they came in (`router`), and the
//! four lists are served from the catalog's prepared pages. Everything else goes through rmcp's
//! typed server machinery, one short-lived service per request (`handler`), which keeps the
//! protocol rules of the less frequent methods in one well-tested place.
//!
//! The answer is the work's output; what is sent to the client before it (progress, log
//! messages, requests) goes through the request's outlet, which the front streams.

use std::sync::Arc;

use bytes::Bytes;
use rmcp::{
    model::{
        ClientCapabilities, ClientJsonRpcMessage, Implementation, InitializeRequestParams,
        LoggingLevel, ProgressToken, ProtocolVersion, ServerJsonRpcMessage,
    },
    service::serve_directly_with_ct,
    transport::OneshotTransport,
};
use tokio_util::sync::CancellationToken;

use super::{Session, handler::SessionHandler, upstreams::Source};
use crate::{
    catalog::ListKind,
    downstream::{Downstream, LogLevel, Outlet, PipeReceiver, PipeSender, pipe},
    gateway::Gateway,
    metrics::Outcome,
    policy::{EndpointName, Viewer},
    principal::Principal,
    protocol::{
        Era, META_CLIENT_CAPABILITIES, META_LOG_LEVEL, META_PROGRESS_TOKEN, META_PROTOCOL_VERSION,
    },
    router::{Call, Routed},
    wire::{self, Fields, OwnedRequest},
};

/// Messages a request may have on their way to the client before it waits for it to read.
const OUTLET_CAPACITY: usize = 32;

/// Who made a request.
#[derive(Clone)]
pub enum Caller {
    /// A client in a session, with the principal of this request's own credentials (the same
    /// user as the session's, maybe with other groups, scopes or claims).
    Session(Arc<Session>, Principal),
    /// A 2026-07-28 client; the request stands alone.
    Stateless {
        principal: Principal,
        endpoint: EndpointName,
    },
}

impl Caller {
    pub fn era(&self) -> Era {
        match self {
            Caller::Session(..) => Era::Legacy,
            Caller::Stateless { .. } => Era::Modern,
        }
    }

    /// Whom the catalog is shown to.
    pub fn viewer(&self) -> Viewer<'_> {
        match self {
            Caller::Session(session, principal) => Viewer {
                endpoint: &session.home().endpoint,
                principal,
            },
            Caller::Stateless {
                principal,
                endpoint,
            } => Viewer {
                endpoint,
                principal,
            },
        }
    }

    fn session(&self) -> Option<&Arc<Session>> {
        match self {
            Caller::Session(session, _) => Some(session),
            Caller::Stateless { .. } => None,
        }
    }
}

/// A request being answered: the work that yields the answer, and what it sends the client
/// on the way.
pub struct Served {
    pub work: futures::future::BoxFuture<'static, Bytes>,
    pub messages: PipeReceiver,
}

/// Starts answering `request` of `caller`. `parts` are the HTTP request's (for the typed path,
/// which hands them to handlers).
pub fn serve(
    gateway: &Arc<Gateway>,
    caller: Caller,
    request: OwnedRequest,
    parts: http::request::Parts,
) -> Served {
    let (sender, messages) = pipe(OUTLET_CAPACITY);
    let gateway = gateway.clone();
    // Built only when debug logs are on (its fields are not evaluated otherwise); the router
    // records the upstream and tool. Never the session id itself, nor the arguments.
    let span = tracing::debug_span!(
        "request",
        method = request.method(),
        session = caller.session().map(|s| super::short_hash(s.id())),
        upstream = tracing::field::Empty,
        tool = tracing::field::Empty,
    );
    let work = Box::pin(tracing::Instrument::instrument(
        async move {
            let in_flight = caller.session().map(|session| session.begin(request.id()));
            let ct = match &in_flight {
                Some(in_flight) => in_flight.token.clone(),
                None => CancellationToken::new(),
            };
            let timer = gateway.metrics().request(request.method());
            // A user's own lists of per-user upstreams are found before their first request.
            gateway.discover_personal(caller.viewer().principal).await;
            let answer = answer(&gateway, &caller, &request, parts, sender, &ct).await;
            timer.finish(if wire::is_error_answer(&answer) {
                Outcome::Error
            } else {
                Outcome::Ok
            });
            drop(in_flight);
            answer
        },
        span,
    ));
    Served { work, messages }
}

async fn answer(
    gateway: &Arc<Gateway>,
    caller: &Caller,
    request: &OwnedRequest,
    parts: http::request::Parts,
    outlet: PipeSender,
    ct: &CancellationToken,
) -> Bytes {
    let method = request.method();
    let fast = match method {
        "tools/call" => Some(Fast::Routed(Routed::Tool)),
        "prompts/get" => Some(Fast::Routed(Routed::Prompt)),
        "resources/read" => Some(Fast::Routed(Routed::Resource)),
        "tools/list" => Some(Fast::List(ListKind::Tools)),
        "prompts/list" => Some(Fast::List(ListKind::Prompts)),
        "resources/list" => Some(Fast::List(ListKind::Resources)),
        "resources/templates/list" => Some(Fast::List(ListKind::Templates)),
        _ => None,
    };
    let Some(fast) = fast else {
        let meta = request
            .params()
            .and_then(Fields::of_text)
            .and_then(|params| params.get("_meta").and_then(Fields::of));
        let downstream = downstream(caller, meta.as_ref(), request_outlet(caller, outlet));
        // Boxed: the typed path is the rare one, and its future is large.
        return Box::pin(typed(gateway, caller, request, parts, downstream, ct)).await;
    };
    let id = request.id();
    let params = match request.params().map(Fields::of_text) {
        None => None,
        Some(Some(params)) => Some(params),
        Some(None) => {
            return wire::write::error(Some(id), -32602, "params must be an object", None);
        }
    };
    let meta = params
        .as_ref()
        .and_then(|p| p.get("_meta"))
        .and_then(Fields::of);
    if caller.era() == Era::Modern
        && let Err(error) = check_modern_meta(meta.as_ref())
    {
        return error.answer(id);
    }
    match fast {
        Fast::List(kind) => list(gateway, caller, id, params.as_ref(), kind),
        Fast::Routed(routed) => {
            let downstream = downstream(caller, meta.as_ref(), request_outlet(caller, outlet));
            let source = match caller {
                Caller::Session(session, _) => Source::Session(session.upstreams()),
                Caller::Stateless { principal, .. } => Source::Stateless(principal),
            };
            let call = Call {
                gateway,
                source: &source,
                downstream,
                ct,
            };
            let headers = &parts.headers;
            match call
                .routed(routed, id, params.as_ref(), caller.era(), headers)
                .await
            {
                Some(answer) => answer,
                None => {
                    let downstream = call.downstream.clone();
                    Box::pin(typed(gateway, caller, request, parts, downstream, ct)).await
                }
            }
        }
    }
}

enum Fast {
    Routed(Routed),
    List(ListKind),
}

/// The error for a 2026-07-28 request whose `_meta` lacks what the protocol requires, or names
/// a version Switchyard does not speak.
pub(super) struct MetaError {
    code: i32,
    message: String,
    data: Option<serde_json::Value>,
}

impl MetaError {
    fn answer(self, id: &str) -> Bytes {
        wire::write::error(Some(id), self.code, &self.message, self.data.as_ref())
    }
}

/// What rmcp's handler checks of every 2026-07-28 request, for the requests that do not go
/// through it.
fn check_modern_meta(meta: Option<&Fields<'_>>) -> Result<(), MetaError> {
    let missing = missing_meta(meta);
    if !missing.is_empty() {
        return Err(MetaError {
            code: -32602,
            message: format!(
                "request _meta is missing or has malformed required fields: {}",
                missing.join(", ")
            ),
            data: None,
        });
    }
    let version = meta_version(meta).unwrap_or_default();
    if !crate::protocol::is_known_version(&version) {
        let supported: Vec<&str> = ProtocolVersion::KNOWN_VERSIONS
            .iter()
            .map(|v| v.as_str())
            .collect();
        return Err(MetaError {
            code: -32022,
            message: "Unsupported protocol version".into(),
            data: Some(serde_json::json!({ "requested": version, "supported": supported })),
        });
    }
    Ok(())
}

/// Where a request's messages go: its stream, then its session's.
fn request_outlet(caller: &Caller, stream: PipeSender) -> Outlet {
    Outlet::Request {
        stream,
        session: caller.session().map(|session| session.standalone().clone()),
    }
}

/// The downstream side of a routed request.
fn downstream(caller: &Caller, meta: Option<&Fields<'_>>, outlet: Outlet) -> Arc<Downstream> {
    let progress_token = meta
        .and_then(|meta| meta.get(META_PROGRESS_TOKEN))
        .and_then(|token| serde_json::from_str::<ProgressToken>(token.get()).ok());
    match caller {
        Caller::Session(session, principal) => {
            let home = session.home();
            Arc::new(Downstream {
                outlet,
                asks: home.asks.clone(),
                progress_token,
                capabilities: home.capabilities.clone(),
                principal: principal.clone(),
                endpoint: home.endpoint.clone(),
                log_level: home.log_level.clone(),
            })
        }
        Caller::Stateless {
            principal,
            endpoint,
        } => {
            let field = |key| meta.and_then(|meta: &Fields<'_>| meta.get(key));
            let capabilities = field(META_CLIENT_CAPABILITIES)
                .and_then(|caps| serde_json::from_str::<ClientCapabilities>(caps.get()).ok())
                .unwrap_or_default();
            let log_level = field(META_LOG_LEVEL)
                .and_then(|level| serde_json::from_str::<LoggingLevel>(level.get()).ok())
                .map_or(LogLevel::Unset, LogLevel::Request);
            Arc::new(Downstream {
                outlet,
                asks: None,
                progress_token,
                capabilities: Arc::new(capabilities),
                principal: principal.clone(),
                endpoint: endpoint.clone(),
                log_level,
            })
        }
    }
}

/// A page of one of the merged lists, from the catalog's prepared bytes.
fn list(
    gateway: &Gateway,
    caller: &Caller,
    id: &str,
    params: Option<&Fields<'_>>,
    kind: ListKind,
) -> Bytes {
    let cursor = params
        .and_then(|params| params.get("cursor"))
        .filter(|cursor| cursor.get() != "null");
    let cursor = match cursor.map(|cursor| wire::string(cursor).ok_or(())) {
        None => None,
        Some(Ok(cursor)) => Some(cursor),
        Some(Err(())) => {
            return wire::write::error(Some(id), -32602, "the cursor must be a string", None);
        }
    };
    match gateway.list_page(kind, caller.era(), cursor.as_deref(), caller.viewer()) {
        Ok(page) => wire::write::response(id, std::str::from_utf8(&page).unwrap_or("{}")),
        Err(error) => error.answer(id, caller.era()),
    }
}

/// Everything else, through rmcp's typed handler: one service for this request, on a
/// transport that carries just it and what the handler sends back.
async fn typed(
    gateway: &Arc<Gateway>,
    caller: &Caller,
    request: &OwnedRequest,
    parts: http::request::Parts,
    downstream: Arc<Downstream>,
    ct: &CancellationToken,
) -> Bytes {
    let id = request.id();
    let Outlet::Request { stream: outlet, .. } = downstream.outlet.clone() else {
        unreachable!("a request's downstream side sends on its own stream");
    };
    let mut message: ClientJsonRpcMessage = match serde_json::from_slice(request.body()) {
        Ok(message) => message,
        Err(error) => {
            let text = format!("the request cannot be read: {error}");
            return wire::write::error(Some(id), -32602, &text, None);
        }
    };
    let peer_info = match caller {
        Caller::Session(session, _) => session.client().clone(),
        Caller::Stateless { .. } => stateless_peer(&parts),
    };
    if let ClientJsonRpcMessage::Request(request) = &mut message {
        use rmcp::model::GetExtensions;
        request.request.extensions_mut().insert(parts);
    }
    let handler = SessionHandler::new(gateway.clone(), caller.session().cloned(), downstream);
    let (transport, mut replies) = OneshotTransport::new(message);
    let service = serve_directly_with_ct(handler, transport, Some(peer_info), ct.child_token());
    while let Some(reply) = replies.recv().await {
        let is_answer = matches!(
            reply,
            ServerJsonRpcMessage::Response(_) | ServerJsonRpcMessage::Error(_)
        );
        let bytes = match serde_json::to_vec(&reply) {
            Ok(bytes) => Bytes::from(bytes),
            Err(error) => {
                tracing::error!(%error, "an answer of the typed path cannot be written");
                continue;
            }
        };
        if is_answer {
            drop(service);
            return bytes;
        }
        if outlet.send(bytes).await.is_err() {
            break;
        }
    }
    drop(service);
    wire::write::error(
        Some(id),
        -32603,
        "the request ended without an answer",
        None,
    )
}

/// What a stateless request tells of its client for rmcp's handler: the version of its
/// `MCP-Protocol-Version` header (2025-03-26 without one).
fn stateless_peer(parts: &http::request::Parts) -> InitializeRequestParams {
    let version = parts
        .headers
        .get("mcp-protocol-version")
        .and_then(|value| value.to_str().ok())
        .and_then(|text| serde_json::from_value(serde_json::Value::String(text.into())).ok())
        .unwrap_or(ProtocolVersion::V_2025_03_26);
    InitializeRequestParams::new(ClientCapabilities::default(), Implementation::default())
        .with_protocol_version(version)
}

/// The `_meta` object of `params`, if there is one (for the front's classification).
pub fn meta_of<'a>(params: &Fields<'a>) -> Option<Fields<'a>> {
    params.get("_meta").and_then(Fields::of)
}

/// Whether `meta` holds a complete 2026-07-28 request lifecycle (version and capabilities).
pub fn has_modern_meta(meta: Option<&Fields<'_>>) -> bool {
    missing_meta(meta).is_empty()
}

/// The keys of the 2026-07-28 lifecycle that `meta` lacks (or has malformed).
fn missing_meta(meta: Option<&Fields<'_>>) -> Vec<&'static str> {
    let version = meta
        .and_then(|meta| meta.get(META_PROTOCOL_VERSION))
        .filter(|value| value.get().starts_with('"'));
    let capabilities = meta
        .and_then(|meta| meta.get(META_CLIENT_CAPABILITIES))
        .filter(|value| value.get().starts_with('{'));
    let mut missing = Vec::new();
    if version.is_none() {
        missing.push(META_PROTOCOL_VERSION);
    }
    if capabilities.is_none() {
        missing.push(META_CLIENT_CAPABILITIES);
    }
    missing
}

/// The version a 2026-07-28 request names in its `_meta`.
pub fn meta_version<'a>(meta: Option<&Fields<'a>>) -> Option<std::borrow::Cow<'a, str>> {
    meta.and_then(|meta| meta.get(META_PROTOCOL_VERSION))
        .and_then(wire::string)
}
