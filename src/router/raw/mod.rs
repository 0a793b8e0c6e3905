//! The raw path of the routed requests (`tools/call`, `prompts/get`, `resources/read`) to
//! streamable-HTTP upstreams: the client's params go on as the bytes they came in, but for the
//! name or URI (restored to the upstream's own) and the `_meta` keys that must change; the
//! upstream's answer comes back as bytes, with only the client's id put back (and resource URIs
//! mapped, where the catalog maps them). What the upstream sends meanwhile is passed on:
//! progress and log messages straight to the client, requests for the client through rmcp's
//! handler of the connection, which the relay points at this request.
//!
//! Requests that need more than relaying go the typed way: to a server that speaks only
//! 2026-07-28 for a session client (its `input_required` must be answered by asking the
//! client), to other transports, and calls of tools whose schema asks for `Mcp-Param-*`
//! headers.

// Logging is deprecated by SEP-2577 but still relayed on the legacy protocol.
#![allow(deprecated)]

mod rewrite;

use std::sync::Arc;

use bytes::Bytes;
use rmcp::model::{
    CancelledNotification, CancelledNotificationParam, ClientNotification,
    LoggingMessageNotificationParam, RequestId, ServerJsonRpcMessage,
};
use serde_json::value::RawValue;

use super::{
    Call, ConnectionSource, log_failure,
    timeout::{Stage, Timer},
    uris,
};
use crate::{
    catalog::NameScheme,
    downstream::Downstream,
    error::GatewayError,
    gateway::unavailable,
    metrics::ToolOutcome,
    names::UpstreamName,
    protocol::Era,
    upstream::{
        Connection, ExchangeError, Outgoing, RawLink, Step, Upstream, log_upstream_message,
    },
    wire::{self, Edit, Fields},
};

pub use rewrite::{Rewrite, client_answer, upstream_request};
use rewrite::{relay_error, reports_tool_error};

/// Which routed request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Routed {
    Tool,
    Prompt,
    Resource,
}

impl Routed {
    pub fn method(self) -> &'static str {
        match self {
            Routed::Tool => "tools/call",
            Routed::Prompt => "prompts/get",
            Routed::Resource => "resources/read",
        }
    }

    /// The param that names what is asked for.
    fn field(self) -> &'static str {
        match self {
            Routed::Resource => "uri",
            Routed::Tool | Routed::Prompt => "name",
        }
    }
}

/// Where a routed request goes, as the catalog says.
struct Target {
    upstream: UpstreamName,
    /// The tool or prompt name, or the URI, as the upstream knows it.
    original: String,
    scheme: NameScheme,
    /// A tool whose schema asks for `Mcp-Param-*` headers.
    param_headers: bool,
    /// The client's headers the upstream's rules pass on.
    forwarded: Vec<(http::HeaderName, http::HeaderValue)>,
}

impl<S: ConnectionSource> Call<'_, S> {
    /// Answers a routed request of a client of `era` on the raw path: the answer, as a
    /// JSON-RPC message for request `id`; `None` when it must go the typed way.
    pub async fn routed(
        &self,
        kind: Routed,
        id: &str,
        params: Option<&Fields<'_>>,
        era: Era,
        client_headers: &http::HeaderMap,
    ) -> Option<Bytes> {
        let result = match self.target(kind, params) {
            Ok(mut target) => {
                let upstream = match self.gateway.serving_upstream(&target.upstream) {
                    Ok(upstream) => upstream,
                    Err(error) => return Some(self.failed(id, error, era)),
                };
                target.forwarded = upstream.config().forwarded(client_headers);
                if !takes_raw(&upstream, kind, &target, era) {
                    return None;
                }
                let span = tracing::Span::current();
                span.record("upstream", upstream.name().as_str());
                if kind == Routed::Tool {
                    span.record("tool", target.original.as_str());
                }
                let started = std::time::Instant::now();
                let result = self
                    .forward(&upstream, kind, &target, id, params?, era)
                    .await;
                if kind == Routed::Tool {
                    let outcome = match &result {
                        Ok(answer) if wire::is_error_answer(answer) => ToolOutcome::Error,
                        Ok(answer) if reports_tool_error(answer) => ToolOutcome::ToolError,
                        Ok(_) => ToolOutcome::Success,
                        Err(_) => ToolOutcome::Error,
                    };
                    super::record_tool(&upstream, &target.original, outcome, started);
                }
                result
            }
            Err(error) => Err(error),
        };
        Some(match result {
            Ok(answer) => answer,
            Err(error) => self.failed(id, error, era),
        })
    }

    fn failed(&self, id: &str, error: GatewayError, era: Era) -> Bytes {
        log_failure(&error);
        error
            .for_client(&self.downstream.capabilities)
            .answer(id, era)
    }

    fn target(&self, kind: Routed, params: Option<&Fields<'_>>) -> Result<Target, GatewayError> {
        let field = kind.field();
        let name = params
            .and_then(|params| params.get(field))
            .and_then(wire::string)
            .ok_or_else(|| GatewayError::InvalidParams(format!("`{field}` must be a string")))?;
        match kind {
            Routed::Tool => {
                let catalog = self.catalog();
                let route = catalog.tool_route(&name).ok_or_else(|| {
                    self.gateway
                        .missing_name(&catalog, &name, GatewayError::UnknownTool)
                })?;
                Ok(Target {
                    upstream: route.route.upstream.clone(),
                    original: route.route.original.to_string(),
                    scheme: catalog.scheme().clone(),
                    param_headers: route.param_headers.is_some(),
                    forwarded: Vec::new(),
                })
            }
            Routed::Prompt => {
                let (route, scheme) = self.prompt_route(&name)?;
                Ok(Target {
                    upstream: route.upstream,
                    original: route.original.to_string(),
                    scheme,
                    param_headers: false,
                    forwarded: Vec::new(),
                })
            }
            Routed::Resource => {
                let (upstream, original, scheme) =
                    super::resolve_uri(self.gateway, &self.catalog(), &name)?;
                Ok(Target {
                    upstream,
                    original,
                    scheme,
                    param_headers: false,
                    forwarded: Vec::new(),
                })
            }
        }
    }

    /// Sends the request on the raw path and relays what comes back, within the upstream's
    /// limits and timeouts, as the typed `send` does.
    async fn forward(
        &self,
        upstream: &Arc<Upstream>,
        kind: Routed,
        target: &Target,
        id: &str,
        params: &Fields<'_>,
        era: Era,
    ) -> Result<Bytes, GatewayError> {
        let tool = (kind == Routed::Tool).then_some(target.original.as_str());
        let mut timer = Timer::start(upstream, tool);
        let outage = upstream.outage();
        tokio::pin!(outage);
        let _admitted = self.admit(upstream, &mut timer).await?;
        let mut retried = false;
        loop {
            let connection = self.connect(upstream, &mut timer).await?;
            let Some(raw) = connection.raw() else {
                return Err(GatewayError::Internal(format!(
                    "upstream `{}` has no raw path on its connection",
                    upstream.name()
                )));
            };
            let number = raw.next_id();
            let rewrite = Rewrite {
                era: raw.era(),
                has_progress: self.downstream.progress_token.is_some(),
            };
            let outgoing = Outgoing {
                id: number,
                method: kind.method(),
                name: &target.original,
                body: upstream_request(kind, number, &target.original, params, rewrite),
                forwarded: &target.forwarded,
            };
            let request_id = RequestId::Number(number);
            let exchange = Exchanging {
                connection: &connection,
                raw,
                request_id: &request_id,
                upstream,
            };
            match exchange.run(self, &outgoing, &mut timer, &mut outage).await {
                Err(Stop::Exchange(ExchangeError::SessionGone)) if !retried => {
                    // The upstream lost the session (it restarted): a new one, and once more.
                    retried = true;
                    connection.session().lose();
                    connection.close(std::time::Duration::ZERO).await;
                    upstream.suspect();
                    continue;
                }
                Err(Stop::Gateway(error)) => return Err(error),
                Err(Stop::Exchange(error)) => {
                    return Err(self.exchange_failed(upstream, error).await);
                }
                Ok(answer) => {
                    return self.relay_answer(
                        answer,
                        upstream.name(),
                        kind,
                        &target.scheme,
                        id,
                        era,
                    );
                }
            }
        }
    }

    async fn exchange_failed(&self, upstream: &Upstream, error: ExchangeError) -> GatewayError {
        if error.is_transport_failure() {
            upstream.suspect();
        }
        let error = match error {
            ExchangeError::Refused { .. } => GatewayError::Unavailable {
                upstream: upstream.name().clone(),
                reason: "it refused Switchyard's authorization".into(),
            },
            other => GatewayError::UpstreamFailed {
                upstream: upstream.name().clone(),
                reason: other.to_string(),
            },
        };
        self.or_authorization(upstream, error).await
    }

    /// The client's answer from the upstream's: its id, its URIs mapped, the shape of its era.
    fn relay_answer(
        &self,
        answer: crate::upstream::Answer,
        upstream: &UpstreamName,
        kind: Routed,
        scheme: &NameScheme,
        id: &str,
        era: Era,
    ) -> Result<Bytes, GatewayError> {
        if answer.is_error {
            return Ok(relay_error(id, answer.payload(), upstream, era));
        }
        Ok(client_answer(
            kind,
            id,
            answer.payload(),
            scheme,
            upstream,
            era,
        ))
    }
}

/// Whether a routed request can take the raw path (see the module's documentation).
fn takes_raw(upstream: &Upstream, kind: Routed, target: &Target, era: Era) -> bool {
    upstream.has_raw_path()
        && !(era == Era::Legacy && upstream.speaks_only_modern())
        && !(kind == Routed::Tool && target.param_headers)
}

/// Why a raw request ended without an answer.
enum Stop {
    /// The exchange with the upstream failed.
    Exchange(ExchangeError),
    /// Switchyard ended it: it timed out, the upstream went away, or the client cancelled.
    Gateway(GatewayError),
}

impl From<ExchangeError> for Stop {
    fn from(error: ExchangeError) -> Self {
        Stop::Exchange(error)
    }
}

/// One raw request on its way: sends it, relays what comes back, answers or fails.
struct Exchanging<'a> {
    connection: &'a Arc<Connection>,
    raw: &'a RawLink,
    request_id: &'a RequestId,
    upstream: &'a Upstream,
}

impl Exchanging<'_> {
    async fn run<S: ConnectionSource>(
        self,
        call: &Call<'_, S>,
        outgoing: &Outgoing<'_>,
        timer: &mut Timer<'_>,
        outage: &mut std::pin::Pin<&mut tokio::sync::futures::Notified<'_>>,
    ) -> Result<crate::upstream::Answer, Stop> {
        // Registered, so that what the upstream sends about it on other streams finds it.
        let _entry = self
            .connection
            .relay()
            .register_request(self.request_id.clone(), call.downstream.clone());
        let mut abandon = Abandon {
            connection: self.connection,
            id: Some(self.request_id.clone()),
            era: self.raw.era(),
        };
        let mut exchange = tokio::select! {
            started = self.raw.start(outgoing) => started?,
            _ = timer.expired() => return Err(Stop::Gateway(timer.error(self.upstream, Stage::Sent))),
            _ = outage.as_mut() => return Err(Stop::Gateway(unavailable(self.upstream))),
            _ = call.ct.cancelled() => return Err(Stop::Gateway(GatewayError::Cancelled)),
        };
        loop {
            let step = tokio::select! {
                biased;
                step = exchange.next() => step?,
                _ = timer.expired() => return Err(Stop::Gateway(timer.error(self.upstream, Stage::Sent))),
                _ = outage.as_mut() => return Err(Stop::Gateway(unavailable(self.upstream))),
                _ = call.ct.cancelled() => return Err(Stop::Gateway(GatewayError::Cancelled)),
            };
            match step {
                Step::Answer(answer) => {
                    abandon.id = None;
                    exchange.finish();
                    return Ok(answer);
                }
                Step::Message(message) => {
                    // Boxed: most answers come alone, and passing on has a large future.
                    Box::pin(self.pass_on(&call.downstream, message, timer)).await;
                }
            }
        }
    }

    /// Passes on one message the upstream sent during the request.
    async fn pass_on(&self, downstream: &Arc<Downstream>, message: Bytes, timer: &mut Timer<'_>) {
        match wire::parse(&message) {
            Ok(wire::Message::Notification(notification)) => match notification.method {
                "notifications/progress" => {
                    timer.progressed();
                    forward_progress(downstream, notification.params).await;
                }
                "notifications/message" => {
                    let params = notification.params.and_then(|params| {
                        serde_json::from_str::<LoggingMessageNotificationParam>(params.get()).ok()
                    });
                    if let Some(params) = params {
                        log_upstream_message(self.upstream.name(), &params);
                        if downstream.wants_log(params.level) {
                            let _ = downstream.outlet.offer(message.clone());
                        }
                    }
                }
                _ => self.inject_typed(&message, None),
            },
            Ok(wire::Message::Request(_)) => self.inject_typed(&message, Some(self.request_id)),
            _ => {}
        }
    }

    /// Hands a message to rmcp's handler of the connection, as if it had read it (`origin`: the
    /// request whose stream it came on).
    fn inject_typed(&self, message: &[u8], origin: Option<&RequestId>) {
        match serde_json::from_slice::<ServerJsonRpcMessage>(message) {
            Ok(mut typed) => {
                if let (Some(origin), ServerJsonRpcMessage::Request(request)) = (origin, &mut typed)
                {
                    use rmcp::model::GetExtensions;
                    request.request.extensions_mut().insert(
                        rmcp::service::InboundStreamOrigin::OutboundRequest(origin.clone()),
                    );
                }
                self.connection.inject(typed);
            }
            Err(error) => {
                tracing::debug!(upstream = %self.upstream.name(), %error, "an upstream message that is not MCP was dropped");
            }
        }
    }
}

/// Passes progress on under the client's own token, if it asked for progress.
async fn forward_progress(downstream: &Downstream, params: Option<&RawValue>) {
    let (Some(token), Some(params)) = (&downstream.progress_token, params.and_then(Fields::of))
    else {
        return;
    };
    let token = serde_json::to_string(token).unwrap_or_default();
    let mut out = Vec::with_capacity(64);
    params.write(
        &mut out,
        |key| match key {
            "progressToken" => Edit::Value(&token),
            _ => Edit::Keep,
        },
        &[],
    );
    let text = std::str::from_utf8(&out).unwrap_or("{}");
    let notification = wire::write::notification("notifications/progress", Some(text));
    let _ = downstream.outlet.send(notification).await;
}

/// Tells the upstream to stop a raw request that was abandoned (the client cancelled or went
/// away, or it timed out), unless it was answered. On a 2026-07-28 connection, ending the
/// request's stream is the cancellation.
struct Abandon<'a> {
    connection: &'a Connection,
    id: Option<RequestId>,
    era: Era,
}

impl Drop for Abandon<'_> {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else {
            return;
        };
        if self.era == Era::Modern {
            return;
        }
        let notification = ClientNotification::CancelledNotification(CancelledNotification::new(
            CancelledNotificationParam::new(Some(id), Some("cancelled by the client".to_owned())),
        ));
        let peer = self.connection.peer().clone();
        tokio::spawn(async move {
            let _ = peer.send_notification(notification).await;
        });
    }
}
