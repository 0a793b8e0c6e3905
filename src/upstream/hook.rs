//! The per-request hook: what Switchyard adds to every HTTP request it sends upstream.
//!
//! Each upstream connection owns one hook, chosen when the connection is opened (so it can be
//! specific to the downstream session and its user). The hook runs on every POST, GET and DELETE
//! and sees the JSON-RPC message being sent, including its non-serialized extensions, so
//! per-request data set by the router reaches it. It is async so a later hook can refresh a token.

use std::{collections::HashMap, sync::Arc};

use futures::future::BoxFuture;
use http::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;

/// Headers for one upstream HTTP request, filled in by the hook.
pub type RequestHeaders = HashMap<HeaderName, HeaderValue>;

/// Why a hook could not prepare a request; the request is not sent.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct HookError(pub String);

/// Adds headers (or refuses) for each HTTP request to an upstream.
pub trait RequestHook: Send + Sync + 'static {
    /// Called before every request; `message` is `None` for GET and DELETE.
    fn prepare<'a>(
        &'a self,
        message: Option<&'a ClientJsonRpcMessage>,
        headers: &'a mut RequestHeaders,
    ) -> BoxFuture<'a, Result<(), HookError>>;
}

/// The configured static headers of an upstream (`headers = { … }`), already expanded.
#[derive(Debug, Default)]
pub struct StaticHeaders {
    headers: Vec<(HeaderName, HeaderValue)>,
}

impl StaticHeaders {
    pub fn new(headers: Vec<(HeaderName, HeaderValue)>) -> Arc<Self> {
        Arc::new(Self { headers })
    }
}

impl RequestHook for StaticHeaders {
    fn prepare<'a>(
        &'a self,
        _message: Option<&'a ClientJsonRpcMessage>,
        headers: &'a mut RequestHeaders,
    ) -> BoxFuture<'a, Result<(), HookError>> {
        for (name, value) in &self.headers {
            headers.insert(name.clone(), value.clone());
        }
        Box::pin(std::future::ready(Ok(())))
    }
}
