//! The typed path: rmcp's `ServerHandler` for the requests that are not hot (initialize, ping,
//! completion, log levels, subscriptions, discovery, `subscriptions/listen`, and anything a
//! future revision adds). One handler serves one request, for its session (if it has one) and
//! with its downstream side; rmcp's server machinery applies the protocol's rules around it.

// resources/subscribe and logging/setLevel are legacy-only (deprecated), but still served.
#![allow(deprecated)]

use std::sync::Arc;

use rmcp::{
    ErrorData, RoleServer, ServerHandler,
    model::{
        CallToolRequestParams, CallToolResponse, CompleteRequestParams, CompleteResult,
        GetPromptRequestParams, GetPromptResponse, InitializeRequestParams, InitializeResult,
        ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult,
        PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse, RequestMetaObject,
        ServerConfig, SetLevelRequestParams, SubscribeRequestParams, SubscriptionFilter,
        UnsubscribeRequestParams,
    },
    service::{RequestContext, SubscriptionContext},
};
use serde::de::DeserializeOwned;

use super::{Session, listen, upstreams::Source};
use crate::{
    catalog::{Catalog, ListKind},
    downstream::Downstream,
    gateway::Gateway,
    protocol::{Era, TASKS_EXTENSION},
    request::Request,
    router::{Call, Target},
};

/// Serves one request of the typed path.
pub struct SessionHandler {
    gateway: Arc<Gateway>,
    request: Arc<Request>,
    /// `None` for a 2026-07-28 request.
    session: Option<Arc<Session>>,
    downstream: Arc<Downstream>,
    /// Where a routed request goes, found before it came this way.
    target: Option<Target>,
}

impl SessionHandler {
    pub fn new(
        gateway: Arc<Gateway>,
        request: Arc<Request>,
        session: Option<Arc<Session>>,
        downstream: Arc<Downstream>,
        target: Option<Target>,
    ) -> Self {
        Self {
            gateway,
            request,
            session,
            downstream,
            target,
        }
    }

    fn call<'a>(
        &'a self,
        source: &'a Source<'a>,
        context: &'a RequestContext<RoleServer>,
    ) -> Call<'a, Source<'a>> {
        Call {
            request: &self.request,
            store: self.gateway.store(),
            source,
            downstream: self.downstream.clone(),
            ct: &context.ct,
            held: Default::default(),
        }
    }

    fn source(&self) -> Source<'_> {
        match &self.session {
            Some(session) => Source::Session(session.upstreams()),
            None => Source::Stateless(&self.request.caller.principal),
        }
    }

    /// Where the routed request goes.
    fn target(&self) -> Result<&Target, ErrorData> {
        self.target.as_ref().ok_or_else(|| {
            ErrorData::internal_error("a routed request came without its route", None)
        })
    }

    /// A page of a merged list, as a typed result.
    fn listed<T: DeserializeOwned>(
        &self,
        request: Option<&PaginatedRequestParams>,
        kind: ListKind,
    ) -> Result<T, ErrorData> {
        let cursor = request.and_then(|r| r.cursor.as_deref());
        let (live, era) = (&self.request.live, self.request.era);
        let page = live.list_page(
            kind,
            era,
            cursor,
            (self.request.viewer(), self.request.declared()),
        )?;
        serde_json::from_slice(&page).map_err(|error| {
            ErrorData::internal_error(format!("a prepared list cannot be read: {error}"), None)
        })
    }
}

impl ServerHandler for SessionHandler {
    fn get_info(&self) -> ServerConfig {
        self.gateway.server_info(self.request.view())
    }

    /// A second `initialize` on a session keeps the session as it is.
    async fn initialize(
        &self,
        request: InitializeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        self.negotiate_initialize(&request)
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.listed(request.as_ref(), ListKind::Tools)
    }

    async fn call_tool(
        &self,
        mut request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let source = self.source();
        let call = self.call(&source, &context);
        with_client_meta(&mut request.meta, &context);
        call.call_tool(request, self.target()?)
            .await
            .map_err(Into::into)
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        self.listed(request.as_ref(), ListKind::Prompts)
    }

    async fn get_prompt(
        &self,
        mut request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let source = self.source();
        let call = self.call(&source, &context);
        with_client_meta(&mut request.meta, &context);
        call.get_prompt(request, self.target()?)
            .await
            .map_err(Into::into)
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        self.listed(request.as_ref(), ListKind::Resources)
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        self.listed(request.as_ref(), ListKind::Templates)
    }

    async fn read_resource(
        &self,
        mut request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let source = self.source();
        let call = self.call(&source, &context);
        with_client_meta(&mut request.meta, &context);
        call.read_resource(request, self.target()?)
            .await
            .map_err(Into::into)
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let source = self.source();
        let call = self.call(&source, &context);
        call.complete(request).await.map_err(Into::into)
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let Some(session) = &self.session else {
            return Err(ErrorData::invalid_request(
                "resources/subscribe needs a session; use subscriptions/listen",
                None,
            ));
        };
        session
            .subscribe(
                &self.gateway,
                &self.request.live,
                self.request.viewer(),
                request.uri,
            )
            .await
            .map_err(Into::into)
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        if let Some(session) = &self.session {
            session.unsubscribe(&self.gateway, &request.uri).await;
        }
        Ok(())
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        if let Some(session) = &self.session {
            session.upstreams().set_log_level(request.level).await;
        }
        Ok(())
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let mut accepted = requested.clone();
        if let Some(uris) = &mut accepted.resource_subscriptions {
            let (live, view) = (&self.request.live, self.request.view());
            uris.retain(|uri| live.resolve_uri(view, uri).is_ok());
        }
        Some(accepted)
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        listen::serve(&self.gateway, &self.request, &self.downstream, context).await
    }
}

/// The answer to `initialize`: Switchyard's capabilities and identity, with the protocol
/// version agreed by rmcp's rule (the client's, if Switchyard speaks it, else the newest one
/// with an `initialize`).
pub fn negotiate(
    gateway: &Gateway,
    catalog: &Catalog,
    params: &InitializeRequestParams,
) -> Result<InitializeResult, ErrorData> {
    /// Switchyard as rmcp's handler sees it when it only announces itself.
    struct Announce(ServerConfig);
    impl ServerHandler for Announce {
        fn get_info(&self) -> ServerConfig {
            self.0.clone()
        }
    }
    Announce(gateway.server_info(catalog)).negotiate_initialize(params)
}

/// The answer to `initialize` (a JSON-RPC message) with tasks announced the legacy way: if a
/// tool of `catalog` can run as one and the version agreed has them, 2025-11-25's
/// `capabilities.tasks` (which the SDK's model lacks: tool calls may create tasks, which can
/// be listed and cancelled), and never the 2026-07-28 extension.
pub fn announce_tasks(answer: bytes::Bytes, catalog: &Catalog) -> bytes::Bytes {
    let legacy = !catalog.task_upstreams(Era::Legacy).is_empty();
    let modern = !catalog.task_upstreams(Era::Modern).is_empty();
    if !legacy && !modern {
        return answer;
    }
    let Ok(mut message) = serde_json::from_slice::<serde_json::Value>(&answer) else {
        return answer;
    };
    let version = message
        .pointer("/result/protocolVersion")
        .and_then(|version| version.as_str())
        .unwrap_or_default()
        .to_owned();
    let Some(capabilities) = message
        .pointer_mut("/result/capabilities")
        .and_then(|caps| caps.as_object_mut())
    else {
        return answer;
    };
    if let Some(extensions) = capabilities
        .get_mut("extensions")
        .and_then(|extensions| extensions.as_object_mut())
    {
        extensions.remove(TASKS_EXTENSION);
        if extensions.is_empty() {
            capabilities.remove("extensions");
        }
    }
    if legacy && version.as_str() >= "2025-11-25" {
        capabilities.insert(
        "tasks".into(),
            serde_json::json!({ "list": {}, "cancel": {}, "requests": { "tools": { "call": {} } } }),
        );
    }
    serde_json::to_vec(&message).map_or(answer, bytes::Bytes::from)
}

/// Gives back to `meta` (a request's params' `_meta`) what rmcp took out of them into the
/// request's context, so that the client's keys go on upstream as they do on the raw path.
fn with_client_meta(meta: &mut Option<RequestMetaObject>, context: &RequestContext<RoleServer>) {
    if meta.is_none() && !context.meta.0.is_empty() {
        *meta = Some(context.meta.clone());
    }
}
