//! Where an upstream is shared (its `shared` session mode, and stateless clients) and each
//! user has their own upstream tokens, or headers that name the user, each user gets their own
//! connection: one request never carries another user's token or name. The shared connection serves the principal it was opened
//! for; the others' connections are opened on their first request and kept until they close
//! (or idle out, with `idle_timeout_seconds`).

use std::sync::Arc;

use dashmap::DashMap;
use tokio::sync::OnceCell;

use super::{Connection, Era, EraSupport, Upstream, UpstreamError};
use crate::{config::TransportConfig, principal::Principal};

/// One lazily opened connection per principal; the cell makes concurrent first requests
/// open it once.
pub(super) type Connections = DashMap<Principal, Arc<OnceCell<Arc<Connection>>>>;

impl Upstream {
    /// Whether each user reaches this upstream with their own tokens.
    pub fn tokens_per_user(&self) -> bool {
        self.auth.as_ref().is_some_and(|auth| auth.per_user())
    }

    /// Whether each user reaches this upstream on a connection of their own: their own
    /// tokens, or headers naming them.
    pub(super) fn connections_per_user(&self) -> bool {
        self.tokens_per_user()
            || matches!(&self.config.transport, TransportConfig::Http(http) if !http.user_headers.is_empty())
    }

    /// Whose connection `principal`'s requests that outlive one call (resource subscriptions)
    /// go on: `principal`'s own where each user has one, else (`None`) the shared one. An
    /// upstream that speaks only 2026-07-28 is watched through its one shared stream.
    pub fn scope_of(&self, principal: &Principal) -> Option<Principal> {
        let own = self.connections_per_user()
            && **self.connections.service.load() != *principal
            && self.era_support() != EraSupport::ModernOnly;
        own.then(|| principal.clone())
    }

    /// The connection `principal`'s request goes on where the upstream is shared: the shared
    /// one (or, for a `stateless` request, the stateless one) when it is theirs or nothing in
    /// it is per user; else their own.
    pub async fn connection_for(
        &self,
        principal: &Principal,
        stateless: bool,
    ) -> Result<Arc<Connection>, UpstreamError> {
        if !self.connections_per_user() || **self.connections.service.load() == *principal {
            return if stateless {
                self.stateless().await
            } else {
                self.shared()
            };
        }
        if let Some(slot) = self.connections.by_principal.get(principal)
            && let Some(connection) = slot.get()
            && !connection.is_closed()
        {
            return Ok(connection.clone());
        }
        // Boxed: opening is rare, and its future is large.
        Box::pin(self.open_principal_connection(principal)).await
    }

    /// Opens `principal`'s own connection; one that has closed is replaced once.
    async fn open_principal_connection(
        &self,
        principal: &Principal,
    ) -> Result<Arc<Connection>, UpstreamError> {
        for _ in 0..2 {
            let slot = self
                .connections
                .by_principal
                .entry(principal.clone())
                .or_default()
                .clone();
            let connection = slot
                .get_or_try_init(|| async {
                    let era = if self.era_support() == EraSupport::ModernOnly {
                        Era::Modern
                    } else {
                        Era::Legacy
                    };
                    let connection = Arc::new(self.open_for(era, principal, true).await?);
                    if let Some(idle) = self.config.policy.idle_timeout {
                        connection.reap_when_idle(idle);
                    }
                    tracing::debug!(upstream = %self.name(), %principal, "opened a user's own upstream session");
                    Ok::<_, UpstreamError>(connection)
                })
                .await?
                .clone();
            if !connection.is_closed() {
                return Ok(connection);
            }
            self.connections
                .by_principal
                .remove_if(principal, |_, kept| Arc::ptr_eq(kept, &slot));
        }
        Err(UpstreamError::NotConnected(
            "its session closed as soon as it was opened".into(),
        ))
    }
}
