//! Downstream sessions: the rmcp `ServerHandler` that serves one MCP client.
//!
//! rmcp's streamable-HTTP service creates one handler per session when a client `initialize`s,
//! and one per request for stateless 2026-07-28 clients. A session's handler owns that session's
//! upstream connections, which close when the session ends (DELETE or idle timeout) and the
//! handler is dropped. Lists are answered from the catalog snapshot; everything else is routed.

// resources/subscribe and logging/setLevel are legacy-only (deprecated), but still served.
#![allow(deprecated)]

mod listen;
mod notify;
mod subscriptions;
mod upstreams;

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, OnceLock},
};

use rmcp::{
    ErrorData, RoleServer, ServerHandler,
    model::{
        CallToolRequestParams, CallToolResponse, CompleteRequestParams, CompleteResult,
        GetPromptRequestParams, GetPromptResponse, InitializeRequestParams, InitializeResult,
        ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult,
        PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse, ServerConfig,
        SetLevelRequestParams, SubscribeRequestParams, SubscriptionFilter, Tool,
        UnsubscribeRequestParams,
    },
    service::{RequestContext, SubscriptionContext},
};

pub use subscriptions::{Outbox, Subscription, Subscriptions};
pub use upstreams::{SessionUpstreams, Source};

use tokio_util::sync::{CancellationToken, DropGuard};

use crate::{
    catalog::{Catalog, Cursor, ListKind, page},
    error::GatewayError,
    gateway::Gateway,
    principal::Principal,
    router::{Call, resolve_uri},
    upstream::{Downstream, LogLevel, SessionLogLevel},
};

/// Serves one downstream session (or one stateless request).
pub struct SessionHandler {
    gateway: Arc<Gateway>,
    /// Set by `initialize`; stateless requests never have one and use shared connections.
    session: OnceLock<SessionState>,
}

/// What a session owns; dropped (and so released) when the session ends.
struct SessionState {
    upstreams: SessionUpstreams,
    /// Where the session's notifier takes notifications from (resource updates).
    outbox: Outbox,
    /// The resources it subscribed to, by the URI it used.
    subscriptions: Mutex<HashMap<String, Subscription>>,
    /// Stops the notifier task.
    _notifier: DropGuard,
}

impl SessionHandler {
    pub fn new(gateway: Arc<Gateway>) -> Self {
        Self {
            gateway,
            session: OnceLock::new(),
        }
    }

    /// Routes one request of this session (or one stateless request).
    fn call<'a>(
        &'a self,
        source: &'a Source<'a>,
        context: &'a RequestContext<RoleServer>,
    ) -> Call<'a, Source<'a>> {
        Call {
            gateway: &self.gateway,
            source,
            downstream: Arc::new(Downstream {
                peer: context.peer.clone(),
                request_id: Some(context.id.clone()),
                progress_token: context.meta.get_progress_token(),
                capabilities: context.client_capabilities().unwrap_or_default(),
                stateless: self.session.get().is_none(),
                log_level: match self.session.get() {
                    Some(session) => LogLevel::Session(session.upstreams.log_level().clone()),
                    None => requested_log_level(&context.meta),
                },
                meta: context.meta.clone(),
                principal: principal_of(&context.extensions),
            }),
            ct: &context.ct,
        }
    }

    fn source(&self) -> Source<'_> {
        match self.session.get() {
            Some(session) => Source::Session(&session.upstreams),
            None => Source::Shared,
        }
    }

    /// One page of a list of the catalog: the current snapshot's first page, or the page a
    /// cursor names in the snapshot it was given out for.
    fn listed<T: Clone>(
        &self,
        request: Option<&PaginatedRequestParams>,
        kind: ListKind,
        items: fn(&Catalog) -> &[T],
    ) -> Result<(Vec<T>, Option<String>), ErrorData> {
        let page_size = self.gateway.config().catalog.page_size;
        let (catalog, offset) = match request.and_then(|r| r.cursor.as_deref()) {
            None => (self.gateway.catalog().clone(), 0),
            Some(text) => {
                let invalid = |why: &str| {
                    ErrorData::from(GatewayError::InvalidParams(format!(
                        "cursor `{text}` {why}"
                    )))
                };
                let cursor = Cursor::decode(text, kind).ok_or_else(|| invalid("is not valid"))?;
                let catalog = self.gateway.catalog_at(cursor.generation).ok_or_else(|| {
                    invalid("has expired: the list changed since; list again from the start")
                })?;
                (catalog, cursor.offset)
            }
        };
        Ok(page(
            items(&catalog),
            kind,
            catalog.generation(),
            offset,
            page_size,
        ))
    }
}

/// The log level a 2026-07-28 request asks for in its `_meta`, if any.
fn requested_log_level(meta: &rmcp::model::RequestMetaObject) -> LogLevel {
    meta.get(LOG_LEVEL_META)
        .and_then(|level| serde_json::from_value(level.clone()).ok())
        .map_or(LogLevel::Unset, LogLevel::Request)
}

/// The `_meta` key in which a 2026-07-28 request asks for log messages.
const LOG_LEVEL_META: &str = "io.modelcontextprotocol/logLevel";

/// The principal the HTTP front authenticated the request as (an extension of the request it
/// came in), else the anonymous one.
fn principal_of(extensions: &rmcp::model::Extensions) -> Principal {
    extensions
        .get::<http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<Principal>())
        .cloned()
        .unwrap_or_default()
}

impl SessionState {
    fn subscribed(&self) -> std::sync::MutexGuard<'_, HashMap<String, Subscription>> {
        self.subscriptions
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl ServerHandler for SessionHandler {
    fn get_info(&self) -> ServerConfig {
        self.gateway.server_info()
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        context.peer.set_peer_info(request.clone());
        if self.session.get().is_none() {
            let log_level = Arc::new(SessionLogLevel::new());
            let home = Arc::new(Downstream {
                peer: context.peer.clone(),
                request_id: None,
                progress_token: None,
                capabilities: request.capabilities.clone(),
                stateless: false,
                meta: Default::default(),
                principal: principal_of(&context.extensions),
                log_level: LogLevel::Session(log_level.clone()),
            });
            let (outbox, receiver) = tokio::sync::mpsc::channel(subscriptions::OUTBOX_CAPACITY);
            let stop = CancellationToken::new();
            notify::spawn_notifier(
                self.gateway.clone(),
                context.peer.clone(),
                receiver,
                stop.clone(),
            );
            // A repeated initialize on the same session keeps the first identity.
            let _ = self.session.set(SessionState {
                upstreams: SessionUpstreams::new(request.client_info.clone(), home, log_level),
                outbox,
                subscriptions: Mutex::default(),
                _notifier: stop.drop_guard(),
            });
        }
        self.negotiate_initialize(&request)
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let (items, next) = self.listed(request.as_ref(), ListKind::Tools, Catalog::tools)?;
        let mut result = ListToolsResult::with_all_items(items);
        result.next_cursor = next;
        Ok(result)
    }

    /// For rmcp's SEP-2243 header validation: only the input schema is read, so no copy of the
    /// full definition is made.
    fn get_tool(&self, name: &str) -> Option<Tool> {
        let schema = self.gateway.catalog().tool_schema(name)?;
        Some(Tool::new(name.to_owned(), "", schema))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let source = self.source();
        self.call(&source, &context)
            .call_tool(request)
            .await
            .map_err(Into::into)
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let (items, next) = self.listed(request.as_ref(), ListKind::Prompts, Catalog::prompts)?;
        let mut result = ListPromptsResult::with_all_items(items);
        result.next_cursor = next;
        Ok(result)
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let source = self.source();
        self.call(&source, &context)
            .get_prompt(request)
            .await
            .map_err(Into::into)
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let (items, next) =
            self.listed(request.as_ref(), ListKind::Resources, Catalog::resources)?;
        let mut result = ListResourcesResult::with_all_items(items);
        result.next_cursor = next;
        Ok(result)
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let (items, next) =
            self.listed(request.as_ref(), ListKind::Templates, Catalog::templates)?;
        let mut result = ListResourceTemplatesResult::with_all_items(items);
        result.next_cursor = next;
        Ok(result)
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let source = self.source();
        self.call(&source, &context)
            .read_resource(request)
            .await
            .map_err(Into::into)
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let source = self.source();
        self.call(&source, &context)
            .complete(request)
            .await
            .map_err(Into::into)
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let Some(session) = self.session.get() else {
            return Err(ErrorData::invalid_request(
                "resources/subscribe needs a session; use subscriptions/listen",
                None,
            ));
        };
        if session.subscribed().contains_key(&request.uri) {
            return Ok(());
        }
        let (owner, original, _) = resolve_uri(&self.gateway, &request.uri)?;
        let upstream = self.gateway.serving_upstream(&owner)?;
        let subscription = self
            .gateway
            .subscriptions()
            .subscribe(
                upstream,
                original,
                request.uri.clone(),
                session.outbox.clone(),
            )
            .await?;
        session.subscribed().insert(request.uri, subscription);
        Ok(())
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        if let Some(session) = self.session.get() {
            session.subscribed().remove(&request.uri);
        }
        Ok(())
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        if let Some(session) = self.session.get() {
            session.upstreams.set_log_level(request.level).await;
        }
        Ok(())
    }

    async fn on_roots_list_changed(
        &self,
        _context: rmcp::service::NotificationContext<RoleServer>,
    ) {
        if let Some(session) = self.session.get() {
            session.upstreams.roots_changed().await;
        }
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let mut accepted = requested.clone();
        if let Some(uris) = &mut accepted.resource_subscriptions {
            uris.retain(|uri| resolve_uri(&self.gateway, uri).is_ok());
        }
        Some(accepted)
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        listen::serve(&self.gateway, context).await
    }
}
