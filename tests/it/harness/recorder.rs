//! A recording client for tests: answers what servers ask in its own name and keeps what they send.

use std::{sync::Arc, time::Duration};

use rmcp::{
    RoleClient, ServiceExt,
    model::{ClientCapabilities, ClientConfig, Implementation, ProtocolVersion},
    service::{ClientLifecycleMode, ClientServiceExt, RunningService},
    transport::{
        StreamableHttpClientTransport, streamable_http_client::StreamableHttpClientTransportConfig,
    },
};

/// A client that answers what servers ask (sampling, elicitation, roots) in its own name and
/// records what they send (progress, log messages, resource updates, list changes).
#[derive(Clone)]
pub struct Recorder {
    name: String,
    capabilities: ClientCapabilities,
    /// How it answers Switchyard's own question about a call waiting for approval.
    approves: bool,
    pub seen: Arc<std::sync::Mutex<Seen>>,
}

/// What a `Recorder` received.
#[derive(Default, Debug)]
pub struct Seen {
    pub progress: Vec<(String, f64, Option<String>)>,
    pub logs: Vec<serde_json::Value>,
    pub updated: Vec<String>,
    pub tools_changed: usize,
    /// Requests from the server that it cancelled while they were being answered.
    pub cancelled: usize,
    /// Notifications outside the typed set: (method, params).
    pub custom: Vec<(String, serde_json::Value)>,
    /// The messages of the approvals it was asked for.
    pub approvals: Vec<String>,
}

impl Recorder {
    /// A client named `name` declaring sampling, elicitation (form and URL) and roots.
    pub fn capable(name: &str) -> Self {
        let mut capabilities = ClientCapabilities::default();
        #[allow(deprecated)]
        {
            capabilities.sampling = Some(Default::default());
            capabilities.roots = Some(Default::default());
        }
        capabilities.elicitation = Some(
            rmcp::model::ElicitationCapability::new()
                .with_form(Default::default())
                .with_url(Default::default()),
        );
        Self::with_capabilities(name, capabilities)
    }

    /// A client declaring nothing it could be asked.
    pub fn plain(name: &str) -> Self {
        Self::with_capabilities(name, ClientCapabilities::default())
    }

    fn with_capabilities(name: &str, capabilities: ClientCapabilities) -> Self {
        Self {
            name: name.to_owned(),
            capabilities,
            approves: true,
            seen: Default::default(),
        }
    }

    /// Answers Switchyard's approval questions with `allow` = `approves` (by default, yes).
    pub fn approving(mut self, approves: bool) -> Self {
        self.approves = approves;
        self
    }

    pub fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.seen.lock().unwrap()
    }

    /// Waits (5 s at most) until `count` progress notifications have been handled. rmcp's
    /// client handles each notification on a task of its own, so a call's answer can be back
    /// before the handler of its last progress has run, although the progress came first.
    pub async fn progress_reaches(&self, count: usize) -> bool {
        super::eventually(Duration::from_secs(5), || {
            self.seen().progress.len() >= count
        })
        .await
    }

    /// Connects to `url` statelessly, as a 2026-07-28 client.
    pub async fn connect_modern(self, url: &str) -> RunningService<RoleClient, Recorder> {
        self.serve_with_lifecycle(
            StreamableHttpClientTransport::from_uri(url.to_owned()),
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .expect("recorder connects")
    }

    /// Connects to `url` with a session, sending `token` as its bearer.
    pub async fn connect_as(self, url: &str, token: &str) -> RunningService<RoleClient, Recorder> {
        let transport = StreamableHttpClientTransport::from_config(
            StreamableHttpClientTransportConfig::with_uri(url.to_owned()).auth_header(token),
        );
        self.serve(transport).await.expect("recorder connects")
    }

    /// Connects to `url` with a session.
    pub async fn connect(self, url: &str) -> RunningService<RoleClient, Recorder> {
        self.serve(StreamableHttpClientTransport::from_uri(url.to_owned()))
            .await
            .expect("recorder connects")
    }
}

#[allow(deprecated)]
impl rmcp::ClientHandler for Recorder {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            self.capabilities.clone(),
            Implementation::new(&self.name, "0.1.0"),
        )
    }

    async fn create_message(
        &self,
        _params: rmcp::model::CreateMessageRequestParams,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::CreateMessageResult, rmcp::ErrorData> {
        Ok(rmcp::model::CreateMessageResult::new(
            rmcp::model::SamplingMessage::assistant_text(format!("sampled for {}", self.name)),
            "test-model".into(),
        ))
    }

    /// Answers a form with its name, except one saying "stall" (left unanswered until the
    /// server cancels it) and Switchyard's approval question (see `approving`). Accepts URL
    /// elicitations.
    async fn create_elicitation(
        &self,
        request: rmcp::model::ElicitRequestParams,
        context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction};
        Ok(match request {
            ElicitRequestParams::FormElicitationParams { message, .. } if message == "stall" => {
                let cancelled = context.ct.cancelled();
                if tokio::time::timeout(Duration::from_secs(10), cancelled)
                    .await
                    .is_ok()
                {
                    self.seen().cancelled += 1;
                }
                return Err(rmcp::ErrorData::internal_error("stalled", None));
            }
            ElicitRequestParams::FormElicitationParams { message, .. }
                if message.starts_with("Switchyard asks for your approval") =>
            {
                self.seen().approvals.push(message);
                ElicitResult::new(ElicitationAction::Accept)
                    .with_content(serde_json::json!({"allow": self.approves}))
            }
            ElicitRequestParams::FormElicitationParams { .. } => {
                ElicitResult::new(ElicitationAction::Accept)
                    .with_content(serde_json::json!({"name": self.name}))
            }
            _ => ElicitResult::new(ElicitationAction::Accept),
        })
    }

    async fn on_custom_notification(
        &self,
        notification: rmcp::model::CustomNotification,
        _context: rmcp::service::NotificationContext<RoleClient>,
    ) {
        let params = notification.params.unwrap_or_default();
        self.seen().custom.push((notification.method, params));
    }

    async fn list_roots(
        &self,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ListRootsResult, rmcp::ErrorData> {
        Ok(rmcp::model::ListRootsResult::new(vec![
            rmcp::model::Root::new(format!("file:///home/{}", self.name)),
        ]))
    }

    async fn on_progress(
        &self,
        params: rmcp::model::ProgressNotificationParam,
        _context: rmcp::service::NotificationContext<RoleClient>,
    ) {
        let token = serde_json::to_string(&params.progress_token).unwrap();
        self.seen()
            .progress
            .push((token, params.progress, params.message));
    }

    async fn on_logging_message(
        &self,
        params: rmcp::model::LoggingMessageNotificationParam,
        _context: rmcp::service::NotificationContext<RoleClient>,
    ) {
        self.seen().logs.push(params.data);
    }

    async fn on_resource_updated(
        &self,
        params: rmcp::model::ResourceUpdatedNotificationParam,
        _context: rmcp::service::NotificationContext<RoleClient>,
    ) {
        self.seen().updated.push(params.uri);
    }

    async fn on_tool_list_changed(&self, _context: rmcp::service::NotificationContext<RoleClient>) {
        self.seen().tools_changed += 1;
    }
}
