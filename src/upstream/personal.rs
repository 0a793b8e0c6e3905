//! Each user's own lists of an upstream (`discovery = "per_user"`): discovered with the user's
//! own connection (their token, their headers) on their first request, kept until the
//! upstream says they changed, and shown to that user alone. A user whose discovery failed
//! (no authorization yet, say) is tried again after `RETRY_AFTER`, not on every request.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use dashmap::DashMap;

use super::{Upstream, UpstreamError, discovery::discover};
use crate::{catalog::UpstreamCatalog, config::Discovery, principal::Principal};

/// How long a failed discovery of a user's lists stands before the next request tries again.
const RETRY_AFTER: Duration = Duration::from_secs(5);

/// One user's lists, and their discovery's single-flight lock.
#[derive(Default)]
pub(super) struct Personal {
    lists: arc_swap::ArcSwapOption<UpstreamCatalog>,
    /// Held while discovering; the last failure's time.
    discovering: tokio::sync::Mutex<Option<Instant>>,
}

/// Every user's lists of one upstream.
pub(super) type PersonalLists = DashMap<Principal, Arc<Personal>>;

impl Upstream {
    /// Whether each user sees their own lists of this upstream: it is configured so, and each
    /// user reaches it with their own credentials.
    pub fn discovers_per_user(&self) -> bool {
        self.config.discovery == Discovery::PerUser && self.connections_per_user()
    }

    /// `principal`'s own lists, if discovered.
    pub fn personal_catalog(&self, principal: &Principal) -> Option<Arc<UpstreamCatalog>> {
        self.lists.personal.get(principal)?.lists.load_full()
    }

    /// Discovers `principal`'s own lists unless they are known (or `again`: the upstream said
    /// they changed), or a recent attempt failed; true if they changed.
    pub async fn discover_personal(&self, principal: &Principal, again: bool) -> bool {
        let personal = self
            .lists
            .personal
            .entry(principal.clone())
            .or_default()
            .clone();
        if !again && personal.lists.load().is_some() {
            return false;
        }
        let mut failed = personal.discovering.lock().await;
        let known = personal.lists.load().is_some();
        let recently = failed.is_some_and(|at| at.elapsed() < RETRY_AFTER);
        if !again && (known || recently) {
            return false;
        }
        match self.discover_with(principal).await {
            Ok(catalog) => {
                personal.lists.store(Some(Arc::new(catalog)));
                *failed = None;
                true
            }
            Err(error) => {
                tracing::debug!(upstream = %self.name(), %principal, %error, "cannot discover a user's own lists");
                *failed = Some(Instant::now());
                false
            }
        }
    }

    async fn discover_with(&self, principal: &Principal) -> Result<UpstreamCatalog, UpstreamError> {
        if !self.health().is_ready() {
            return Err(UpstreamError::NotConnected(
                self.health().status().state.as_str().into(),
            ));
        }
        let connection = self.connection_for(principal, false).await?;
        let timeout = self.config.policy.discovery_timeout;
        let discovered = tokio::time::timeout(
            timeout,
            discover(connection.peer(), connection.raw(), connection.server()),
        )
        .await
        .map_err(|_| UpstreamError::DiscoveryTimeout {
            what: "a user's own tools, prompts and resources",
            timeout,
        })??;
        self.settle(discovered).await
    }

    /// Forgets every user's lists (the upstream reconnected: they may all be different).
    pub(super) fn forget_personal(&self) {
        self.lists.personal.clear();
    }
}
