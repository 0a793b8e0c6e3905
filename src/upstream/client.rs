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
        ClientCapabilities, ClientConfig, ClientResult, CreateMessageRequest,
        CreateMessageRequestParams, CreateMessageResult, ElicitRequest, ElicitRequestParams,
        ElicitResult, ErrorCode, GetExtensions, Implementation, ListRootsRequest, ListRootsResult,
        LoggingLevel, LoggingMessageNotificationParam, ProtocolVersion,
        ResourceUpdatedNotificationParam, ServerRequest,
    },
    service::{
        InboundStreamOrigin, NotificationContext, OriginatingRequestId, RequestContext, RoleClient,
    },
};
use tokio::sync::mpsc;

use super::relay::{Downstream, Relay, cannot_forward};
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
        let Some(target) = self.relay.resolve(origin).await else {
            return Err(cannot_forward(
                what,
                "it is not tied to one client's request (several are in flight on a shared \
                 upstream session; configure this upstream with session = \"per_client\")",
            ));
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
async fn ask(target: &Downstream, mut request: ServerRequest) -> Result<ClientResult, ErrorData> {
    if let Some(id) = &target.request_id {
        request
            .extensions_mut()
            .insert(OriginatingRequestId(id.clone()));
    }
    target
        .peer
        .send_request(request)
        .await
        .map_err(|error| match error {
            ServiceError::McpError(error) => error,
            other => ErrorData::internal_error(format!("the client did not answer: {other}"), None),
        })
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
        match ask(&target, request).await? {
            ClientResult::CreateMessageResult(result) => Ok(*result),
            other => Err(unexpected(other)),
        }
    }

    async fn create_elicitation(
        &self,
        params: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let url = matches!(params, ElicitRequestParams::UrlElicitationParams { .. });
        let target = self
            .target(&context, "elicitation", |c| match &c.elicitation {
                // A client declaring neither mode supports forms (2025-06-18 compatibility).
                Some(e) if url => e.url.is_some(),
                Some(e) => e.form.is_some() || e.url.is_none(),
                None => false,
            })
            .await?;
        match ask(
            &target,
            ServerRequest::ElicitRequest(ElicitRequest::new(params)),
        )
        .await?
        {
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
        match ask(
            &target,
            ServerRequest::ListRootsRequest(ListRootsRequest::default()),
        )
        .await?
        {
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
        _context: NotificationContext<RoleClient>,
    ) {
        log_upstream_message(&self.upstream, &params);
        // Notifications carry no stream marker: the only request in flight, or the session.
        // A 2026-07-28 client gets log messages only if its request asked for a level.
        if let Some(target) = self.relay.resolve(None).await
            && (!target.stateless || target.meta.contains_key(LOG_LEVEL_META))
        {
            let _ = target.peer.notify_logging_message(params).await;
        }
    }
}

/// The `_meta` key in which a 2026-07-28 request asks for log messages.
const LOG_LEVEL_META: &str = "io.modelcontextprotocol/logLevel";

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
