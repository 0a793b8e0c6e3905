//! What of an upstream's discovered lists is served: its pinned tools as approved (`pins`),
//! and each tool's input schema compiled, those that do not compile left out.

use std::sync::Arc;

use super::{Upstream, UpstreamError};
use crate::catalog::UpstreamCatalog;

impl Upstream {
    /// What of `discovered` (lists this upstream gave) is served: pinned tools as approved,
    /// and every tool's input schema compiled (those whose schema does not compile left out).
    pub async fn settle(
        &self,
        discovered: UpstreamCatalog,
    ) -> Result<UpstreamCatalog, UpstreamError> {
        let name = self.name().as_str();
        let settled = self
            .lists
            .pins
            .settle(name, self.config.items.pin, discovered)
            .await
            .map_err(|error| UpstreamError::Discovery {
                what: "pinned tool definitions",
                reason: error.to_string(),
            })?;
        Ok(settled.checked())
    }

    /// Settles the shared lists last discovered again (an operator approved a pinned tool's
    /// change), and forgets users' own lists, so that they are found again. Whether the
    /// served lists changed.
    pub async fn resettle(&self) -> Result<bool, UpstreamError> {
        self.forget_personal();
        let Some(discovered) = self.lists.discovered.load_full() else {
            return Ok(false);
        };
        let settled = self.settle((*discovered).clone()).await?;
        self.lists.served.store(Some(Arc::new(settled)));
        Ok(true)
    }
}
