//! Authorizations in progress, by their `state`: each is bound to the upstream and principal it
//! is for and to its PKCE verifier, is used at most once, and expires after its lifetime
//! (`authorization_lifetime_seconds`, ten minutes by default). A newer authorization for the
//! same upstream and principal supersedes older ones. The authorization server's URL (which
//! carries the `state`) stays here: users are given the gateway's connect link, which sends a
//! browser there only once it proved to be the user's.
//!
//! One process keeps them in memory. Replicas keep them in the shared store (sealed), so that
//! the browser's return may land on any replica, along with the link users follow for each
//! (upstream, principal): a replica that needs the same authorization shows the link another
//! made rather than superseding it.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, SystemTime},
};

use serde::{Deserialize, Serialize};

use super::{
    grant::Link,
    token::{ClientIdentity, TokenEndpoint},
};
use crate::{names::UpstreamName, principal::Principal, store::Store};

/// How long an expired or superseded authorization is remembered after its lifetime.
const TOMBSTONE: Duration = Duration::from_secs(10 * 60);
const PENDING: &str = "oauth-pending";
const LINK: &str = "oauth-link";

/// What the callback of one authorization needs.
#[derive(Serialize, Deserialize)]
pub struct PendingAuthorization {
    #[serde(with = "as_text")]
    pub upstream: UpstreamName,
    #[serde(with = "as_text")]
    pub principal: Principal,
    pub verifier: String,
    /// Where the user's browser is sent to authorize (the authorization server's URL, with
    /// `state` and the PKCE challenge).
    pub authorize_url: String,
    pub redirect_uri: String,
    pub scopes: Vec<String>,
    pub endpoint: TokenEndpoint,
    pub client: ClientIdentity,
    /// The issuer the authorization server's metadata names, which an `iss` in the callback
    /// must equal (RFC 9207).
    pub issuer: Option<String>,
    /// The server said it sends `iss`: a callback without one is refused.
    pub require_iss: bool,
    pub created: SystemTime,
    /// A newer authorization for the same upstream and principal replaced this one.
    #[serde(skip)]
    pub superseded: bool,
}

impl PendingAuthorization {
    fn age(&self) -> Duration {
        self.created.elapsed().unwrap_or_default()
    }
}

/// Why a callback's `state` matched nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unmatched {
    /// Never issued, or already used.
    Unknown,
    Expired,
    /// A newer authorization replaced it.
    Superseded,
    /// The shared store could not be read.
    Unreadable,
}

impl Unmatched {
    /// Why, in words for the user who followed a link.
    pub fn reason(self) -> &'static str {
        match self {
            Unmatched::Unknown => {
                "this authorization is unknown or was already used; start it again"
            }
            Unmatched::Expired => "this authorization expired; start it again",
            Unmatched::Superseded => "a newer authorization replaced this one; use the newest link",
            Unmatched::Unreadable => {
                "the shared store cannot be read now; follow the link again in a moment"
            }
        }
    }
}

/// The link users follow for one (upstream, principal), as replicas share it.
#[derive(Serialize, Deserialize)]
struct SharedLink {
    state: String,
    url: String,
    created: SystemTime,
    expires: SystemTime,
    elicitation_id: String,
    scopes: Vec<String>,
}

impl SharedLink {
    fn link(self) -> Link {
        Link {
            url: self.url,
            state: self.state,
            created: self.created,
            expires: self.expires,
            elicitation_id: self.elicitation_id,
        }
    }
}

pub struct Pending {
    entries: Mutex<HashMap<String, PendingAuthorization>>,
    lifetime: Duration,
    /// Where replicas keep them, if they share a store.
    shared: Option<Arc<Store>>,
}

impl Pending {
    pub fn new(lifetime: Duration, shared: Option<Arc<Store>>) -> Self {
        Self {
            entries: Mutex::default(),
            lifetime,
            shared,
        }
    }

    /// Records `pending` under `state` with `link`, the link to it; gives the link users are
    /// to follow: with replicas, a live one another replica made for the same upstream,
    /// principal and scopes, if there is one (and then this one is dropped).
    pub async fn insert(&self, state: String, pending: PendingAuthorization, link: Link) -> Link {
        let Some(store) = &self.shared else {
            self.insert_here(state, pending);
            return link;
        };
        match self.insert_shared(store, &state, &pending, &link).await {
            Ok(Some(theirs)) => theirs,
            Ok(None) => link,
            Err(error) => {
                // The callback may come back here: keep it here too.
                tracing::warn!(%error, "cannot share a pending authorization; its callback must reach this replica");
                self.insert_here(state, pending);
                link
            }
        }
    }

    fn insert_here(&self, state: String, pending: PendingAuthorization) {
        // Expired entries are kept a while, to tell a late user why their link no longer works.
        let kept = self.lifetime + TOMBSTONE;
        let mut entries = self.lock();
        entries.retain(|_, p| p.age() < kept);
        for old in entries.values_mut() {
            if old.upstream == pending.upstream && old.principal == pending.principal {
                old.superseded = true;
            }
        }
        entries.insert(state, pending);
    }

    /// `insert` with replicas: the link record is written only if absent, unless the one there
    /// asks for other scopes (a step-up supersedes it).
    async fn insert_shared(
        &self,
        store: &Store,
        state: &str,
        pending: &PendingAuthorization,
        link: &Link,
    ) -> Result<Option<Link>, crate::store::StoreError> {
        let record = serde_json::to_vec(pending).expect("a pending authorization serializes");
        store
            .save_record(PENDING, state, &record, Some(self.lifetime + TOMBSTONE))
            .await?;
        let key = link_key(&pending.upstream, &pending.principal);
        let ours = serde_json::to_vec(&SharedLink {
            state: state.to_owned(),
            url: link.url.clone(),
            created: link.created,
            expires: link.expires,
            elicitation_id: link.elicitation_id.clone(),
            scopes: pending.scopes.clone(),
        })
        .expect("a link serializes");
        if store
            .save_record_if_absent(LINK, &key, &ours, Some(self.lifetime))
            .await?
        {
            return Ok(None);
        }
        if let Some(theirs) = self.shared_link(store, &key).await?
            && theirs.scopes == pending.scopes
            && SystemTime::now() < theirs.expires
        {
            store.delete_record(PENDING, state).await?;
            return Ok(Some(theirs.link()));
        }
        store
            .save_record(LINK, &key, &ours, Some(self.lifetime))
            .await?;
        Ok(None)
    }

    async fn shared_link(
        &self,
        store: &Store,
        key: &str,
    ) -> Result<Option<SharedLink>, crate::store::StoreError> {
        let Some(record) = store.load_record(LINK, key).await? else {
            return Ok(None);
        };
        serde_json::from_slice(&record).map(Some).map_err(|e| {
            crate::store::StoreError::Unreadable {
                kind: LINK,
                reason: e.to_string(),
            }
        })
    }

    /// What the authorization `state` names needs to be started in a browser (its upstream,
    /// principal and the authorization server's URL), without taking it: within its lifetime,
    /// and only if no newer one replaced it.
    pub async fn peek(&self, state: &str) -> Result<Started, Unmatched> {
        let here = self
            .lock()
            .get(state)
            .map(|pending| self.judged(pending).map(|()| Started::of(pending)));
        match (here, &self.shared) {
            (Some(judged), _) => judged,
            (None, None) => Err(Unmatched::Unknown),
            (None, Some(store)) => {
                let pending = self.fetch_shared(store, state, false).await?;
                self.judged(&pending)?;
                Ok(Started::of(&pending))
            }
        }
    }

    /// Takes the authorization `state` names: at most once (across replicas), only within its
    /// lifetime, and only if no newer one replaced it.
    pub async fn take(&self, state: &str) -> Result<PendingAuthorization, Unmatched> {
        let here = self.lock().remove(state);
        let pending = match (here, &self.shared) {
            (Some(pending), _) => pending,
            (None, None) => return Err(Unmatched::Unknown),
            (None, Some(store)) => self.fetch_shared(store, state, true).await?,
        };
        self.judged(&pending)?;
        Ok(pending)
    }

    /// Whether `pending` may still be completed: within its lifetime, and not replaced.
    fn judged(&self, pending: &PendingAuthorization) -> Result<(), Unmatched> {
        if pending.age() >= self.lifetime {
            return Err(Unmatched::Expired);
        }
        if pending.superseded {
            return Err(Unmatched::Superseded);
        }
        Ok(())
    }

    /// The authorization `state` names from the shared store, taken from it (at most once
    /// across replicas, its link with it) or only read; marked superseded if the link shown
    /// for its upstream and principal is another one's.
    async fn fetch_shared(
        &self,
        store: &Store,
        state: &str,
        take: bool,
    ) -> Result<PendingAuthorization, Unmatched> {
        let record = if take {
            store.take_record(PENDING, state).await
        } else {
            store.load_record(PENDING, state).await
        };
        let record = record
            .map_err(|e| unreadable(&e))?
            .ok_or(Unmatched::Unknown)?;
        let mut pending: PendingAuthorization =
            serde_json::from_slice(&record).map_err(|e| unreadable(&e))?;
        let key = link_key(&pending.upstream, &pending.principal);
        match self.shared_link(store, &key).await {
            Ok(Some(link)) if link.state != state => pending.superseded = true,
            Ok(Some(_)) if take => {
                // Used: a later need makes a new link.
                if let Err(error) = store.delete_record(LINK, &key).await {
                    tracing::warn!(%error, "cannot delete a used authorization link");
                }
            }
            Ok(_) => {}
            Err(error) => return Err(unreadable(&error)),
        }
        Ok(pending)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, PendingAuthorization>> {
        self.entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn unreadable(error: &dyn std::fmt::Display) -> Unmatched {
    tracing::warn!(%error, "cannot read a pending authorization from the shared store");
    Unmatched::Unreadable
}

/// What starting an authorization in a browser needs of it.
#[derive(Debug, Clone)]
pub struct Started {
    pub upstream: UpstreamName,
    pub principal: Principal,
    pub authorize_url: String,
}

impl Started {
    fn of(pending: &PendingAuthorization) -> Self {
        Self {
            upstream: pending.upstream.clone(),
            principal: pending.principal.clone(),
            authorize_url: pending.authorize_url.clone(),
        }
    }
}

fn link_key(upstream: &UpstreamName, principal: &Principal) -> String {
    format!("{upstream}\0{principal}")
}

/// Upstream names and principals as the text they are made from.
mod as_text {
    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    pub fn serialize<S: Serializer, T: std::fmt::Display>(
        value: &T,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.collect_str(value)
    }

    pub fn deserialize<'de, D: Deserializer<'de>, T: super::FromText>(
        deserializer: D,
    ) -> Result<T, D::Error> {
        let text = String::deserialize(deserializer)?;
        T::from_text(&text).ok_or_else(|| D::Error::custom(format!("`{text}` is not valid here")))
    }
}

trait FromText: Sized {
    fn from_text(text: &str) -> Option<Self>;
}

impl FromText for UpstreamName {
    fn from_text(text: &str) -> Option<Self> {
        UpstreamName::new(text).ok()
    }
}

impl FromText for Principal {
    fn from_text(text: &str) -> Option<Self> {
        Principal::parse(text)
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
            authorize_url: "https://as.example/authorize?state=s".into(),
            redirect_uri: "http://127.0.0.1/oauth/callback".into(),
            scopes: Vec::new(),
            endpoint: samples::endpoint(),
            client: samples::client(),
            issuer: None,
            require_iss: false,
            created: SystemTime::now(),
            superseded: false,
        }
    }

    async fn insert(set: &Pending, state: &str, upstream: &str) {
        let created = SystemTime::now();
        let link = Link {
            url: format!("https://as.example/authorize?state={state}"),
            state: state.into(),
            created,
            expires: created + set.lifetime,
            elicitation_id: state.into(),
        };
        let shown = set.insert(state.into(), pending(upstream), link).await;
        assert_eq!(
            shown.state, state,
            "without replicas, its own link is shown"
        );
    }

    #[tokio::test]
    async fn a_state_is_used_once() {
        let set = Pending::new(Duration::from_secs(600), None);
        insert(&set, "s1", "a").await;
        assert!(set.take("s1").await.is_ok());
        assert_eq!(set.take("s1").await.err(), Some(Unmatched::Unknown));
        assert_eq!(set.take("never").await.err(), Some(Unmatched::Unknown));
    }

    #[tokio::test]
    async fn a_peek_leaves_the_authorization_to_its_callback() {
        let set = Pending::new(Duration::from_secs(600), None);
        insert(&set, "s1", "a").await;
        let started = set.peek("s1").await.unwrap();
        assert_eq!(started.upstream.as_str(), "a");
        assert!(started.authorize_url.starts_with("https://as.example/"));
        assert!(set.peek("s1").await.is_ok());
        assert!(set.take("s1").await.is_ok());
        assert_eq!(set.peek("s1").await.err(), Some(Unmatched::Unknown));
        insert(&set, "old", "b").await;
        insert(&set, "new", "b").await;
        assert_eq!(set.peek("old").await.err(), Some(Unmatched::Superseded));
    }

    #[tokio::test]
    async fn a_state_expires() {
        let set = Pending::new(Duration::ZERO, None);
        insert(&set, "s1", "a").await;
        assert_eq!(set.take("s1").await.err(), Some(Unmatched::Expired));
    }

    #[tokio::test]
    async fn a_new_authorization_supersedes_the_old_one() {
        let set = Pending::new(Duration::from_secs(600), None);
        insert(&set, "old", "a").await;
        insert(&set, "other", "b").await;
        insert(&set, "new", "a").await;
        assert_eq!(set.take("old").await.err(), Some(Unmatched::Superseded));
        assert!(set.take("other").await.is_ok());
        assert!(set.take("new").await.is_ok());
    }

    #[test]
    fn a_pending_authorization_round_trips_as_json() {
        let json = serde_json::to_vec(&pending("github")).unwrap();
        let back: PendingAuthorization = serde_json::from_slice(&json).unwrap();
        assert_eq!(back.upstream.as_str(), "github");
        assert_eq!(back.principal, Principal::anonymous());
        let bad = String::from_utf8(json)
            .unwrap()
            .replace("github", "not a name!");
        assert!(serde_json::from_str::<PendingAuthorization>(&bad).is_err());
    }
}
