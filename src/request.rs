//! One client request as the layers below the front see it: who makes it and at which
//! endpoint, the protocol era it speaks, its message read once (envelope, params, `_meta`),
//! the client's headers, and the snapshot of the gateway it is answered from. The front builds
//! it; `session` and `router` take it as an argument, so everything a request decides (its
//! routes, its lists, the upstream it goes to) comes from one snapshot and one reading.

use std::sync::{Arc, OnceLock};

use rmcp::model::ClientCapabilities;

use crate::{
    catalog::{Catalog, Features},
    gateway::Live,
    policy::{EndpointName, Viewer},
    principal::Principal,
    protocol::{Era, MCP_PROTOCOL_VERSION, META_CLIENT_CAPABILITIES, MODERN, TASKS_EXTENSION},
    telemetry::{Arriving, Trace},
    wire::{self, Fields, Parsed, ParsedRequest},
};

/// Who makes a request, and the endpoint it came to, as the front found them.
#[derive(Debug, Clone)]
pub struct Caller {
    pub principal: Principal,
    pub endpoint: EndpointName,
}

impl Caller {
    /// Whom the catalog is shown to.
    pub fn viewer(&self) -> Viewer<'_> {
        Viewer {
            endpoint: &self.endpoint,
            principal: &self.principal,
        }
    }
}

/// A request being answered.
pub struct Request {
    /// The snapshot the request is answered from, loaded once as it arrived.
    pub live: Arc<Live>,
    pub caller: Caller,
    /// A session's request is of the legacy era; one that stands alone, of 2026-07-28.
    pub era: Era,
    pub message: ParsedRequest,
    /// The client's HTTP headers (some are forwarded to upstreams that ask for them).
    pub headers: http::HeaderMap,
    /// Whether it is traced, its span, and the trace context its upstream calls pass on.
    pub trace: Trace,
    /// What the caller sees of `live`'s catalog, found on first use.
    view: OnceLock<Arc<Catalog>>,
    /// What a session's client declared it can do (for a request that stands alone, its
    /// `_meta` says, read when needed).
    declared: Option<Features>,
    /// What a request that stands alone states of its client (see `stated_capabilities`).
    stated: OnceLock<Arc<ClientCapabilities>>,
}

impl Request {
    pub fn new(
        live: Arc<Live>,
        caller: Caller,
        era: Era,
        message: ParsedRequest,
        headers: http::HeaderMap,
    ) -> Self {
        let version = match era {
            Era::Modern => Some(MODERN.as_str()),
            // The version the session agreed on, which its client repeats in a header.
            Era::Legacy => headers
                .get(MCP_PROTOCOL_VERSION)
                .and_then(|version| version.to_str().ok()),
        };
        let trace = Trace::of(
            &headers,
            message.meta(),
            &Arriving {
                method: message.method(),
                era: version,
                id: message.id(),
                principal: caller.principal.as_str(),
                endpoint: caller.endpoint.as_virtual().unwrap_or("main"),
            },
        );
        Self {
            live,
            caller,
            era,
            message,
            headers,
            trace,
            view: OnceLock::new(),
            declared: None,
            stated: OnceLock::new(),
        }
    }

    /// Whether a 2026-07-28 request's `_meta` declares the tasks extension among its client's
    /// capabilities.
    pub fn declares_tasks(&self) -> bool {
        let meta = self.message.meta();
        let Some(capabilities) = meta.and_then(|meta| meta.get(META_CLIENT_CAPABILITIES)) else {
            return false;
        };
        let extensions = Fields::of(capabilities).and_then(|caps| caps.get("extensions"));
        let declared = extensions
            .and_then(Fields::of)
            .and_then(|extensions| extensions.get(TASKS_EXTENSION));
        declared.is_some_and(|declared| declared.get().starts_with('{'))
    }

    /// This request, of a session whose client declared `features`.
    pub fn declaring(mut self, features: Features) -> Self {
        self.declared = Some(features);
        self
    }

    /// The client features the caller declared, as far as a tool of the snapshot depends on
    /// one (all of them where none does, without reading anything).
    pub fn declared(&self) -> Features {
        if !self.live.catalog.depends_on_client() {
            return Features::ALL;
        }
        if let Some(declared) = self.declared {
            return declared;
        }
        Features::declared(self.stated_capabilities(), false)
    }

    /// The capabilities a request that stands alone states in its `_meta` (none, where it
    /// states none), read on first use.
    pub fn stated_capabilities(&self) -> &Arc<ClientCapabilities> {
        self.stated.get_or_init(|| {
            let capabilities = (self.message.meta())
                .and_then(|meta| meta.get(META_CLIENT_CAPABILITIES))
                .and_then(|caps| serde_json::from_str::<ClientCapabilities>(caps.get()).ok());
            Arc::new(capabilities.unwrap_or_default())
        })
    }

    /// A request the gateway makes of `outer`'s (a gateway tool's inner call, a linked
    /// resource read, a call with its arguments changed): `method` with `params` (a JSON
    /// object), under `outer`'s id, with the same caller, snapshot and trace. `None` if what
    /// was written cannot be read back as a request.
    pub fn within(outer: &Self, method: &str, params: &[u8]) -> Option<Self> {
        let body = wire::write::request(outer.id(), method, Some(params));
        let message = Parsed::read(body.into()).ok()?.into_request().ok()?;
        Some(Self {
            live: outer.live.clone(),
            caller: outer.caller.clone(),
            era: outer.era,
            message,
            headers: outer.headers.clone(),
            trace: outer.trace.nested(),
            view: OnceLock::new(),
            declared: outer.declared,
            stated: OnceLock::new(),
        })
    }

    pub fn viewer(&self) -> Viewer<'_> {
        self.caller.viewer()
    }

    /// What the caller sees of the snapshot's catalog: only what their policy at their
    /// endpoint shows, with their own lists of per-user upstreams.
    pub fn view(&self) -> &Arc<Catalog> {
        self.view
            .get_or_init(|| self.live.view(self.viewer(), self.declared()))
    }

    /// The id, as the client wrote it.
    pub fn id(&self) -> &str {
        self.message.id()
    }

    pub fn method(&self) -> &str {
        self.message.method()
    }
}
