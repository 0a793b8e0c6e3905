//! What the exchange of users' own tokens keeps: the JWT each user presented last (in memory
//! only), and, per upstream, the exchanging server's token endpoint and the users' tokens it
//! refused (see `exchange`).

use std::sync::Arc;

use dashmap::DashMap;

use super::token::TokenEndpoint;
use crate::principal::{Presented, Principal};

/// How long a user's token must still be good for to be exchanged, in seconds.
const SUBJECT_MARGIN: u64 = 5;

/// The JWT each user presented last, kept in memory (never stored, never shared) for the
/// upstreams that exchange it.
#[derive(Default)]
pub struct Subjects {
    latest: DashMap<Principal, Presented>,
}

impl Subjects {
    /// Keeps `principal`'s token if it is a JWT new to this gateway; whether it was new.
    pub fn present(&self, principal: &Principal) -> bool {
        let Some(presented) = principal.identity().and_then(|i| i.presented.as_ref()) else {
            return false;
        };
        if self
            .latest
            .get(principal)
            .is_some_and(|known| *known == *presented)
        {
            return false;
        }
        self.latest.insert(principal.clone(), presented.clone());
        if self.latest.len().is_multiple_of(1024) {
            self.latest.retain(|_, token| lasts(token, 0));
        }
        true
    }

    /// `principal`'s token, while it lasts.
    pub fn of(&self, principal: &Principal) -> Option<Presented> {
        self.latest
            .get(principal)
            .filter(|token| lasts(token, SUBJECT_MARGIN))
            .map(|token| token.clone())
    }
}

/// Whether `token` is still good for `margin` seconds.
fn lasts(token: &Presented, margin: u64) -> bool {
    token
        .expires_at
        .is_none_or(|at| crate::clock::now_seconds() + margin < at)
}

/// What one upstream's token exchange learned: the server's token endpoint, and the users'
/// tokens it refused.
#[derive(Default)]
pub struct ExchangeState {
    pub(super) endpoint: tokio::sync::Mutex<Option<Arc<TokenEndpoint>>>,
    pub(super) refused: DashMap<Principal, Presented>,
}

impl ExchangeState {
    /// Whether the server refused to exchange the token `principal` presented last.
    pub(super) fn refused(&self, principal: &Principal) -> bool {
        self.refused.contains_key(principal)
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::principal::Identity;

    /// The JWT user `name`, who presented `token`.
    pub(in crate::oauth) fn user(name: &str, token: &str, expires_at: Option<u64>) -> Principal {
        Principal::authenticated(
            &format!("jwt:{name}"),
            Identity {
                subject: name.into(),
                presented: Some(Presented::new(token, expires_at)),
                ..Identity::default()
            },
        )
    }

    #[test]
    fn each_user_has_their_latest_unexpired_token_and_api_keys_have_none() {
        let subjects = Subjects::default();
        let later = crate::clock::now_seconds() + 600;
        assert!(subjects.present(&user("alice", "a1", Some(later))));
        assert!(!subjects.present(&user("alice", "a1", Some(later))), "seen");
        assert!(subjects.present(&user("bob", "b1", None)));
        assert!(subjects.present(&user("alice", "a2", Some(later))));
        assert_eq!(
            subjects.of(&Principal::user("jwt:alice")).unwrap().reveal(),
            "a2"
        );
        assert_eq!(
            subjects.of(&Principal::user("jwt:bob")).unwrap().reveal(),
            "b1"
        );
        let soon = crate::clock::now_seconds() + 2;
        assert!(subjects.present(&user("carol", "c1", Some(soon))));
        assert!(
            subjects.of(&Principal::user("jwt:carol")).is_none(),
            "about to expire"
        );
        let key_user = Principal::authenticated("key:dave", Identity::default());
        assert!(!subjects.present(&key_user));
        assert!(subjects.of(&key_user).is_none());
        assert!(subjects.of(&Principal::anonymous()).is_none());
    }
}
