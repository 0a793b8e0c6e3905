//! Pinned tools, from the gateway's side: an operator's approval served at once, here and (by
//! the store's news) on every replica.

use std::sync::Weak;

use super::Gateway;
use crate::{
    catalog::ListChanges,
    store::Heard,
    store::{PIN_KIND, record_hash},
};

impl Gateway {
    /// Approves what waits of `upstream` (tool `tool`, or all), and serves it at once. The
    /// names approved.
    pub async fn approve_tools(
        &self,
        upstream: &str,
        tool: Option<&str>,
    ) -> Result<Vec<String>, crate::pins::ApproveError> {
        let approved = self.pins.approve(upstream, tool).await?;
        self.resettle(upstream).await;
        Ok(approved)
    }

    /// Settles `upstream`'s lists again (its pins changed), and rebuilds the catalog.
    pub async fn resettle(&self, upstream: &str) {
        let found = self
            .live()
            .upstreams
            .iter()
            .find(|each| each.name().as_str() == upstream)
            .cloned();
        let Some(found) = found else {
            return;
        };
        match found.resettle().await {
            Ok(true) => self.rebuild_catalog_announcing(ListChanges {
                tools: true,
                ..ListChanges::default()
            }),
            Ok(false) => {}
            Err(error) => {
                tracing::warn!(upstream, %error, "cannot serve the approved tool definitions yet")
            }
        }
    }
}

/// What other replicas announce, as the gateway hears it: an approval made there is served
/// here too; after a gap in listening, every pinned upstream is settled again.
pub(super) struct PinEars(pub Weak<Gateway>);

impl PinEars {
    fn resettle_where(&self, pick: impl Fn(&str) -> bool) {
        let Some(gateway) = self.0.upgrade() else {
            return;
        };
        let names: Vec<String> = gateway
            .live()
            .upstreams
            .iter()
            .filter(|upstream| gateway.pins.applies(upstream.config().items.pin))
            .map(|upstream| upstream.name().to_string())
            .filter(|name| pick(name))
            .collect();
        if names.is_empty() {
            return;
        }
        tokio::spawn(async move {
            for name in names {
                gateway.resettle(&name).await;
            }
        });
    }
}

impl Heard for PinEars {
    fn record_changed(&self, kind: &str, hash: &str) {
        if kind == PIN_KIND {
            self.resettle_where(|name| record_hash(name) == hash);
        }
    }

    fn reconnected(&self) {
        self.resettle_where(|_| true);
    }
}
