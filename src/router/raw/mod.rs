//! The raw path of the routed requests (`tools/call`, `prompts/get`, `resources/read`) to
//! streamable-HTTP upstreams: the client's params go on as the bytes they came in, but for the
//! name or URI (restored to the upstream's own) and the `_meta` keys that must change; the
//! upstream's answer comes back as bytes, with only the client's id put back (and resource URIs
//! mapped, where the catalog maps them). What the upstream sends meanwhile is passed on:
//! progress and log messages straight to the client, requests for the client through rmcp's
//! handler of the connection, which the relay points at this request.
//!
//! Towards a 2026-07-28 upstream, the `Mcp-Param-*` headers a tool's schema asks for are
//! written from the call's arguments, whichever era the client speaks.
//!
//! Requests that need more than relaying go the typed way: to a server that speaks only
//! 2026-07-28 for a session client (its `input_required` must be answered by asking the
//! client), and to other transports.

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
use tracing::Instrument;

use super::{
    Call, ConnectionSource, log_failure,
    target::{Routed, Target},
    timeout::{Stage, Timer},
    uris,
};
use crate::{
    catalog::TaskSupport,
    config::TransportConfig,
    downstream::Downstream,
    error::GatewayError,
    gateway::unavailable,
    metrics::ToolOutcome,
    protocol::Era,
    upstream::{
        Connection, ExchangeError, Outgoing, RawLink, Step, Upstream, log_upstream_message,
    },
    wire::{self, Answer, Edit, Fields, Outcome},
};

pub(in crate::router) use rewrite::relay_error;
pub use rewrite::{Rewrite, client_answer, upstream_request};

impl<S: ConnectionSource> Call<'_, S> {
    /// Answers a routed request on the raw path, at `target` (which takes it: see
    /// `Target::takes_raw`): the answer, as a JSON-RPC message for the client.
    pub async fn routed(&self, target: &Target) -> Answer {
        let upstream = &target.upstream;
        let span = tracing::Span::current();
        span.record("upstream", upstream.name().as_str());
        if let Some(tool) = target.tool() {
            span.record("tool", tool);
        }
        let call = self.upstream_call(upstream);
        let mut forwarded = upstream.config().forwarded(&self.request.headers);
        if let (Some(trace), TransportConfig::Http(_)) =
            (self.request.trace.passed(), &upstream.config().transport)
        {
            forwarded.extend(trace.headers());
        }
        let started = std::time::Instant::now();
        let result = async {
            match self.task_mode(target).await {
                Ok(TaskMode::Plain) => self.forward(target, &forwarded).await,
                // Boxed: calls run as tasks for their client are few, and their futures
                // large; every call's future would hold room for them.
                Ok(TaskMode::Bridged) => Box::pin(self.bridged(target, &forwarded)).await,
                Ok(TaskMode::Translated) => Box::pin(self.translated(target, &forwarded)).await,
                Err(error) => Err(error),
            }
        }
        .instrument(call)
        .await;
        if let Some(tool) = target.tool() {
            let outcome = match result.as_ref().map(|answer| answer.outcome) {
                Ok(Outcome::Result) => ToolOutcome::Success,
                Ok(Outcome::ToolError) => ToolOutcome::ToolError,
                Ok(Outcome::Error { .. }) | Err(_) => ToolOutcome::Error,
            };
            super::record_tool(upstream, tool, outcome, started);
        }
        match result {
            Ok(answer) => answer,
            Err(error) => self.failed(error),
        }
    }

    /// How a tool call runs: as the client asked; as a task Switchyard follows for a client
    /// that called a tool that must run as one without asking for a task; or, for a 2026-07-28
    /// client of the tasks extension and a 2025-11-25 upstream, as a task in the client's era.
    /// A call that would create a task the caller has no room for is refused.
    async fn task_mode(&self, target: &Target) -> Result<TaskMode, GatewayError> {
        if target.task_support == TaskSupport::Forbidden {
            return Ok(TaskMode::Plain);
        }
        let message = &self.request.message;
        let asked = message
            .params()
            .is_some_and(|params| params.get("task").is_some());
        let declared = self.request.era == Era::Modern && self.request.declares_tasks();
        if !asked && !declared && target.task_support == TaskSupport::Optional {
            return Ok(TaskMode::Plain);
        }
        let connection = self.source.connection(&target.upstream).await?;
        self.check_task_room(&connection)?;
        // Tasks are created the 2025-11-25 way (`params.task`); a 2026-07-28 upstream decides
        // itself, for clients that declared the extension.
        let legacy_upstream = connection.raw().is_some_and(|raw| raw.era() == Era::Legacy);
        Ok(match (legacy_upstream, declared, asked) {
            (false, _, _) | (true, false, true) => TaskMode::Plain,
            (true, true, _) => TaskMode::Translated,
            (true, false, false) => TaskMode::Bridged,
        })
    }

    /// The answer to the client for a routed request that failed with `error`, logged at the
    /// level its side calls for.
    pub fn failed(&self, error: GatewayError) -> Answer {
        log_failure(&error);
        error
            .for_client(&self.downstream.capabilities)
            .answer(self.request.id(), self.request.era)
    }

    /// Sends the request on the raw path and relays what comes back, within the upstream's
    /// limits and timeouts, as the typed `send` does.
    async fn forward(
        &self,
        target: &Target,
        forwarded: &[(http::HeaderName, http::HeaderValue)],
    ) -> Result<Answer, GatewayError> {
        let upstream = &target.upstream;
        let mut timer = Timer::start(upstream, target.tool());
        let _admitted = self.admit(upstream, &mut timer).await?;
        let empty = Fields::default();
        let params = self.request.message.params().unwrap_or(&empty);
        let write = |number, rewrite: Rewrite<'_>| {
            upstream_request(
                target.kind.method(),
                target.kind.field(),
                number,
                &target.original,
                params,
                rewrite,
                &[],
            )
        };
        let annotated = target.param_values(params);
        let request = RawRequest {
            upstream,
            method: target.kind.method(),
            name: &target.original,
            write: &write,
            params: &annotated,
            task: None,
        };
        let (answer, connection) = self.exchange(&request, forwarded, &mut timer).await?;
        Ok(self.relay_answer(answer, target, &connection))
    }

    /// Sends `request` on the raw path (on a connection from the call's source) and relays
    /// what comes back until its answer, within `timer`. A session the upstream lost is
    /// replaced once. The answer comes with the connection it came on.
    pub(in crate::router) async fn exchange(
        &self,
        request: &RawRequest<'_>,
        forwarded: &[(http::HeaderName, http::HeaderValue)],
        timer: &mut Timer<'_>,
    ) -> Result<(crate::upstream::Answer, Arc<Connection>), GatewayError> {
        let upstream = request.upstream;
        let outage = upstream.health().outage();
        tokio::pin!(outage);
        let mut retried = false;
        loop {
            let connection = self.connect(upstream, timer).await?;
            if let Some(task) = &request.task {
                task.admits(request.name, &connection)?;
            }
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
                trace: self.request.trace.passed().filter(|trace| trace.into_meta),
            };
            let outgoing = Outgoing {
                id: number,
                method: request.method,
                name: request.name,
                body: (request.write)(number, rewrite),
                forwarded,
                params: request.params,
                session: request.task.and_then(|task| task.session),
            };
            let request_id = RequestId::Number(number);
            let exchange = Exchanging {
                connection: &connection,
                raw,
                request_id: &request_id,
                upstream,
            };
            match exchange.run(self, &outgoing, timer, &mut outage).await {
                Err(Stop::Exchange(ExchangeError::SessionGone))
                    if request.task.is_some_and(|task| task.session.is_some()) =>
                {
                    return Err(GatewayError::InvalidParams(format!(
                        "the task is gone: upstream `{}` no longer has the session it ran in",
                        upstream.name()
                    )));
                }
                Err(Stop::Exchange(ExchangeError::SessionGone)) if !retried => {
                    // The upstream lost the session (it restarted): a new one, and once more.
                    retried = true;
                    connection.session().lose();
                    connection.close(std::time::Duration::ZERO).await;
                    upstream.health().suspect();
                    continue;
                }
                Err(Stop::Gateway(error)) => return Err(error),
                Err(Stop::Exchange(error)) => {
                    return Err(self.exchange_failed(upstream, error).await);
                }
                Ok(answer) => return Ok((answer, connection)),
            }
        }
    }

    async fn exchange_failed(&self, upstream: &Upstream, error: ExchangeError) -> GatewayError {
        if error.is_transport_failure() {
            upstream.health().suspect();
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

    /// The client's answer from the upstream's: its id, its URIs mapped, the shape of its era;
    /// a task the call created is known by a handle of Switchyard's.
    fn relay_answer(
        &self,
        answer: crate::upstream::Answer,
        target: &Target,
        connection: &Arc<Connection>,
    ) -> Answer {
        let (id, era, upstream) = (self.request.id(), self.request.era, target.upstream.name());
        if answer.is_error {
            return relay_error(id, answer.payload(), upstream, era);
        }
        let payload = answer.payload();
        // Only a tool that may run as one, or an upstream of the tasks extension (which
        // decides itself), can answer with a task.
        let may_create = target.task_support != TaskSupport::Forbidden
            || (self.request.era == Era::Modern
                && (self.request.view().task_upstreams(Era::Modern)).contains(upstream));
        if target.kind == Routed::Tool
            && may_create
            && let Some(created) = self.task_created(payload, &target.upstream, connection)
        {
            return Answer::result(wire::write::response(id, &created));
        }
        let answer = client_answer(target.kind, id, payload, &target.scheme, upstream, era);
        match target.kind {
            Routed::Tool => Answer::tool_result(answer),
            _ => Answer::result(answer),
        }
    }
}

/// How a tool call runs.
enum TaskMode {
    Plain,
    Bridged,
    Translated,
}

/// A request for the raw path: where it goes and how it is written.
pub(in crate::router) struct RawRequest<'r> {
    pub upstream: &'r Arc<Upstream>,
    pub method: &'r str,
    /// For `Mcp-Name`: the tool or prompt, resource URI or task id.
    pub name: &'r str,
    /// Writes the request, given its upstream id and how its `_meta` must change.
    pub write: &'r (dyn Fn(i64, Rewrite) -> Bytes + Sync),
    /// The `Mcp-Param-*` headers of a tool call's annotated arguments (sent to 2026-07-28
    /// upstreams).
    pub params: &'r [(http::HeaderName, http::HeaderValue)],
    /// The task the request is about, if it is one of the task methods.
    pub task: Option<TaskBound<'r>>,
}

/// Where a request about a task may go: in the upstream session the task lives in (if it lives
/// in one; not the connection's own), only on the connection of the task's run (if it belongs
/// to one), and only for the task's owner.
#[derive(Clone, Copy)]
pub(in crate::router) struct TaskBound<'r> {
    pub session: Option<&'r str>,
    pub run: Option<&'r str>,
    pub owner: &'r str,
}

impl TaskBound<'_> {
    /// Refuses `connection` if it is not the one the task belongs to, or if the task was
    /// created through it by someone else.
    fn admits(&self, task: &str, connection: &Connection) -> Result<(), GatewayError> {
        let run_differs = self.run.is_some_and(|run| run != connection.run());
        let owner = connection.relay().tasks.owner(task);
        if run_differs || owner.is_some_and(|owner| owner != self.owner) {
            return Err(super::unknown_task());
        }
        Ok(())
    }
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
        // Made once: the client's cancellation is listened for from the first wait to the
        // answer, not registered again at each.
        let cancelled = call.ct.cancelled();
        tokio::pin!(cancelled);
        let mut exchange = tokio::select! {
            biased;
            // A call cancelled already is not sent.
            _ = &mut cancelled => return Err(Stop::Gateway(GatewayError::Cancelled)),
            started = self.raw.start(outgoing) => started?,
            _ = outage.as_mut() => return Err(Stop::Gateway(unavailable(self.upstream))),
            _ = timer.expired() => return Err(Stop::Gateway(timer.error(self.upstream, Stage::Sent))),
        };
        loop {
            let step = tokio::select! {
                biased;
                step = exchange.next() => step?,
                _ = &mut cancelled => return Err(Stop::Gateway(GatewayError::Cancelled)),
                _ = outage.as_mut() => return Err(Stop::Gateway(unavailable(self.upstream))),
                _ = timer.expired() => return Err(Stop::Gateway(timer.error(self.upstream, Stage::Sent))),
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
        let typed = match crate::upstream::lift(message) {
            Some(lifted) => Ok(lifted),
            None => serde_json::from_slice::<ServerJsonRpcMessage>(message),
        };
        match typed {
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
