//! The per-request hook: what Switchyard adds to every HTTP request it sends upstream.
//!
//! Each upstream connection owns one hook, chosen when the connection is opened (so it can be
//! specific to the downstream session and its user). The hook runs on every POST, GET and DELETE
//! and sees the JSON-RPC message being sent, including its non-serialized extensions, so
//! per-request data set by the router reaches it. It is async so that it can refresh a token;
//! and it hears of requests the upstream refused (401, 403), so that it can renew the token
//! and have the request sent once more.

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

    /// Whether `rejected` may now ask for a request to be sent again (the transport then keeps
    /// a copy of the request until it is answered).
    fn retries(&self) -> bool {
        false
    }

    /// The upstream refused a request prepared with `sent` (`status` 401 or 403, with its
    /// `WWW-Authenticate`). True to send the request once more, prepared anew. (Requests sent
    /// while `retries` was false are reported with empty `sent` headers, and not retried.)
    fn rejected<'a>(
        &'a self,
        status: u16,
        www_authenticate: Option<&'a str>,
        sent: &'a RequestHeaders,
    ) -> BoxFuture<'a, bool> {
        let _ = (status, www_authenticate, sent);
        Box::pin(std::future::ready(false))
    }
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

    /// Puts the configured headers into `headers`.
    pub fn apply(&self, headers: &mut RequestHeaders) {
        for (name, value) in &self.headers {
            headers.insert(name.clone(), value.clone());
        }
    }
}

impl RequestHook for StaticHeaders {
    fn prepare<'a>(
        &'a self,
        _message: Option<&'a ClientJsonRpcMessage>,
        headers: &'a mut RequestHeaders,
    ) -> BoxFuture<'a, Result<(), HookError>> {
        self.apply(headers);
        Box::pin(std::future::ready(Ok(())))
    }
}
