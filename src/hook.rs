//! The per-request hook: what Switchyard adds to every HTTP request it sends upstream.
//!
//! Each upstream connection owns one hook, chosen when the connection is opened (so it can be
//! specific to the downstream session and its user). It runs on every POST, GET and DELETE. It
//! is ready at once in the common case (configured headers, a current token) and async only
//! when a token must be renewed first; and it hears of requests the upstream refused (401,
//! 403), so that it can renew the token and have the request sent once more.

use std::sync::Arc;

use futures::future::BoxFuture;
use http::{HeaderMap, HeaderName, HeaderValue};

/// Headers for one upstream HTTP request, filled in by the hook.
pub type RequestHeaders = HeaderMap;

/// Why a hook could not prepare a request; the request is not sent.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct HookError(pub String);

/// A hook's preparation of one request: done, or to be awaited.
pub enum Prepared<'a> {
    Ready(Result<(), HookError>),
    Later(BoxFuture<'a, Result<(), HookError>>),
}

impl Prepared<'_> {
    pub async fn done(self) -> Result<(), HookError> {
        match self {
            Prepared::Ready(result) => result,
            Prepared::Later(future) => future.await,
        }
    }
}

/// Adds headers (or refuses) for each HTTP request to an upstream.
pub trait RequestHook: Send + Sync + 'static {
    /// Called before every request: puts its headers into `headers`.
    fn prepare<'a>(&'a self, headers: &'a mut RequestHeaders) -> Prepared<'a>;

    /// Whether `rejected` may now ask for a request to be sent again (the transport then keeps
    /// a copy of the headers sent until it is answered).
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
    fn prepare<'a>(&'a self, headers: &'a mut RequestHeaders) -> Prepared<'a> {
        self.apply(headers);
        Prepared::Ready(Ok(()))
    }
}
