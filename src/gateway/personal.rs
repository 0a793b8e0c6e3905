//! Upstreams that show each user their own lists (`discovery = "per_user"`): a request of a
//! user who has none yet finds them first (on their own connection), and every request sees
//! the snapshot merged with that user's lists. When a user's lists change, the catalog is
//! rebuilt so that every session hears of it (each then lists what it sees).

use std::sync::Arc;

use super::{Gateway, Live};
use crate::{catalog::ListChanges, principal::Principal};

/// Every list, as announced when a user's own lists change.
const ALL_LISTS: ListChanges = ListChanges {
    tools: true,
    prompts: true,
    resources: true,
};

impl Gateway {
    /// Finds `principal`'s own lists of the per-user upstreams of `live` they have none of yet
    /// (at once where its catalog has no per-user upstream: every request asks).
    pub async fn discover_personal(&self, live: &Live, principal: &Principal) {
        if live.catalog.personal().is_empty() {
            return;
        }
        let found = futures::future::join_all(
            live.catalog
                .personal()
                .iter()
                .filter_map(|name| live.upstream(name.as_str()))
                .map(|upstream| upstream.discover_personal(principal, false)),
        )
        .await;
        if found.into_iter().any(|changed| changed) {
            self.rebuild_catalog_announcing(ALL_LISTS);
        }
    }

    /// `principal`'s lists of `upstream` changed (it said so on their connection): found
    /// again, and announced.
    pub(super) fn personal_changed(self: &Arc<Self>, upstream: &str, principal: &Principal) {
        let Some(upstream) = self.live().upstream(upstream).cloned() else {
            return;
        };
        let (gateway, principal) = (self.clone(), principal.clone());
        tokio::spawn(async move {
            if upstream.discover_personal(&principal, true).await {
                gateway.rebuild_catalog_announcing(ALL_LISTS);
            }
        });
    }
}
