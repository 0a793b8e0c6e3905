//! A session's resource subscriptions across replicas. The replica a client subscribes through
//! holds the subscription (it is subscribed upstream and passes updates to the session's
//! stream, wherever that is open) and records it in the store; a subscribe landing on another
//! replica finds it held and does not subscribe twice. When the holder dies, a replica serving
//! the session takes the subscription over (`take_over`), so the client keeps its updates.
//! Without a shared store a subscription is this process's alone.

use std::sync::Arc;

use super::{Session, Source};
use crate::{
    catalog::Features,
    downstream::Outlet,
    error::GatewayError,
    gateway::{Gateway, Live, Outbox},
    policy::Viewer,
    router::ConnectionSource,
    store::SubscriptionRecord,
};

impl Session {
    /// Subscribes the session to the resource its client names `uri`, unless it is already,
    /// here or through a living replica; `viewer` is the subscribing request's (what it may
    /// see of `live` decides whether the resource exists for it).
    pub async fn subscribe(
        &self,
        gateway: &Gateway,
        live: &Live,
        viewer: Viewer<'_>,
        uri: String,
    ) -> Result<(), GatewayError> {
        if self.subscribed().contains_key(&uri) {
            return Ok(());
        }
        if let Some(hash) = self.shared_hash()
            && self.held_elsewhere(gateway, hash, &uri).await
        {
            return Ok(());
        }
        self.subscribe_here(gateway, live, viewer, uri.clone())
            .await?;
        if let Some(hash) = self.shared_hash() {
            let ttl = gateway.live().config.server.session_idle_timeout;
            if let Err(error) = gateway
                .store()
                .hold_subscription(hash, &uri, None, ttl)
                .await
            {
                tracing::warn!(%error, "a resource subscription is not known to the other replicas");
            }
        }
        Ok(())
    }

    /// Ends the session's subscription to `uri`, wherever it is held.
    pub async fn unsubscribe(&self, gateway: &Gateway, uri: &str) {
        let here = self.subscribed().remove(uri);
        let Some(hash) = self.shared_hash() else {
            return;
        };
        if here.is_none() {
            // Held by the replica the client subscribed through.
            let params = serde_json::json!({ "uri": uri }).to_string();
            let message = crate::wire::write::notification("resources/unsubscribe", Some(&params));
            self.relay(gateway.store(), &message).await;
        }
        if let Err(error) = gateway.store().drop_subscription(hash, uri).await {
            tracing::warn!(%error, "an ended resource subscription is still recorded");
        }
    }

    /// Takes over the session's subscriptions whose replica has died: this replica subscribes
    /// in its place (the first replica to record itself as the holder does).
    pub async fn take_over(&self, gateway: &Gateway) {
        let Some(hash) = self.shared_hash() else {
            return;
        };
        let store = gateway.store();
        let orphans = match orphaned(gateway, hash).await {
            Ok(orphans) => orphans,
            Err(error) => {
                tracing::warn!(%error, "cannot tell whether a session's subscriptions lost their replica");
                return;
            }
        };
        let ttl = gateway.live().config.server.session_idle_timeout;
        for orphan in orphans {
            match store
                .hold_subscription(hash, &orphan.uri, Some(&orphan), ttl)
                .await
            {
                Ok(true) => {}
                Ok(false) => continue, // Another replica took it over first.
                Err(error) => {
                    tracing::warn!(%error, "cannot take over a resource subscription");
                    continue;
                }
            }
            let viewer = self.home().viewer();
            if let Err(error) = self
                .subscribe_here(gateway, &gateway.live(), viewer, orphan.uri.clone())
                .await
            {
                // The client is told nothing more of it: forget it rather than retry forever.
                tracing::warn!(%error, "a resource subscription of a replica that died could not be made again");
                let _ = store.drop_subscription(hash, &orphan.uri).await;
            } else {
                tracing::info!(session = %super::short_hash(self.id()), "took over a resource subscription of a replica that died");
            }
        }
    }

    /// After this replica was out of touch with the store: gives up the subscriptions another
    /// replica took over meanwhile, and records again those the store lost.
    pub async fn confirm_held(&self, gateway: &Gateway) {
        let Some(hash) = self.shared_hash() else {
            return;
        };
        let store = gateway.store();
        let Ok(records) = store.subscriptions(hash).await else {
            return;
        };
        let held: Vec<String> = self.subscribed().keys().cloned().collect();
        let ttl = gateway.live().config.server.session_idle_timeout;
        for uri in held {
            match records.iter().find(|record| record.uri == uri) {
                Some(record) if record.holder != store.replica() => {
                    self.subscribed().remove(&uri);
                }
                Some(_) => {}
                None => {
                    let _ = store.hold_subscription(hash, &uri, None, ttl).await;
                }
            }
        }
    }

    /// Whether a living replica other than this one holds the session's subscription to
    /// `uri` (if the store cannot say, it is made here).
    async fn held_elsewhere(&self, gateway: &Gateway, hash: &str, uri: &str) -> bool {
        let store = gateway.store();
        let Ok(records) = store.subscriptions(hash).await else {
            return false;
        };
        let Some(record) = records.into_iter().find(|record| record.uri == uri) else {
            return false;
        };
        record.holder != store.replica()
            && store
                .replicas_alive(&[record.holder.as_str()])
                .await
                .is_ok_and(|alive| alive == [true])
    }

    /// Subscribes this replica's copy of the session to `uri`: on the session's own
    /// connection where it has one (a `per_client` upstream), or else in an upstream
    /// subscription shared with every other subscriber of the resource.
    async fn subscribe_here(
        &self,
        gateway: &Gateway,
        live: &Live,
        viewer: Viewer<'_>,
        uri: String,
    ) -> Result<(), GatewayError> {
        let (owner, original, _) = live.resolve_uri(&live.view(viewer, Features::ALL), &uri)?;
        let upstream = live.serving_upstream(&owner)?;
        let subscriptions = gateway.subscriptions();
        let subscription = if upstream.is_per_client() {
            let connection = Source::Session(self.upstreams())
                .connection(&upstream)
                .await?;
            subscriptions
                .subscribe_own(&upstream, connection, original, &uri)
                .await?
        } else {
            let outbox = Outbox::Outlet(Outlet::Session(Arc::clone(self.standalone())));
            subscriptions
                .subscribe(&upstream, viewer.principal, original, uri.clone(), outbox)
                .await?
        };
        self.subscribed().insert(uri, subscription);
        Ok(())
    }
}

/// The subscriptions of session `hash` whose holder has died.
async fn orphaned(
    gateway: &Gateway,
    hash: &str,
) -> Result<Vec<SubscriptionRecord>, crate::store::StoreError> {
    let store = gateway.store();
    let records = store.subscriptions(hash).await?;
    let holders: Vec<&str> = records.iter().map(|r| r.holder.as_str()).collect();
    let alive = store.replicas_alive(&holders).await?;
    Ok(records
        .iter()
        .zip(alive)
        .filter(|(_, alive)| !alive)
        .map(|(record, _)| record.clone())
        .collect())
}
