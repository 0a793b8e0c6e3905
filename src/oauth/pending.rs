//! Authorizations in progress, by their `state`: each is bound to the upstream and principal it
//! is for and to its PKCE verifier, is used at most once, and expires after its lifetime
//! (`authorization_lifetime_seconds`, ten minutes by default).

use std::{
    collections::HashMap,
    sync::Mutex,
    time::{Duration, Instant},
};

use super::token::{ClientIdentity, TokenEndpoint};
use crate::{names::UpstreamName, principal::Principal};

/// How long an expired or superseded authorization is remembered after its lifetime.
const TOMBSTONE: Duration = Duration::from_secs(10 * 60);

/// What the callback of one authorization needs.
pub struct PendingAuthorization {
    pub upstream: UpstreamName,
    pub principal: Principal,
    pub verifier: String,
    pub redirect_uri: String,
    pub scopes: Vec<String>,
    pub endpoint: TokenEndpoint,
    pub client: ClientIdentity,
    /// The issuer the authorization server's metadata names, which an `iss` in the callback
    /// must equal (RFC 9207).
    pub issuer: Option<String>,
    /// The server said it sends `iss`: a callback without one is refused.
    pub require_iss: bool,
    pub created: Instant,
    /// A newer authorization for the same upstream and principal replaced this one.
    pub superseded: bool,
}

/// Why a callback's `state` matched nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unmatched {
    /// Never issued, or already used.
    Unknown,
    Expired,
    /// A newer authorization replaced it.
    Superseded,
}

pub struct Pending {
    entries: Mutex<HashMap<String, PendingAuthorization>>,
    lifetime: Duration,
}

impl Pending {
    pub fn with_lifetime(lifetime: Duration) -> Self {
        Self {
            entries: Mutex::default(),
            lifetime,
        }
    }

    pub fn insert(&self, state: String, pending: PendingAuthorization) {
        // Expired entries are kept a while, to tell a late user why their link no longer works.
        let kept = self.lifetime + TOMBSTONE;
        let mut entries = self.lock();
        entries.retain(|_, p| p.created.elapsed() < kept);
        // A new authorization for the same user and upstream supersedes the old one.
        for old in entries.values_mut() {
            if old.upstream == pending.upstream && old.principal == pending.principal {
                old.superseded = true;
            }
        }
        entries.insert(state, pending);
    }

    /// Takes the authorization `state` names: at most once, only within its lifetime, and only
    /// if no newer one replaced it.
    pub fn take(&self, state: &str) -> Result<PendingAuthorization, Unmatched> {
        let pending = self.lock().remove(state).ok_or(Unmatched::Unknown)?;
        if pending.created.elapsed() >= self.lifetime {
            return Err(Unmatched::Expired);
        }
        if pending.superseded {
            return Err(Unmatched::Superseded);
        }
        Ok(pending)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, PendingAuthorization>> {
        self.entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oauth::token::samples;

    fn pending(upstream: &str) -> PendingAuthorization {
        PendingAuthorization {
            upstream: UpstreamName::new(upstream).unwrap(),
            principal: Principal::anonymous(),
            verifier: "v".into(),
            redirect_uri: "http://127.0.0.1/oauth/callback".into(),
            scopes: Vec::new(),
            endpoint: samples::endpoint(),
            client: samples::client(),
            issuer: None,
            require_iss: false,
            created: Instant::now(),
            superseded: false,
        }
    }

    #[test]
    fn a_state_is_used_once() {
        let pending_set = Pending::with_lifetime(Duration::from_secs(600));
        pending_set.insert("s1".into(), pending("a"));
        assert!(pending_set.take("s1").is_ok());
        assert_eq!(pending_set.take("s1").err(), Some(Unmatched::Unknown));
        assert_eq!(pending_set.take("never").err(), Some(Unmatched::Unknown));
    }

    #[test]
    fn a_state_expires() {
        let pending_set = Pending::with_lifetime(Duration::ZERO);
        pending_set.insert("s1".into(), pending("a"));
        assert_eq!(pending_set.take("s1").err(), Some(Unmatched::Expired));
    }

    #[test]
    fn a_new_authorization_supersedes_the_old_one() {
        let pending_set = Pending::with_lifetime(Duration::from_secs(600));
        pending_set.insert("old".into(), pending("a"));
        pending_set.insert("other".into(), pending("b"));
        pending_set.insert("new".into(), pending("a"));
        assert_eq!(pending_set.take("old").err(), Some(Unmatched::Superseded));
        assert!(pending_set.take("other").is_ok());
        assert!(pending_set.take("new").is_ok());
    }
}
