//! Checking `[limits]`: what one client may ask of the gateway, so that no user (or bug) can
//! take it over: JSON nesting, requests in flight per session, sessions, request rate and
//! concurrency per principal.
//!
//! Where users authenticate (`[auth]`), each has by default at most `DEFAULT_SESSIONS`
//! sessions and `DEFAULT_RATE` requests a second (bursts of `DEFAULT_BURST`); `0` lifts a
//! limit. Without `[auth]` every request is the one anonymous user, on loopback: the operator,
//! whom no default limits.

use schemars::JsonSchema;
use serde::Deserialize;

use super::keys::Checker;

const DEFAULT_JSON_DEPTH: u32 = 64;
const DEFAULT_IN_FLIGHT_PER_SESSION: u32 = 128;
/// Sessions per principal, where users authenticate: far more than a person's clients open.
pub const DEFAULT_SESSIONS: u32 = 64;
/// Requests a second per principal, where users authenticate, and the burst above it.
pub const DEFAULT_RATE: f64 = 100.0;
pub const DEFAULT_BURST: u32 = 200;
/// How long a 2026-07-28 client has to retry a call with its answers (seconds).
const DEFAULT_INPUT_WAIT: u32 = 300;

/// `[limits]` as written. Beyond a limit a request gets HTTP 429 (a body nested too deeply:
/// 400). "Per principal" counts per user; without `[auth]` all clients are one user.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[schemars(rename = "Limits")]
pub struct RawLimits {
    /// Deepest nesting of arrays and objects in a request body. Levels.
    #[schemars(range(min = 1, max = 1000), extend("default" = DEFAULT_JSON_DEPTH))]
    pub max_json_depth: Option<u32>,
    /// Requests of one session being answered at once. Requests.
    #[schemars(range(min = 1), extend("default" = DEFAULT_IN_FLIGHT_PER_SESSION))]
    pub max_requests_in_flight_per_session: Option<u32>,
    /// Sessions one user may hold. Default: 64 where users authenticate (`[auth]`), else no
    /// limit; 0: no limit.
    pub max_sessions_per_principal: Option<u32>,
    /// Requests of one user being answered at once. Default and 0: no limit.
    pub max_concurrent_requests_per_principal: Option<u32>,
    /// Requests a second one user may send (a token bucket). Default: 100 where users
    /// authenticate, else no limit; 0: no limit.
    #[schemars(range(min = 0.0))]
    pub requests_per_second_per_principal: Option<f64>,
    /// Requests one user may send at once above the rate. Default: 200 with the default rate,
    /// else one second's worth.
    #[schemars(range(min = 1))]
    pub burst_per_principal: Option<u32>,
    /// How long a 2026-07-28 client has to retry a call with the answers it was asked for
    /// (`input_required`) when an upstream of an earlier era asks during the call. Seconds.
    #[schemars(range(min = 1, max = 3600), extend("default" = DEFAULT_INPUT_WAIT))]
    pub input_wait_seconds: Option<u32>,
}

/// What one client may ask; `None`: unlimited.
#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    /// Deepest nesting of arrays and objects in a request body.
    pub max_json_depth: u32,
    /// Requests of one session being answered at once (each on its own stream).
    pub max_in_flight_per_session: u32,
    pub max_sessions_per_principal: Option<u32>,
    pub max_concurrent_per_principal: Option<u32>,
    /// A token bucket per principal: `rate` requests a second, up to `burst` at once.
    pub rate_per_principal: Option<Rate>,
    /// How long a call of a 2026-07-28 client waits, after it was answered `input_required`,
    /// for the client to retry it with its answers (the upstream waits that long for them).
    pub input_wait: std::time::Duration,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    pub per_second: f64,
    pub burst: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_json_depth: DEFAULT_JSON_DEPTH,
            max_in_flight_per_session: DEFAULT_IN_FLIGHT_PER_SESSION,
            max_sessions_per_principal: None,
            max_concurrent_per_principal: None,
            rate_per_principal: None,
            input_wait: std::time::Duration::from_secs(DEFAULT_INPUT_WAIT.into()),
        }
    }
}

impl Limits {
    /// What applies where users authenticate and `[limits]` says nothing of these.
    fn for_users() -> Self {
        Self {
            max_sessions_per_principal: Some(DEFAULT_SESSIONS),
            rate_per_principal: Some(Rate {
                per_second: DEFAULT_RATE,
                burst: DEFAULT_BURST,
            }),
            ..Self::default()
        }
    }
}

/// A per-principal cap as written: unset (the default applies), `0` (no limit), or a limit.
fn cap(value: Option<u32>, default: Option<u32>) -> Option<u32> {
    match value {
        None => default,
        Some(0) => None,
        limit => limit,
    }
}

impl Checker<'_> {
    /// `[limits]`; `users` says whether users authenticate (then the defaults limit each).
    pub(super) fn limits(&mut self, raw: Option<&RawLimits>, users: bool) -> Limits {
        let defaults = if users {
            Limits::for_users()
        } else {
            Limits::default()
        };
        let Some(raw) = raw else {
            return defaults;
        };
        let mut positive = |key: &str, value: Option<u32>| -> Option<u32> {
            match value {
                Some(0) => {
                    self.problem(format!("limits.{key}"), "must be at least 1");
                    None
                }
                other => other,
            }
        };
        let max_json_depth = positive("max_json_depth", raw.max_json_depth);
        let in_flight = positive(
            "max_requests_in_flight_per_session",
            raw.max_requests_in_flight_per_session,
        );
        let burst = positive("burst_per_principal", raw.burst_per_principal);
        let input_wait = positive("input_wait_seconds", raw.input_wait_seconds);
        let sessions = cap(
            raw.max_sessions_per_principal,
            defaults.max_sessions_per_principal,
        );
        let concurrent = cap(raw.max_concurrent_requests_per_principal, None);
        let rate = match raw.requests_per_second_per_principal {
            None if burst.is_some() && defaults.rate_per_principal.is_none() => {
                self.problem(
                    "limits.burst_per_principal",
                    "needs requests_per_second_per_principal",
                );
                None
            }
            None => defaults.rate_per_principal.map(|rate| Rate {
                burst: burst.unwrap_or(rate.burst),
                ..rate
            }),
            Some(0.0) => None,
            Some(rate) if rate.is_finite() && rate > 0.0 => Some(Rate {
                per_second: rate,
                burst: burst.unwrap_or_else(|| rate.ceil().max(1.0) as u32),
            }),
            Some(rate) => {
                self.problem(
                    "limits.requests_per_second_per_principal",
                    format!("must be a positive number (or 0 for no limit), not {rate}"),
                );
                None
            }
        };
        if max_json_depth.is_some_and(|depth| depth > 1000) {
            self.problem("limits.max_json_depth", "must be at most 1000");
        }
        if input_wait.is_some_and(|seconds| seconds > 3600) {
            self.problem("limits.input_wait_seconds", "must be at most 3600");
        }
        Limits {
            max_json_depth: max_json_depth.unwrap_or(DEFAULT_JSON_DEPTH),
            max_in_flight_per_session: in_flight.unwrap_or(DEFAULT_IN_FLIGHT_PER_SESSION),
            max_sessions_per_principal: sessions,
            max_concurrent_per_principal: concurrent,
            rate_per_principal: rate,
            input_wait: std::time::Duration::from_secs(
                input_wait.unwrap_or(DEFAULT_INPUT_WAIT).into(),
            ),
        }
    }
}
