//! Switchyard's side of an upstream connection: the rmcp `ClientHandler` that announces the
//! gateway (or the client it stands for) and receives what the upstream sends unasked.
//!
//! List-change notifications become events for the upstream's supervisor, which rediscovers;
//! log messages go to the gateway's log under the upstream's name.

// MCP logging is deprecated by SEP-2577 but still sent by servers on the legacy protocol.
#![allow(deprecated)]

use rmcp::{
    ClientHandler,
    model::{
        ClientCapabilities, ClientConfig, Implementation, LoggingLevel,
        LoggingMessageNotificationParam, ProtocolVersion,
    },
    service::{NotificationContext, RoleClient},
};
use tokio::sync::mpsc;

use crate::names::UpstreamName;

/// Something an upstream told us that changes what the gateway serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpstreamEvent {
    ToolsChanged,
    PromptsChanged,
    ResourcesChanged,
}

/// The handler of one upstream connection.
#[derive(Clone)]
pub struct UpstreamClient {
    upstream: UpstreamName,
    info: ClientConfig,
    events: mpsc::UnboundedSender<UpstreamEvent>,
}

impl UpstreamClient {
    /// A handler announcing `client_info` to the upstream and reporting to `events`.
    pub fn new(
        upstream: UpstreamName,
        client_info: Implementation,
        events: mpsc::UnboundedSender<UpstreamEvent>,
    ) -> Self {
        let mut info = ClientConfig::new(ClientCapabilities::default(), client_info);
        info.protocol_version = ProtocolVersion::V_2025_11_25;
        Self {
            upstream,
            info,
            events,
        }
    }

    fn report(&self, event: UpstreamEvent) {
        // The supervisor may be gone during shutdown; nothing is lost then.
        let _ = self.events.send(event);
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

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.report(UpstreamEvent::ToolsChanged);
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.report(UpstreamEvent::PromptsChanged);
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.report(UpstreamEvent::ResourcesChanged);
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let upstream = &self.upstream;
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
}
