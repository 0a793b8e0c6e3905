//! Switchyard's side of an upstream connection: the rmcp `ClientHandler` that announces the
//! gateway (or the client it stands for) and handles what the upstream sends unasked.
//!
//! Log messages and requests for sampling, elicitation and roots are passed through the
//! connection's `Relay` to the client they concern (progress is taken off the transport before
//! it gets here; see `ordered`). List changes and resource updates
//! become events for the upstream's supervisor.

// Sampling, roots and logging are deprecated by SEP-2577 but still used on the legacy protocol.
#![allow(deprecated)]

use std::sync::Arc;

use rmcp::{
    ClientHandler, ErrorData, ServiceError,
    model::{
        CancelledNotificationParam, ClientCapabilities, ClientConfig, ClientResult,
        CreateMessageRequest, CreateMessageRequestParams, CreateMessageResult, CustomNotification,
        ElicitRequest, ElicitRequestParams, ElicitResult, ErrorCode, GetExtensions, Implementation,
        ListRootsRequest, ListRootsResult, LoggingLevel, LoggingMessageNotificationParam,
        ProtocolVersion, ResourceUpdatedNotificationParam, ServerNotification, ServerRequest,
    },
    service::{
        InboundStreamOrigin, NotificationContext, OriginatingRequestId, PeerRequestOptions,
        RequestContext, RoleClient,
    },
};
use tokio::sync::mpsc;

use super::relay::{Arrival, Downstream, Relay, cannot_forward};
use crate::names::UpstreamName;

/// Something an upstream told us that changes what the gateway serves or must pass on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpstreamEvent {
    ToolsChanged,
    PromptsChanged,
    ResourcesChanged,
    /// A subscribed resource changed (its URI as the upstream knows it).
    ResourceUpdated(String),
}

/// The handler of one upstream connection.
#[derive(Clone)]
pub struct UpstreamClient {
    upstream: UpstreamName,
    info: ClientConfig,
    events: mpsc::UnboundedSender<UpstreamEvent>,
    relay: Arc<Relay>,
}

impl UpstreamClient {
    /// A handler announcing `client_info` and `capabilities` to the upstream, reporting to
    /// `events`, and passing requests back through `relay`.
    pub fn new(
        upstream: UpstreamName,
        client_info: Implementation,
        capabilities: ClientCapabilities,
        events: mpsc::UnboundedSender<UpstreamEvent>,
        relay: Arc<Relay>,
    ) -> Self {
        let mut info = ClientConfig::new(capabilities, client_info);
        info.protocol_version = ProtocolVersion::V_2025_11_25;
        Self {
            upstream,
            info,
            events,
            relay,
        }
    }

    fn report(&self, event: UpstreamEvent) {
        // The supervisor may be gone during shutdown; nothing is lost then.
        let _ = self.events.send(event);
    }

    /// The client an upstream request is for, if it can be asked for `what`.
    async fn target(
        &self,
        context: &RequestContext<RoleClient>,
        what: &str,
        supported: impl Fn(&ClientCapabilities) -> bool,
    ) -> Result<Arc<Downstream>, ErrorData> {
        let origin = context.extensions.get::<InboundStreamOrigin>();
        let arrival = context.extensions.get::<Arrival>();
        let Some(target) = self.relay.resolve(origin, arrival).await else {
            let reason = if arrival.is_some_and(|a| a.in_flight() > 1) {
                "it is not tied to one client's request (several are in flight on a shared \
                 upstream session; configure this upstream with session = \"per_client\")"
            } else {
                "no client request was in flight on this shared upstream session"
            };
            return Err(cannot_forward(what, reason));
        };
        if target.stateless {
            return Err(cannot_forward(
                what,
                "the client uses protocol 2026-07-28, which cannot receive requests during a call",
            ));
        }
        if !supported(&target.capabilities) {
            return Err(cannot_forward(
                what,
                &format!("the client did not declare the {what} capability"),
            ));
        }
        Ok(target)
    }
}

/// Sends `request` to the client of `target`, on the stream of its request when there is one.
/// If the upstream cancels its request meanwhile (or its session ends), the client is told to
/// cancel too.
async fn ask(
    target: &Downstream,
    mut request: ServerRequest,
    context: &RequestContext<RoleClient>,
) -> Result<ClientResult, ErrorData> {
    if let Some(id) = &target.request_id {
        request
            .extensions_mut()
            .insert(OriginatingRequestId(id.clone()));
    }
    let handle = target
        .peer
        .send_request_with_option(request, PeerRequestOptions::no_options())
        .await
        .map_err(not_answered)?;
    let id = handle.id.clone();
    tokio::select! {
        answer = handle.await_response() => answer.map_err(not_answered),
        _ = context.ct.cancelled() => {
            let cancelled = CancelledNotificationParam::new(
                Some(id),
                Some("cancelled by the upstream server".to_owned()),
            );
            let _ = target.peer.notify_cancelled(cancelled).await;
            Err(ErrorData::internal_error("cancelled by the upstream server", None))
        }
    }
}

fn not_answered(error: ServiceError) -> ErrorData {
    match error {
        ServiceError::McpError(error) => error,
        other => ErrorData::internal_error(format!("the client did not answer: {other}"), None),
    }
}

fn unexpected(result: ClientResult) -> ErrorData {
    ErrorData::new(
        ErrorCode::INTERNAL_ERROR,
        format!("the client answered with an unexpected result: {result:?}"),
        None,
    )
}

/// How Switchyard introduces itself to upstreams it connects to on its own behalf.
pub fn gateway_identity() -> Implementation {
    Implementation::new("switchyard", env!("CARGO_PKG_VERSION"))
}

impl ClientHandler for UpstreamClient {
    fn get_info(&self) -> ClientConfig {
        self.info.clone()
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        let target = self
            .target(&context, "sampling", |c| c.sampling.is_some())
            .await?;
        let request = ServerRequest::CreateMessageRequest(CreateMessageRequest::new(params));
        match ask(&target, request, &context).await? {
            ClientResult::CreateMessageResult(result) => Ok(*result),
            other => Err(unexpected(other)),
        }
    }

    async fn create_elicitation(
        &self,
        params: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let url_id = match &params {
            ElicitRequestParams::UrlElicitationParams { elicitation_id, .. } => {
                Some(elicitation_id.clone())
            }
            _ => None,
        };
        let url = url_id.is_some();
        let target = self
            .target(&context, "elicitation", |c| match &c.elicitation {
                // A client declaring neither mode supports forms (2025-06-18 compatibility).
                Some(e) if url => e.url.is_some(),
                Some(e) => e.form.is_some() || e.url.is_none(),
                None => false,
            })
            .await?;
        if let Some(id) = url_id {
            // Its completion, announced later, goes to the same client.
            self.relay.elicitation_sent(id, target.clone());
        }
        let request = ServerRequest::ElicitRequest(ElicitRequest::new(params));
        match ask(&target, request, &context).await? {
            ClientResult::ElicitResult(result) => Ok(result),
            other => Err(unexpected(other)),
        }
    }

    async fn list_roots(
        &self,
        context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        let target = self
            .target(&context, "roots", |c| c.roots.is_some())
            .await?;
        let request = ServerRequest::ListRootsRequest(ListRootsRequest::default());
        match ask(&target, request, &context).await? {
            ClientResult::ListRootsResult(result) => Ok(result),
            other => Err(unexpected(other)),
        }
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.report(UpstreamEvent::ToolsChanged);
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.report(UpstreamEvent::PromptsChanged);
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.report(UpstreamEvent::ResourcesChanged);
    }

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.report(UpstreamEvent::ResourceUpdated(params.uri));
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        context: NotificationContext<RoleClient>,
    ) {
        log_upstream_message(&self.upstream, &params);
        // Notifications carry no stream marker: the only request in flight when it arrived,
        // or the connection's session, if that client wants messages of this level.
        let arrival = context.extensions.get::<Arrival>();
        if let Some(target) = self.relay.resolve(None, arrival).await
            && target.wants_log(params.level)
        {
            let _ = target.peer.notify_logging_message(params).await;
        }
    }

    async fn on_custom_notification(
        &self,
        notification: CustomNotification,
        _context: NotificationContext<RoleClient>,
    ) {
        if notification.method != ELICITATION_COMPLETE {
            tracing::debug!(upstream = %self.upstream, method = %notification.method, "an upstream notification Switchyard does not relay");
            return;
        }
        let id = notification
            .params
            .as_ref()
            .and_then(|params| params.get("elicitationId"))
            .and_then(|id| id.as_str());
        let Some(target) = id.and_then(|id| self.relay.elicitation_completed(id)) else {
            return;
        };
        let _ = target
            .peer
            .send_notification(ServerNotification::CustomNotification(notification))
            .await;
    }
}

/// The notification that a URL-mode elicitation has completed.
const ELICITATION_COMPLETE: &str = "notifications/elicitation/complete";

fn log_upstream_message(upstream: &UpstreamName, params: &LoggingMessageNotificationParam) {
    let logger = params.logger.as_deref().unwrap_or("");
    let data = &params.data;
    match params.level {
        LoggingLevel::Debug => tracing::debug!(%upstream, logger, %data, "upstream log"),
        LoggingLevel::Info | LoggingLevel::Notice => {
            tracing::info!(%upstream, logger, %data, "upstream log")
        }
        LoggingLevel::Warning => tracing::warn!(%upstream, logger, %data, "upstream log"),
        _ => tracing::error!(%upstream, logger, %data, "upstream log"),
    }
}
