//! One (upstream, principal)'s authorization: its tokens, or what stands in the way of having
//! them (a user must authorize, at this link; or authorization failed, for this reason).
//!
//! Reading the token is lock-free (`ArcSwapOption`); refreshing is serialized per grant, and a
//! waiter that finds the token already replaced uses the new one, so a burst of requests makes
//! one refresh. Every change bumps a version that supervisors wait on. A grant is in sync with
//! the vault once its tokens were read from it; it falls out of sync where changes may have
//! been missed (the announcements of other replicas were not heard for a while).

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::SystemTime,
};

use arc_swap::ArcSwapOption;
use tokio::sync::watch;

use super::{challenge::Challenge, token::TokenSet};
use crate::principal::Principal;

/// A link a user follows to authorize Switchyard. Its `Debug` leaves the `state` out.
#[derive(Clone)]
pub struct Link {
    /// The gateway's connect URL (`/oauth/connect/…`), which checks who follows it before
    /// sending them on to the authorization server.
    pub url: String,
    /// The authorization's `state` (never shown: the connect URL holds it sealed).
    pub state: String,
    pub created: SystemTime,
    pub expires: SystemTime,
    /// Names the URL-mode elicitation that carries this link to an MCP client.
    pub elicitation_id: String,
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Link")
            .field("url", &self.url)
            .field("expires", &self.expires)
            .finish_non_exhaustive()
    }
}

impl Link {
    pub fn is_live(&self) -> bool {
        SystemTime::now() < self.expires
    }
}

/// What the grant lacks.
#[derive(Debug, Clone, Default)]
pub enum Need {
    /// Nothing: it has a token, or has not been asked for one yet.
    #[default]
    Nothing,
    /// A user must authorize: with the upstream's last challenge, the scopes a step-up needs,
    /// and the link once one is made.
    Authorization {
        challenge: Option<Challenge>,
        scopes: Option<Vec<String>>,
        link: Option<Link>,
    },
    /// Authorization failed; why, as it was (it may come from a server and hold anything:
    /// escaped once, where it is shown).
    Failed(String),
}

pub struct Grant {
    pub principal: Principal,
    token: ArcSwapOption<TokenSet>,
    /// Held while refreshing or acquiring a token.
    pub(super) renewing: tokio::sync::Mutex<()>,
    /// Held while making an authorization link.
    pub(super) linking: tokio::sync::Mutex<()>,
    need: Mutex<Need>,
    version: watch::Sender<u64>,
    /// Whether `token` is what the vault held when last read (or written by this grant).
    synced: AtomicBool,
    /// Held while reading the vault's tokens for it.
    pub(super) syncing: tokio::sync::Mutex<()>,
}

impl Grant {
    /// A grant holding `token`, in sync with the vault.
    pub fn new(principal: Principal, token: Option<TokenSet>) -> Self {
        let grant = Self::unsynced(principal);
        grant.token.store(token.map(Arc::new));
        grant.synced.store(true, Ordering::Relaxed);
        grant
    }

    /// A grant whose tokens are yet to be read from the vault.
    pub fn unsynced(principal: Principal) -> Self {
        Self {
            principal,
            token: ArcSwapOption::empty(),
            renewing: tokio::sync::Mutex::new(()),
            linking: tokio::sync::Mutex::new(()),
            need: Mutex::new(Need::Nothing),
            version: watch::Sender::new(0),
            synced: AtomicBool::new(false),
            syncing: tokio::sync::Mutex::new(()),
        }
    }

    pub fn is_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    /// Its tokens may differ from the vault's: read them again before the next use.
    pub(super) fn unsync(&self) {
        self.synced.store(false, Ordering::Release);
    }

    /// Takes what the vault holds (read just now); true if that changed the token. New
    /// tokens meet whatever was needed; none where there were some means they were dropped.
    pub(super) fn adopt(&self, stored: Option<TokenSet>) -> bool {
        self.synced.store(true, Ordering::Release);
        let current = self.token();
        let same = match (&current, &stored) {
            (Some(current), Some(stored)) => current.access_token == stored.access_token,
            (None, None) => true,
            _ => false,
        };
        if same {
            return false;
        }
        match stored {
            Some(token) => self.set_token(token),
            None => self.clear_token(),
        }
        true
    }

    pub fn token(&self) -> Option<Arc<TokenSet>> {
        self.token.load_full()
    }

    pub fn need(&self) -> Need {
        self.lock().clone()
    }

    /// A receiver that sees every change of this grant.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.version.subscribe()
    }

    /// New tokens: whatever was needed is met.
    pub(super) fn set_token(&self, token: TokenSet) {
        self.token.store(Some(Arc::new(token)));
        *self.lock() = Need::Nothing;
        self.bump();
    }

    pub(super) fn clear_token(&self) {
        self.token.store(None);
        self.bump();
    }

    /// A user must authorize (again). An unexpired link for the same scopes is kept.
    pub(super) fn require_authorization(
        &self,
        challenge: Option<Challenge>,
        scopes: Option<Vec<String>>,
    ) {
        let mut need = self.lock();
        if let Need::Authorization {
            scopes: wanted,
            link: Some(link),
            ..
        } = &*need
            && *wanted == scopes
            && link.is_live()
        {
            return;
        }
        *need = Need::Authorization {
            challenge,
            scopes,
            link: None,
        };
        drop(need);
        self.bump();
    }

    /// Records the link made for the authorization this grant needs.
    pub(super) fn set_link(&self, link: Link) {
        if let Need::Authorization { link: slot, .. } = &mut *self.lock() {
            *slot = Some(link);
        }
        self.bump();
    }

    pub(super) fn fail(&self, reason: String) {
        *self.lock() = Need::Failed(reason);
        self.bump();
    }

    /// The failure is old news (a new attempt is starting).
    pub fn clear_failure(&self) {
        let mut need = self.lock();
        if matches!(*need, Need::Failed(_)) {
            *need = Need::Nothing;
        }
    }

    fn bump(&self) {
        self.version.send_modify(|v| *v += 1);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Need> {
        self.need
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
