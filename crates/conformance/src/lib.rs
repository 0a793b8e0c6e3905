//! What the official conformance suite (`@modelcontextprotocol/conformance`) runs against.
//!
//! `switchyard-conformance server`: an MCP server implementing the suite's fixture surface, in
//! both protocol eras, with the tasks extension (`tasks`). It is the upstream CI runs the suite against directly and through
//! Switchyard, so that every check the fixture passes is shown to pass through the gateway too.
//! It serves streamable HTTP at `/mcp` on a loopback address.
//!
//! `switchyard-conformance client`: the client of the suite's authorization scenarios, built on
//! the gateway's OAuth client (`auth_client`).
//!
//! Beside them, `numbered`: a server that numbers its tasks from 1 at each start, for the
//! gateway's tests of task handles across an upstream's restarts.
//!
//! Test support: a crate of its own, so that none of it is compiled into the gateway.

// Logging, subscriptions and the legacy lifecycle are deprecated by SEP-2577 but still tested.
#![allow(deprecated)]

pub mod auth_client;
mod content;
mod mrtr;
pub mod numbered;
mod tasks;
mod tools;

use std::sync::{Arc, Mutex};

use rmcp::{
    ErrorData, RoleServer, ServerHandler,
    handler::server::{router::tool::ToolRouter, tool::ToolCallContext},
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams,
        CompleteRequestParams, CompleteResult, CompletionInfo, ContentBlock,
        GetPromptRequestParams, GetPromptResponse, GetTaskParams, GetTaskResult, Implementation,
        InitializeRequestParams, InitializeResult, ListPromptsResult, ListResourceTemplatesResult,
        ListResourcesResult, ListToolsResult, PaginatedRequestParams, ReadResourceRequestParams,
        ReadResourceResponse, RequestStateCodec, ServerCapabilities, ServerConfig,
        ServerNotification, SetLevelRequestParams, SubscribeRequestParams, SubscriptionFilter,
        Tool, UnsubscribeRequestParams, UpdateTaskParams,
    },
    service::{Peer, RequestContext, SubscriptionContext},
    task_manager::TaskManager,
    transport::{
        StreamableHttpServerConfig, StreamableHttpService,
        streamable_http_server::session::local::LocalSessionManager,
    },
};
use serde_json::{Value, json};
use tokio::{net::TcpListener, sync::mpsc};

/// What all sessions and requests of one fixture share.
struct Shared {
    /// Seals the state of multi-round tools.
    codec: Arc<RequestStateCodec>,
    /// Legacy sessions, told about list changes.
    sessions: Mutex<Vec<Peer<RoleServer>>>,
    /// Open `subscriptions/listen` requests, told about list changes.
    listeners: Mutex<Vec<mpsc::UnboundedSender<ServerNotification>>>,
    /// The tasks of the tasks-extension tools.
    tasks: TaskManager,
}

/// The handler of one session (or one stateless request).
#[derive(Clone)]
pub struct ConformanceServer {
    shared: Arc<Shared>,
    tool_router: ToolRouter<Self>,
}

impl ConformanceServer {
    fn new(shared: Arc<Shared>) -> Self {
        Self {
            shared,
            tool_router: Self::tool_router(),
        }
    }

    /// Sends a list-change notification to every session and listener.
    async fn announce(&self, notification: ServerNotification) {
        let sessions = self
            .shared
            .sessions
            .lock()
            .map(|s| s.clone())
            .unwrap_or_default();
        for peer in sessions {
            let _ = peer.send_notification(notification.clone()).await;
        }
        if let Ok(mut listeners) = self.shared.listeners.lock() {
            listeners.retain(|listener| listener.send(notification.clone()).is_ok());
        }
    }

    /// Tools defined by hand: those with a literal schema, and the multi-round ones.
    fn manual_tools() -> Vec<Tool> {
        let mut tools = mrtr::tools();
        tools.extend(tasks::tools());
        let Value::Object(schema) = json_schema_2020_12() else {
            unreachable!()
        };
        tools.push(Tool::new(
            JSON_SCHEMA_TOOL,
            "A tool whose input schema uses JSON Schema 2020-12 features",
            schema,
        ));
        tools
    }
}

const JSON_SCHEMA_TOOL: &str = "json_schema_2020_12_tool";

/// The input schema the suite's `json-schema-2020-12` scenario looks for, verbatim.
fn json_schema_2020_12() -> Value {
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {"address": {"$anchor": "addressDef", "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
        "properties": {
            "name": {"type": "string"},
            "address": {"$ref": "#/$defs/address"},
            "contactMethod": {"type": "string", "enum": ["phone", "email"]},
            "phone": {"type": "string"},
            "email": {"type": "string"}
        },
        "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
        "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
        "then": {"required": ["phone"]},
        "else": {"required": ["email"]},
        "additionalProperties": false
    })
}

fn is_modern(context: &RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .is_some_and(|version| !version.has_initialize())
}

impl ServerHandler for ConformanceServer {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_completions()
            .enable_logging()
            .enable_prompts()
            .enable_resources()
            .enable_tools()
            .enable_prompts_list_changed()
            .enable_resources_subscribe()
            .enable_tool_list_changed()
            .enable_tasks()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new(
                "switchyard-conformance-fixture",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions("The fixture surface of the MCP conformance suite.")
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        context.peer.set_peer_info(request.clone());
        if let Ok(mut sessions) = self.shared.sessions.lock() {
            sessions.retain(|peer| !peer.is_transport_closed());
            sessions.push(context.peer.clone());
        }
        self.negotiate_initialize(&request)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let mut tools = self.tool_router.list_all();
        tools.extend(Self::manual_tools());
        Ok(ListToolsResult::with_all_items(tools))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tool_router
            .get(name)
            .cloned()
            .or_else(|| Self::manual_tools().into_iter().find(|t| t.name == name))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if request.name == JSON_SCHEMA_TOOL {
            let text = format!(
                "Received {}",
                Value::Object(request.arguments.unwrap_or_default())
            );
            return Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into());
        }
        if tasks::is_task_tool(&request.name) {
            let capabilities = context.client_capabilities().unwrap_or_default();
            return tasks::call(&self.shared.tasks, &request, &capabilities).await;
        }
        if mrtr::is_mrtr_tool(&request.name) {
            if !is_modern(&context) {
                return Ok(CallToolResult::error(vec![ContentBlock::text(
                    "this tool needs protocol 2026-07-28",
                )])
                .into());
            }
            let capabilities = context.client_capabilities().unwrap_or_default();
            return mrtr::call(&self.shared.codec, &request, &capabilities);
        }
        self.tool_router
            .call(ToolCallContext::new(self, request, context))
            .await
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        Ok(ListResourcesResult::with_all_items(content::resources()))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(ListResourceTemplatesResult::with_all_items(
            content::templates(),
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        content::read(&request.uri).map(Into::into)
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let mut prompts = content::prompts();
        prompts.push(rmcp::model::Prompt::new(
            mrtr::PROMPT,
            Some("A prompt that asks for input first (on 2026-07-28)"),
            None,
        ));
        Ok(ListPromptsResult::with_all_items(prompts))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        if request.name == mrtr::PROMPT {
            return Ok(mrtr::get_prompt(&request, is_modern(&context)));
        }
        let arguments = request.arguments.unwrap_or_default();
        content::get_prompt(&request.name, &arguments).map(Into::into)
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let values = match request.argument.name.as_str() {
            "arg1" | "arg2" => vec![format!("{}-completed", request.argument.value)],
            _ => Vec::new(),
        };
        let completion = CompletionInfo::new(values)
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        Ok(CompleteResult::new(completion))
    }

    async fn subscribe(
        &self,
        _request: SubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        Ok(())
    }

    async fn unsubscribe(
        &self,
        _request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        Ok(())
    }

    async fn set_level(
        &self,
        _request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        Ok(())
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        Ok(GetTaskResult::new(
            self.shared.tasks.get_task(&request.task_id)?,
        ))
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.shared
            .tasks
            .update_task(&request.task_id, request.input_responses)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.shared.tasks.cancel_task(&request.task_id)
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(requested.clone())
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let (sender, mut notifications) = mpsc::unbounded_channel();
        if let Ok(mut listeners) = self.shared.listeners.lock() {
            listeners.push(sender);
        }
        loop {
            tokio::select! {
                _ = context.cancelled() => return Ok(()),
                Some(notification) = notifications.recv() => {
                    // Kinds the client did not ask for are refused by the sink; that is fine.
                    let _ = context.sink().send(notification).await;
                }
            }
        }
    }
}

/// The fixture as an HTTP application: streamable HTTP at `/mcp`.
pub fn app() -> axum::Router {
    let shared = Arc::new(Shared {
        codec: Arc::new(RequestStateCodec::new(rand_key().to_vec())),
        sessions: Mutex::default(),
        listeners: Mutex::default(),
        tasks: TaskManager::new(),
    });
    let service = StreamableHttpService::new(
        move || Ok(ConformanceServer::new(shared.clone())),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    axum::Router::new().nest_service("/mcp", service)
}

/// Serves the fixture on `listener` until the process ends.
pub async fn serve(listener: TcpListener) -> std::io::Result<()> {
    let listener = axum::serve::ListenerExt::tap_io(listener, |stream| {
        let _ = stream.set_nodelay(true);
    });
    axum::serve(listener, app()).await
}

/// A key for sealing request state, fresh for each run.
fn rand_key() -> [u8; 32] {
    let mut key = [0u8; 32];
    let a = uuid::Uuid::new_v4();
    let b = uuid::Uuid::new_v4();
    key[..16].copy_from_slice(a.as_bytes());
    key[16..].copy_from_slice(b.as_bytes());
    key
}
