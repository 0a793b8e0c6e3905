//! What one principal may ask at once: a token bucket for their request rate and a cap on
//! their requests being answered. Beyond either, a request gets 429 with `Retry-After` and is
//! not served. Without those limits configured, nothing is counted.

use std::{
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::Duration,
};

use axum::body::Body;
use bytes::Bytes;
use http::{Response, StatusCode};

use super::reply::{self, RefusalResponse};
use crate::{
    config::Limits,
    principal::Principal,
    quota::{Ask, Exceeded, Granted, Quotas},
};

pub struct Limiter {
    limits: Limits,
    quotas: Arc<Quotas>,
}

/// A request counted against its principal's concurrency until dropped.
pub type Held = Granted;

impl Limiter {
    /// `limits`, counted by `quotas` (shared by the replicas when the store is).
    pub fn new(limits: Limits, quotas: Arc<Quotas>) -> Self {
        Self { limits, quotas }
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Admits a request of `principal`, or the 429 refusing it. `held` requests count against
    /// the principal's concurrency until what is returned is dropped.
    pub async fn admit(&self, principal: &Principal, held: bool) -> Result<Held, RefusalResponse> {
        let ask = Ask::of_limits(&self.limits, principal, held);
        self.quotas
            .take(ask)
            .await
            .map_err(|exceeded| Box::new(self.refusal(&exceeded)))
    }

    fn refusal(&self, exceeded: &Exceeded) -> Response<Body> {
        let message = match (exceeded.limit, &self.limits) {
            (
                "rate",
                Limits {
                    rate_per_principal: Some(rate),
                    ..
                },
            ) => format!(
                "Too Many Requests: more than {} requests a second for this user",
                rate.per_second
            ),
            (
                "concurrent",
                Limits {
                    max_concurrent_per_principal: Some(max),
                    ..
                },
            ) => format!("Too Many Requests: this user has {max} requests being answered already"),
            _ => format!("Too Many Requests: beyond {}", exceeded.quota),
        };
        too_many(&message, exceeded.retry_after)
    }
}

/// 429 with `Retry-After` (whole seconds, at least one) and a JSON-RPC error body.
pub fn too_many(message: &str, retry_after: Duration) -> Response<Body> {
    reply::refusal_retry(StatusCode::TOO_MANY_REQUESTS, message, retry_after)
}

/// Keeps `held` until `response`'s body has been sent (or dropped): a streamed answer counts
/// as long as it streams.
pub fn hold_until_sent(response: Response<Body>, held: Held) -> Response<Body> {
    if !held.holds() {
        return response;
    }
    response.map(|body| Body::new(HeldBody { body, _held: held }))
}

struct HeldBody {
    body: Body,
    _held: Held,
}

impl http_body::Body for HeldBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}
