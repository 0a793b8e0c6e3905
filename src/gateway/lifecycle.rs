//! An operator's hold on one upstream at runtime: connected again from scratch (`reconnect`:
//! a fresh upstream of the same configuration replaces the running one, its failures
//! forgotten, also after its supervisor gave up), or its lists fetched again now
//! (`rediscover`), without a reload.

use std::sync::Arc;

use super::Gateway;
use crate::catalog::ListChanges;

impl Gateway {
    /// Replaces the running upstream `name` with a fresh one of the same configuration: a new
    /// connection, its failed attempts forgotten. The old one gets the shutdown grace period
    /// for the calls it has in flight. `false` if there is no such upstream.
    pub async fn reconnect(self: &Arc<Self>, name: &str) -> bool {
        // Not while a reload replaces the upstreams.
        let _reloading = self.reloading.lock().await;
        let live = self.live.load_full();
        let Some(index) = live
            .upstreams
            .iter()
            .position(|u| u.name().as_str() == name)
        else {
            return false;
        };
        let old = live.upstreams[index].clone();
        let fresh = self.launch(old.config().clone());
        let mut setup = live.setup.clone();
        setup.upstreams[index] = fresh;
        setup.generation = live.generation + 1;
        self.publish(Some(setup), ListChanges::default());
        let grace = live.config.server.shutdown_grace;
        tokio::spawn(async move { old.retire(grace).await });
        tracing::info!(upstream = name, "upstream reconnected by the operator");
        true
    }

    /// Has upstream `name` list its tools, prompts and resources again now, as if it had said
    /// they changed. `false` if there is no such upstream.
    pub fn rediscover(&self, name: &str) -> bool {
        match self.live().upstream(name) {
            Some(upstream) => {
                upstream.rediscover();
                true
            }
            None => false,
        }
    }
}
