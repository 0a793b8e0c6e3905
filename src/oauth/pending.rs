//! Authorizations in progress, by their `state`: each is bound to the upstream and principal it
//! is for and to its PKCE verifier, is used at most once, and expires after ten minutes.

use std::{
    collections::HashMap,
    sync::Mutex,
    time::{Duration, Instant},
};

use super::token::{ClientIdentity, TokenEndpoint};
use crate::{names::UpstreamName, principal::Principal};

/// How long a user has to complete an authorization.
pub const LIFETIME: Duration = Duration::from_secs(10 * 60);

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
}

/// Why a callback's `state` matched nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unmatched {
    /// Never issued, or already used.
    Unknown,
    Expired,
}

pub struct Pending {
    entries: Mutex<HashMap<String, PendingAuthorization>>,
    lifetime: Duration,
}

impl Default for Pending {
    fn default() -> Self {
        Self::with_lifetime(LIFETIME)
    }
}

impl Pending {
    pub fn with_lifetime(lifetime: Duration) -> Self {
        Self {
            entries: Mutex::default(),
            lifetime,
        }
    }

    pub fn insert(&self, state: String, pending: PendingAuthorization) {
        let lifetime = self.lifetime;
        let mut entries = self.lock();
        entries.retain(|_, p| p.created.elapsed() < lifetime);
        // A new authorization for the same user and upstream supersedes the old one.
        entries
            .retain(|_, p| !(p.upstream == pending.upstream && p.principal == pending.principal));
        entries.insert(state, pending);
    }

    /// Takes the authorization `state` names: at most once, and only within its lifetime.
    pub fn take(&self, state: &str) -> Result<PendingAuthorization, Unmatched> {
        let pending = self.lock().remove(state).ok_or(Unmatched::Unknown)?;
        if pending.created.elapsed() >= self.lifetime {
            return Err(Unmatched::Expired);
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
    use crate::config::AuthMethod;

    fn pending(upstream: &str) -> PendingAuthorization {
        PendingAuthorization {
            upstream: UpstreamName::new(upstream).unwrap(),
            principal: Principal::anonymous(),
            verifier: "v".into(),
            redirect_uri: "http://127.0.0.1/oauth/callback".into(),
            scopes: Vec::new(),
            endpoint: TokenEndpoint {
                url: "https://as/token".into(),
                issuer: "https://as".into(),
                resource: None,
                revocation: None,
            },
            client: ClientIdentity {
                client_id: "c".into(),
                client_secret: None,
                auth_method: AuthMethod::None,
            },
            issuer: None,
            require_iss: false,
            created: Instant::now(),
        }
    }

    #[test]
    fn a_state_is_used_once() {
        let pending_set = Pending::default();
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
        let pending_set = Pending::default();
        pending_set.insert("old".into(), pending("a"));
        pending_set.insert("other".into(), pending("b"));
        pending_set.insert("new".into(), pending("a"));
        assert_eq!(pending_set.take("old").err(), Some(Unmatched::Unknown));
        assert!(pending_set.take("other").is_ok());
        assert!(pending_set.take("new").is_ok());
    }
}
