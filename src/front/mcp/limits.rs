//! What one principal may ask at once: a token bucket for their request rate and a cap on
//! their requests being answered. Beyond either, a request gets 429 with `Retry-After` and is
//! not served. Without those limits configured, nothing is counted.

use std::{
    pin::Pin,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU32, Ordering},
    },
    task::{Context, Poll},
    time::{Duration, Instant},
};

use axum::body::Body;
use bytes::Bytes;
use dashmap::DashMap;
use http::{Response, StatusCode};

use super::reply::{self, RefusalResponse};
use crate::{config::Limits, principal::Principal};

pub struct Limiter {
    limits: Limits,
    usage: DashMap<Principal, Arc<Usage>>,
}

/// One principal's use of the gateway.
struct Usage {
    bucket: Mutex<Bucket>,
    in_flight: AtomicU32,
}

struct Bucket {
    tokens: f64,
    at: Instant,
}

/// A request counted against its principal's concurrency until dropped.
pub struct Held(Option<Arc<Usage>>);

impl Drop for Held {
    fn drop(&mut self) {
        if let Some(usage) = &self.0 {
            usage.in_flight.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

impl Limiter {
    pub fn new(limits: Limits) -> Self {
        Self {
            limits,
            usage: DashMap::new(),
        }
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Admits a request of `principal`, or the 429 refusing it. `held` requests count against
    /// the principal's concurrency until what is returned is dropped.
    pub fn admit(&self, principal: &Principal, held: bool) -> Result<Held, RefusalResponse> {
        let limits = &self.limits;
        if limits.rate_per_principal.is_none() && limits.max_concurrent_per_principal.is_none() {
            return Ok(Held(None));
        }
        let usage = match self.usage.get(principal) {
            Some(usage) => usage.clone(),
            None => self
                .usage
                .entry(principal.clone())
                .or_insert_with(|| {
                    Arc::new(Usage {
                        bucket: Mutex::new(Bucket {
                            tokens: limits
                                .rate_per_principal
                                .map_or(0.0, |r| f64::from(r.burst)),
                            at: Instant::now(),
                        }),
                        in_flight: AtomicU32::new(0),
                    })
                })
                .clone(),
        };
        if let Some(rate) = limits.rate_per_principal {
            let mut bucket = usage.bucket.lock().unwrap_or_else(|p| p.into_inner());
            let now = Instant::now();
            let refill = now.duration_since(bucket.at).as_secs_f64() * rate.per_second;
            bucket.tokens = (bucket.tokens + refill).min(f64::from(rate.burst));
            bucket.at = now;
            if bucket.tokens < 1.0 {
                let wait = Duration::from_secs_f64((1.0 - bucket.tokens) / rate.per_second);
                return Err(Box::new(too_many(
                    &format!(
                        "Too Many Requests: more than {} requests a second for this user",
                        rate.per_second
                    ),
                    wait,
                )));
            }
            bucket.tokens -= 1.0;
        }
        if !held {
            return Ok(Held(None));
        }
        if let Some(max) = limits.max_concurrent_per_principal {
            let before = usage.in_flight.fetch_add(1, Ordering::AcqRel);
            if before >= max {
                usage.in_flight.fetch_sub(1, Ordering::AcqRel);
                return Err(Box::new(too_many(
                    &format!(
                        "Too Many Requests: this user has {max} requests being answered already"
                    ),
                    Duration::from_secs(1),
                )));
            }
            return Ok(Held(Some(usage)));
        }
        Ok(Held(None))
    }
}

/// 429 with `Retry-After` (whole seconds, at least one) and a JSON-RPC error body.
pub fn too_many(message: &str, retry_after: Duration) -> Response<Body> {
    reply::refusal_retry(StatusCode::TOO_MANY_REQUESTS, message, retry_after)
}

/// Keeps `held` until `response`'s body has been sent (or dropped): a streamed answer counts
/// as long as it streams.
pub fn hold_until_sent(response: Response<Body>, held: Held) -> Response<Body> {
    if held.0.is_none() {
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
