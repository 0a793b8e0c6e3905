//! Switchyard's side of an upstream connection: the rmcp `ClientHandler` that announces the
//! gateway (or the client it stands for) and handles what the upstream sends unasked.
//!
//! Log messages and requests for sampling, elicitation and roots are passed through the
//! connection's `Relay` to the client they concern (progress is taken off the transport before
//! it gets here; see `ordered`). List changes and resource updates
//! become events for the upstream's supervisor.

// Sampling, roots and logging are deprecated by SEP-2577 but still used on the legacy protocol.
#![allow(deprecated)]

mod questions;
mod tasks;

use std::sync::Arc;

use serde::{Serialize, de::DeserializeOwned};

use rmcp::{
    ClientHandler, ErrorData,
    model::{
        ClientCapabilities, ClientConfig, CreateMessageRequestParams, CreateMessageResult,
        CustomNotification, CustomRequest, CustomResult, ElicitRequestParams, ElicitResult,
        Implementation, ListRootsResult, LoggingLevel, LoggingMessageNotification,
        LoggingMessageNotificationParam, ProtocolVersion, ResourceUpdatedNotificationParam,
        ServerNotification, ServerRequest,
    },
    service::{InboundStreamOrigin, NotificationContext, RequestContext, RoleClient},
};
use tokio::sync::mpsc;

use super::relay::{Arrival, Relay, send_notification};
use crate::{
    downstream::{Downstream, TaskSupport, cannot_forward, check_capability, kind},
    names::UpstreamName,
    principal::Principal,
};

/// Something an upstream told us that changes what the gateway serves or must pass on, with
/// the scope of the connection it came on: the user whose own connection it is, or `None`
/// for one shared by everyone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpstreamEvent {
    ToolsChanged(Option<Principal>),
    PromptsChanged(Option<Principal>),
    ResourcesChanged(Option<Principal>),
    /// A subscribed resource changed (its URI as the upstream knows it).
    ResourceUpdated(String, Option<Principal>),
}

/// The handler of one upstream connection.
#[derive(Clone)]
pub struct UpstreamClient {
    upstream: UpstreamName,
    info: ClientConfig,
    events: mpsc::UnboundedSender<UpstreamEvent>,
    relay: Arc<Relay>,
    /// The user whose own connection this is; `None`: one shared by everyone.
    scope: Option<Principal>,
    /// The roots answered when the upstream asks on its own account (`roots`).
    roots: Arc<[String]>,
    /// What it declared clients run as tasks when asked.
    tasks: TaskSupport,
}

impl UpstreamClient {
    /// A handler announcing `client_info`, `capabilities` and the `tasks` clients run to the
    /// upstream, reporting to `events` (from `scope`'s connection), and passing requests back
    /// through `relay`.
    pub fn new(
        upstream: UpstreamName,
        (client_info, capabilities, tasks): (Implementation, ClientCapabilities, TaskSupport),
        events: mpsc::UnboundedSender<UpstreamEvent>,
        relay: Arc<Relay>,
        (scope, roots): (Option<Principal>, Arc<[String]>),
    ) -> Self {
        let mut info = ClientConfig::new(capabilities, client_info);
        info.protocol_version = ProtocolVersion::V_2025_11_25;
        Self {
            upstream,
            info,
            events,
            relay,
            scope,
            roots,
            tasks,
        }
    }

    /// What it declares clients run as tasks when asked.
    pub fn declared_tasks(&self) -> TaskSupport {
        self.tasks
    }

    fn report(&self, event: UpstreamEvent) {
        // The supervisor may be gone during shutdown; nothing is lost then.
        let _ = self.events.send(event);
    }

    /// The client an upstream request is for, if it can be asked it.
    async fn target(
        &self,
        context: &RequestContext<RoleClient>,
        request: &ServerRequest,
    ) -> Result<Arc<Downstream>, ErrorData> {
        self.target_if_any(context, request)
            .await?
            .ok_or_else(|| no_client(request))
    }

    /// `target`, or none if no client's request was in flight at all (the upstream asks on
    /// its own account, as some do right after they start).
    async fn target_if_any(
        &self,
        context: &RequestContext<RoleClient>,
        request: &ServerRequest,
    ) -> Result<Option<Arc<Downstream>>, ErrorData> {
        let origin = context.extensions.get::<InboundStreamOrigin>();
        let arrival = context.extensions.get::<Arrival>();
        let Some(target) = self.relay.resolve(origin, arrival).await else {
            if arrival.is_some_and(|a| a.in_flight() > 1) {
                return Err(cannot_forward(
                    kind(request),
                    "it is not tied to one client's request (several are in flight on a shared \
                     upstream session; configure this upstream with session = \"per_client\")",
                ));
            }
            return Ok(None);
        };
        if target.is_stateless() && target.bridge.is_none() {
            return Err(cannot_forward(
                kind(request),
                "the client uses protocol 2026-07-28, which cannot receive requests during a call",
            ));
        }
        check_capability(&target.capabilities, request)?;
        Ok(Some(target))
    }
}

/// The error an upstream gets for a request no client's request was in flight for.
fn no_client(request: &ServerRequest) -> ErrorData {
    cannot_forward(
        kind(request),
        "no client request was in flight on this shared upstream session",
    )
}

impl UpstreamClient {
    /// A request rmcp read itself, asked as written (see `questions`): its params as rmcp
    /// gives them, with the `_meta` rmcp took out of them; the answer in rmcp's type.
    async fn ask_typed<R: DeserializeOwned>(
        &self,
        method: &str,
        params: Option<impl Serialize>,
        context: &RequestContext<RoleClient>,
    ) -> Result<R, ErrorData> {
        let mut params = match params.map(serde_json::to_value).transpose() {
            Ok(params) => params,
            Err(error) => return Err(ErrorData::internal_error(error.to_string(), None)),
        };
        if !context.meta.0.is_empty() {
            let params = params.get_or_insert_with(|| serde_json::json!({}));
            if let Some(object) = params.as_object_mut()
                && !object.contains_key("_meta")
                && let Ok(meta) = serde_json::to_value(&context.meta)
            {
                object.insert("_meta".into(), meta);
            }
        }
        let answer = self.ask_plainly(method, params, context).await?;
        serde_json::from_value(answer.0).map_err(|error| {
            ErrorData::internal_error(
                format!("the client answered with an unexpected result: {error}"),
                None,
            )
        })
    }
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
        self.ask_typed("sampling/createMessage", Some(params), &context)
            .await
    }

    async fn create_elicitation(
        &self,
        params: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        self.ask_typed("elicitation/create", Some(params), &context)
            .await
    }

    async fn list_roots(
        &self,
        context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        self.ask_typed("roots/list", None::<()>, &context).await
    }

    async fn on_custom_request(
        &self,
        request: CustomRequest,
        context: RequestContext<RoleClient>,
    ) -> Result<CustomResult, ErrorData> {
        self.custom_request(request, context).await
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.report(UpstreamEvent::ToolsChanged(self.scope.clone()));
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.report(UpstreamEvent::PromptsChanged(self.scope.clone()));
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.report(UpstreamEvent::ResourcesChanged(self.scope.clone()));
    }

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        // On a session's own connection, to that session if it subscribed here; otherwise
        // to everyone subscribed through the connection's scope.
        if let Some((session, exposed)) = self.relay.subscriber(&params.uri) {
            let update = ResourceUpdatedNotificationParam::new(exposed);
            let update = ServerNotification::ResourceUpdatedNotification(
                rmcp::model::ResourceUpdatedNotification::new(update),
            );
            send_notification(&session, update).await;
            return;
        }
        self.report(UpstreamEvent::ResourceUpdated(
            params.uri,
            self.scope.clone(),
        ));
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
            let notification = LoggingMessageNotification::new(params);
            send_notification(
                &target,
                ServerNotification::LoggingMessageNotification(notification),
            )
            .await;
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
        send_notification(
            &target,
            ServerNotification::CustomNotification(notification),
        )
        .await;
    }
}

/// The notification that a URL-mode elicitation has completed.
const ELICITATION_COMPLETE: &str = "notifications/elicitation/complete";

/// Logs a log message of an upstream in Switchyard's own log, at its level.
pub fn log_upstream_message(upstream: &UpstreamName, params: &LoggingMessageNotificationParam) {
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
