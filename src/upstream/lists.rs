//! What an upstream lists: as discovered, and as served (its pinned tools as approved, each
//! tool's schema compiled); what its tools need of clients; each user's own lists where it is
//! discovered per user; the metric series of its tools; and the resources a 2026-07-28
//! upstream is asked to report updates of.

use std::{collections::BTreeSet, sync::Arc};

use arc_swap::ArcSwapOption;
use tokio::sync::watch;

use super::{needs::Probed, personal::PersonalLists};
use crate::{catalog::UpstreamCatalog, metrics::ToolTable, pins::Pins};

/// An upstream's lists, and what is kept beside them.
pub struct Lists {
    /// What it listed last, before pinning (settled again after an approval).
    pub(super) discovered: ArcSwapOption<UpstreamCatalog>,
    /// What is served of it; `None` until first discovered.
    pub(super) served: ArcSwapOption<UpstreamCatalog>,
    /// What its tools need of clients, as last found out (see `needs`).
    pub(super) needs: ArcSwapOption<Probed>,
    /// With `discovery = "per_user"`: each user's own lists.
    pub(super) personal: PersonalLists,
    /// The approved definitions of pinned tools.
    pub(super) pins: Arc<Pins>,
    /// The metric series of its tools, made when it was discovered.
    tool_series: ArcSwapOption<ToolTable>,
    /// The resources clients subscribed to, for a 2026-07-28 upstream, which is told them in
    /// its `subscriptions/listen` filter (a legacy one is sent `resources/subscribe` instead).
    pub(super) watched: watch::Sender<BTreeSet<String>>,
}

impl Lists {
    pub fn new(pins: &Arc<Pins>) -> Self {
        Self {
            discovered: ArcSwapOption::empty(),
            served: ArcSwapOption::empty(),
            needs: ArcSwapOption::empty(),
            personal: Default::default(),
            pins: pins.clone(),
            tool_series: ArcSwapOption::empty(),
            watched: watch::Sender::new(BTreeSet::new()),
        }
    }

    /// The metric series of the upstream's tools, once it has been discovered.
    pub fn tool_series(&self) -> Option<Arc<ToolTable>> {
        self.tool_series.load_full()
    }

    pub fn set_tool_series(&self, table: ToolTable) {
        self.tool_series.store(Some(Arc::new(table)));
    }

    /// Adds `uri` to the resources a 2026-07-28 upstream is asked to report updates of.
    pub fn watch_resource(&self, uri: &str) {
        self.watched
            .send_if_modified(|watched| watched.insert(uri.to_owned()));
    }

    pub fn unwatch_resource(&self, uri: &str) {
        self.watched.send_if_modified(|watched| watched.remove(uri));
    }
}
