//! Routing: from the name or URI a client used to the upstream that owns it, and the forwarding
//! of the request there with the upstream's own name or URI restored.
//!
//! A routed request's target is found once (`target`), in what the caller sees of its request's
//! snapshot, and the request gets a connection from the caller's `ConnectionSource`. On the raw
//! path (`raw`) it goes on as bytes; on the typed path it is forwarded through `send`, which
//! registers it with the connection's relay so that progress and requests coming back reach
//! this client. Either way it is cancelled upstream if the client cancels or it times out.

mod mrtr;
mod raw;
mod target;
mod tasks;
mod timeout;
mod uris;

pub use raw::{Rewrite, client_answer, upstream_request};
pub use target::{Routed, Target};
pub use tasks::TaskMethod;

use std::{borrow::Cow, sync::Arc};

use rmcp::{
    model::{
        CallToolRequest, CallToolRequestParams, CallToolResponse, ClientRequest, CompleteRequest,
        CompleteRequestParams, CompleteResult, GetPromptRequest, GetPromptRequestParams,
        GetPromptResponse, JsonObject, MetaObject, ReadResourceRequest, ReadResourceRequestParams,
        ReadResourceResponse, Reference, RequestMetaObject, ServerResult,
    },
    service::PeerRequestOptions,
};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use self::{
    mrtr::Answerable,
    timeout::{Stage, Timer},
};
use crate::{
    config::TransportConfig,
    downstream::Downstream,
    error::{GatewayError, Side},
    gateway::{authorization_required, unavailable},
    metrics::ToolOutcome,
    names::UpstreamName,
    protocol::{Era, META_PREFIX, META_PROGRESS_TOKEN},
    quota::Granted,
    request::Request,
    store::Store,
    telemetry,
    upstream::{Connection, InFlight, Upstream},
};

/// Where a request gets its upstream connection: the shared one, or the downstream session's own.
pub trait ConnectionSource: Sync {
    fn connection(
        &self,
        upstream: &Arc<Upstream>,
    ) -> impl Future<Output = Result<Arc<Connection>, GatewayError>> + Send;
}

/// One downstream request being routed: the request, where its connections come from, who
/// it is (for what comes back), and its cancellation.
pub struct Call<'a, S> {
    pub request: &'a Request,
    /// The store: what task handles are sealed with (the keys the replicas share), and who
    /// created the tasks of upstreams without sessions.
    pub store: &'a Arc<Store>,
    pub source: &'a S,
    pub downstream: Arc<Downstream>,
    pub ct: &'a CancellationToken,
    /// The call's place under `concurrent` quotas, while the call holds it: a call that
    /// creates a task hands it to the task (see `tasks`).
    pub held: std::sync::Mutex<Option<Granted>>,
}

/// The answer for a task id that is not one of the caller's (made up, another user's, expired,
/// or of an upstream's earlier run): the same whichever it is.
fn unknown_task() -> GatewayError {
    GatewayError::InvalidParams("unknown task: no task of yours has this id".into())
}

impl<S: ConnectionSource> Call<'_, S> {
    /// Holds `granted` (a place under `concurrent` quotas) for as long as the call, or the
    /// task it creates, runs.
    pub fn hold(&self, granted: Granted) {
        *self
            .held
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(granted);
    }

    fn take_held(&self) -> Option<Granted> {
        self.held
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take()
    }

    /// `tools/call`, to `target`: the result comes back as the upstream sent it, but for the
    /// URIs of resources it links or embeds, which are mapped like listed ones.
    pub async fn call_tool(
        &self,
        params: CallToolRequestParams,
        target: &Target,
    ) -> Result<CallToolResponse, GatewayError> {
        let started = std::time::Instant::now();
        let result = self.call_tool_routed(params, target).await;
        let outcome = match &result {
            Ok(CallToolResponse::Complete(done)) if done.is_error == Some(true) => {
                ToolOutcome::ToolError
            }
            Ok(_) => ToolOutcome::Success,
            Err(_) => ToolOutcome::Error,
        };
        record_tool(&target.upstream, &target.original, outcome, started);
        self.answer(result)
    }

    async fn call_tool_routed(
        &self,
        mut params: CallToolRequestParams,
        target: &Target,
    ) -> Result<CallToolResponse, GatewayError> {
        let meta = params.meta.take();
        params.name = Cow::Owned(target.original.clone());
        let request = |params| ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let upstream = target.upstream.name();
        match self
            .send_answering(
                &target.upstream,
                params,
                request,
                target.tool(),
                meta.as_ref(),
            )
            .await?
        {
            ServerResult::CallToolResult(mut result) => {
                uris::expose_in_content(&target.scheme, upstream, &mut result.content);
                Ok(CallToolResponse::Complete(result))
            }
            ServerResult::InputRequiredResult(result) => {
                Ok(CallToolResponse::InputRequired(result))
            }
            ServerResult::CreateTaskResult(result) => Ok(CallToolResponse::Task(result)),
            other => Err(unexpected(upstream, &other)),
        }
    }

    /// `prompts/get`, to `target`.
    pub async fn get_prompt(
        &self,
        params: GetPromptRequestParams,
        target: &Target,
    ) -> Result<GetPromptResponse, GatewayError> {
        self.answer(self.get_prompt_routed(params, target).await)
    }

    async fn get_prompt_routed(
        &self,
        mut params: GetPromptRequestParams,
        target: &Target,
    ) -> Result<GetPromptResponse, GatewayError> {
        let meta = params.meta.take();
        params.name = target.original.clone();
        let request = |params| ClientRequest::GetPromptRequest(GetPromptRequest::new(params));
        let upstream = target.upstream.name();
        match self
            .send_answering(&target.upstream, params, request, None, meta.as_ref())
            .await?
        {
            ServerResult::GetPromptResult(mut result) => {
                for message in &mut result.messages {
                    uris::expose_in_prompt_message(&target.scheme, upstream, message);
                }
                Ok(GetPromptResponse::Complete(result))
            }
            ServerResult::InputRequiredResult(result) => {
                Ok(GetPromptResponse::InputRequired(result))
            }
            other => Err(unexpected(upstream, &other)),
        }
    }

    /// `resources/read`, to `target`: the contents' URIs are mapped back to the form the
    /// client used.
    pub async fn read_resource(
        &self,
        params: ReadResourceRequestParams,
        target: &Target,
    ) -> Result<ReadResourceResponse, GatewayError> {
        self.answer(self.read_resource_routed(params, target).await)
    }

    async fn read_resource_routed(
        &self,
        mut params: ReadResourceRequestParams,
        target: &Target,
    ) -> Result<ReadResourceResponse, GatewayError> {
        let meta = params.meta.take();
        params.uri = target.original.clone();
        let request = |params| ClientRequest::ReadResourceRequest(ReadResourceRequest::new(params));
        let upstream = target.upstream.name();
        match self
            .send_answering(&target.upstream, params, request, None, meta.as_ref())
            .await?
        {
            ServerResult::ReadResourceResult(mut result) => {
                for contents in &mut result.contents {
                    uris::expose_in_contents(&target.scheme, upstream, contents);
                }
                Ok(ReadResourceResponse::Complete(result))
            }
            ServerResult::InputRequiredResult(result) => {
                Ok(ReadResourceResponse::InputRequired(result))
            }
            other => Err(unexpected(upstream, &other)),
        }
    }

    /// `completion/complete`, for a prompt argument or a resource template variable.
    pub async fn complete(
        &self,
        params: CompleteRequestParams,
    ) -> Result<CompleteResult, GatewayError> {
        self.answer(self.complete_routed(params).await)
    }

    async fn complete_routed(
        &self,
        mut params: CompleteRequestParams,
    ) -> Result<CompleteResult, GatewayError> {
        let meta = params.meta.take();
        let (view, live) = (self.request.view(), &self.request.live);
        let owner = match &mut params.r#ref {
            Reference::Prompt(prompt) => {
                let route = live.prompt_route(view, &prompt.name)?;
                prompt.name = route.original.to_string();
                route.upstream.clone()
            }
            Reference::Resource(resource) => {
                let (owner, original, _) = live.resolve_uri(view, &resource.uri)?;
                resource.uri = original;
                owner
            }
            _ => {
                return Err(GatewayError::InvalidParams(
                    "unsupported completion reference".into(),
                ));
            }
        };
        let request = ClientRequest::CompleteRequest(CompleteRequest::new(params));
        let upstream = live.serving_upstream(&owner)?;
        match self.send(&upstream, request, None, meta.as_ref()).await? {
            ServerResult::CompleteResult(result) => Ok(result),
            other => Err(unexpected(&owner, &other)),
        }
    }

    /// `send`, but for a session client of an upstream that speaks only 2026-07-28: its
    /// `input_required` results are answered by asking the client, and the request is sent
    /// again with the answers (see `mrtr`).
    async fn send_answering<P: Answerable>(
        &self,
        serving: &Arc<Upstream>,
        params: P,
        request: fn(P) -> ClientRequest,
        tool: Option<&str>,
        meta: Option<&RequestMetaObject>,
    ) -> Result<ServerResult, GatewayError> {
        let upstream = serving.name();
        if self.downstream.is_stateless() || !serving.speaks_only_modern() {
            return self.send(serving, request(params), tool, meta).await;
        }
        let mut params = params;
        for _ in 0..mrtr::MAX_ROUNDS {
            match self
                .send(serving, request(params.clone()), tool, meta)
                .await?
            {
                ServerResult::InputRequiredResult(required) => {
                    let questions = required.input_requests.unwrap_or_default();
                    let answers =
                        mrtr::ask_all(upstream, &self.downstream, questions, self.ct).await?;
                    params.answer(answers, required.request_state);
                }
                other => return Ok(other),
            }
        }
        Err(GatewayError::UpstreamFailed {
            upstream: upstream.clone(),
            reason: format!("it still asked for input after {} rounds", mrtr::MAX_ROUNDS),
        })
    }

    /// Sends `request` to `upstream` (found serving) and awaits the answer, within the upstream's limit on
    /// requests in flight and its timeouts (those of `tool`, for a tool call). If the client
    /// cancels or the time runs out, the upstream is told to cancel too.
    async fn send(
        &self,
        upstream: &Arc<Upstream>,
        request: ClientRequest,
        tool: Option<&str>,
        meta: Option<&RequestMetaObject>,
    ) -> Result<ServerResult, GatewayError> {
        let call = self.upstream_call(upstream);
        self.send_in_span(upstream, request, tool, meta)
            .instrument(call)
            .await
    }

    async fn send_in_span(
        &self,
        upstream: &Arc<Upstream>,
        request: ClientRequest,
        tool: Option<&str>,
        meta: Option<&RequestMetaObject>,
    ) -> Result<ServerResult, GatewayError> {
        let mut timer = Timer::start(upstream, tool);
        // Created first, so that an outage declared from now on ends this request.
        let outage = upstream.health().outage();
        tokio::pin!(outage);
        let _admitted = self.admit(upstream, &mut timer).await?;
        let connection = self.connect(upstream, &mut timer).await?;
        let trace = self.request.trace.passed();
        let failed = |error| {
            if is_transport_failure(&error) {
                upstream.health().suspect();
            }
            GatewayError::from_service(upstream.name(), error)
        };
        let peer = connection.peer();
        let handle = match peer
            .send_request_with_option(request, options(meta, connection.era(), trace))
            .await
        {
            Ok(handle) => handle,
            Err(error) => return Err(self.or_authorization(upstream, failed(error)).await),
        };
        let registration = connection.relay().register(
            peer,
            handle.id.clone(),
            handle.progress_token.clone(),
            self.downstream.clone(),
        );
        let response = handle.await_response();
        tokio::pin!(response);
        loop {
            tokio::select! {
                biased;
                result = &mut response => {
                    registration.finish();
                    return match result {
                        Ok(result) => Ok(result),
                        Err(error) => Err(self.or_authorization(upstream, failed(error)).await),
                    };
                }
                _ = registration.progressed() => timer.progressed(),
                _ = timer.expired() => {
                    let error = timer.error(upstream, Stage::Sent);
                    registration.cancel(&error.to_string());
                    return Err(error);
                }
                _ = &mut outage => {
                    let error = unavailable(upstream);
                    registration.cancel(&error.to_string());
                    return Err(error);
                }
                // Dropping the registration cancels the request upstream.
                _ = self.ct.cancelled() => return Err(GatewayError::Cancelled),
            }
        }
    }
}

impl<S: ConnectionSource> Call<'_, S> {
    /// Counts the request in flight to `upstream`, after a place under its
    /// `max_concurrent_requests`, if it has one, waited for within the request's time.
    async fn admit<'u>(
        &self,
        upstream: &'u Upstream,
        timer: &mut Timer<'_>,
    ) -> Result<InFlight<'u>, GatewayError> {
        let load = upstream.load();
        if let Some(in_flight) = load.unlimited() {
            return Ok(in_flight);
        }
        tokio::select! {
            admitted = load.admit() => admitted.map_err(|overloaded| {
                GatewayError::Unavailable {
                    upstream: upstream.name().clone(),
                    reason: overloaded.to_string(),
                }
            }),
            _ = timer.expired() => Err(timer.error(upstream, Stage::Queued)),
            _ = self.ct.cancelled() => Err(GatewayError::Cancelled),
        }
    }

    /// The connection the request goes on, opened within the request's time if need be.
    async fn connect(
        &self,
        upstream: &Arc<Upstream>,
        timer: &mut Timer<'_>,
    ) -> Result<Arc<Connection>, GatewayError> {
        let waiting = async {
            tokio::select! {
                // The connection first: it is most often there already, and then neither
                // the timer nor the cancellation is registered for this wait.
                biased;
                connection = self.source.connection(upstream) => match connection {
                    Ok(connection) => Ok(connection),
                    Err(error) => Err(self.or_authorization(upstream, error).await),
                },
                _ = timer.expired() => Err(timer.error(upstream, Stage::Connecting)),
                _ = self.ct.cancelled() => Err(GatewayError::Cancelled),
            }
        };
        waiting.instrument(telemetry::child("connection")).await
    }

    /// The span of this request's call to `upstream`, in which its trace context is handed
    /// on (see `telemetry::Trace::upstream_call`).
    fn upstream_call(&self, upstream: &Upstream) -> tracing::Span {
        let transport = match upstream.config().transport {
            TransportConfig::Stdio(_) => "pipe",
            TransportConfig::Http(_) => "tcp",
        };
        self.request
            .trace
            .upstream_call(self.request.method(), upstream.name().as_str(), transport)
    }
}

impl<S> Call<'_, S> {
    /// `error`, unless the request failed because the upstream wants this client's user to
    /// authorize Switchyard (then the error that carries the link), or their authorization
    /// failed (then why).
    /// (Boxed: it runs only on failures, and the OAuth work behind it has a large future.)
    fn or_authorization<'b>(
        &'b self,
        upstream: &'b Upstream,
        error: GatewayError,
    ) -> futures::future::BoxFuture<'b, GatewayError>
    where
        S: Sync,
    {
        Box::pin(async move {
            match upstream
                .authorization_link(&self.downstream.principal)
                .await
            {
                Some(link) => {
                    authorization_required(upstream, link).for_client(&self.downstream.capabilities)
                }
                None => match upstream.authorization_failure(&self.downstream.principal) {
                    Some(reason) => GatewayError::UpstreamFailed {
                        upstream: upstream.name().clone(),
                        reason: format!("cannot authorize Switchyard for this user: {reason}"),
                    },
                    None => error,
                },
            }
        })
    }

    /// The outcome of a routed request as this client should get it; failures are logged at
    /// the level their side calls for.
    fn answer<T>(&self, result: Result<T, GatewayError>) -> Result<T, GatewayError> {
        result.map_err(|error| {
            log_failure(&error);
            error.for_client(&self.downstream.capabilities)
        })
    }
}

/// A client's mistake or an upstream's own JSON-RPC answer is routine; an upstream that failed
/// or timed out is worth a warning; a fault of Switchyard's is an error.
fn log_failure(error: &GatewayError) {
    let side = error.side().as_str();
    match (error.side(), error) {
        (Side::Gateway, _) => tracing::error!(side, %error, "request failed"),
        (Side::Upstream, GatewayError::UpstreamRpc { .. }) | (Side::Downstream, _) => {
            tracing::debug!(side, %error, "request failed")
        }
        (Side::Upstream, _) => {
            // An upstream that is down fails every request to it: one line per kind and
            // upstream every interval, with how many more there were.
            let key = match error {
                GatewayError::Unavailable { upstream, .. }
                | GatewayError::UpstreamFailed { upstream, .. } => upstream.as_str(),
                _ => "",
            };
            let kind = std::mem::discriminant(error);
            let key = format!("{key} {kind:?}");
            if let Some(unlogged) = REPEATED_FAILURES.note(&key) {
                tracing::warn!(side, %error, more_like_it_unlogged = unlogged, "request failed");
            }
        }
    }
}

/// Upstream failures of requests, logged once every ten seconds per kind and upstream.
static REPEATED_FAILURES: std::sync::LazyLock<crate::error::Repeats> =
    std::sync::LazyLock::new(|| crate::error::Repeats::new(std::time::Duration::from_secs(10)));

/// Whether a failed request says the upstream's transport is broken (rather than that the
/// upstream answered with an error).
fn is_transport_failure(error: &rmcp::ServiceError) -> bool {
    matches!(
        error,
        rmcp::ServiceError::TransportClosed | rmcp::ServiceError::TransportSend(_)
    )
}

/// The options of an upstream request: the client's `_meta` goes along, but for its progress
/// token (rmcp assigns its own and the relay maps it back), and for the 2026-07-28 keys
/// (protocol version, client info and capabilities) when the upstream session is a legacy one,
/// which announced those at `initialize`.
fn options(
    meta: Option<&RequestMetaObject>,
    era: Era,
    trace: Option<&telemetry::Passed>,
) -> PeerRequestOptions {
    let empty = JsonObject::new();
    let client_meta = meta.map_or(&empty, |meta| &meta.0.0);
    let forwarded = |key: &String| {
        key != META_PROGRESS_TOKEN && (era == Era::Modern || !key.starts_with(META_PREFIX))
    };
    let trace = trace.filter(|trace| trace.into_meta);
    if trace.is_none() && !client_meta.keys().any(forwarded) {
        return PeerRequestOptions::no_options();
    }
    let mut meta: JsonObject = client_meta
        .iter()
        .filter(|(key, _)| forwarded(key))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    if let Some(trace) = trace {
        for (key, value) in trace.fields() {
            meta.insert(key.to_owned(), serde_json::Value::String(value.to_owned()));
        }
    }
    PeerRequestOptions::no_options().with_meta(RequestMetaObject(MetaObject(meta)))
}

/// Counts a tool call of `upstream` (its own name for the tool) in the upstream's series.
fn record_tool(upstream: &Upstream, tool: &str, outcome: ToolOutcome, started: std::time::Instant) {
    if let Some(series) = upstream.lists().tool_series() {
        series.get(tool).record(outcome, started);
    }
}

fn unexpected(upstream: &UpstreamName, result: &ServerResult) -> GatewayError {
    GatewayError::UpstreamFailed {
        upstream: upstream.clone(),
        reason: format!("it answered with a {}", result_kind(result)),
    }
}

fn result_kind(result: &ServerResult) -> &'static str {
    match result {
        ServerResult::EmptyResult(_) => "empty result",
        ServerResult::CallToolResult(_) => "tool result",
        ServerResult::GetPromptResult(_) => "prompt",
        ServerResult::ReadResourceResult(_) => "resource contents",
        ServerResult::CompleteResult(_) => "completion",
        _ => "other result",
    }
}
