//! One client request as the layers below the front see it: who makes it and at which
//! endpoint, the protocol era it speaks, its message read once (envelope, params, `_meta`),
//! the client's headers, and the snapshot of the gateway it is answered from. The front builds
//! it; `session` and `router` take it as an argument, so everything a request decides (its
//! routes, its lists, the upstream it goes to) comes from one snapshot and one reading.

use std::sync::{Arc, OnceLock};

use crate::{
    catalog::Catalog,
    gateway::Live,
    policy::{EndpointName, Viewer},
    principal::Principal,
    protocol::Era,
    wire::ParsedRequest,
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
    /// What the caller sees of `live`'s catalog, found on first use.
    view: OnceLock<Arc<Catalog>>,
}

impl Request {
    pub fn new(
        live: Arc<Live>,
        caller: Caller,
        era: Era,
        message: ParsedRequest,
        headers: http::HeaderMap,
    ) -> Self {
        Self {
            live,
            caller,
            era,
            message,
            headers,
            view: OnceLock::new(),
        }
    }

    pub fn viewer(&self) -> Viewer<'_> {
        self.caller.viewer()
    }

    /// What the caller sees of the snapshot's catalog: only what their policy at their
    /// endpoint shows, with their own lists of per-user upstreams.
    pub fn view(&self) -> &Arc<Catalog> {
        self.view.get_or_init(|| self.live.view(self.viewer()))
    }

    /// The id, as the client wrote it.
    pub fn id(&self) -> &str {
        self.message.id()
    }

    pub fn method(&self) -> &str {
        self.message.method()
    }
}
