//! Resource subscriptions: which clients want `notifications/resources/updated` for which
//! upstream resource, and the one upstream subscription per resource that serves them all.
//!
//! The first client to subscribe to a resource subscribes the upstream's shared session; the
//! last to leave unsubscribes it. Updates fan out to exactly the clients subscribed, under the
//! URI each of them used. After an upstream reconnects, its subscriptions are renewed.

// resources/subscribe is legacy-only (2026-07-28 uses subscriptions/listen), but both use it.
#![allow(deprecated)]

use std::sync::{
    Arc,
    atomic::{AtomicU64, Ordering},
};

use dashmap::DashMap;
use rmcp::model::{
    ResourceUpdatedNotification, ResourceUpdatedNotificationParam, ServerNotification,
    SubscribeRequestParams, UnsubscribeRequestParams,
};
use tokio::sync::mpsc;

use crate::{error::GatewayError, gateway::unavailable, names::UpstreamName, upstream::Upstream};

/// Where a subscriber's notifications go.
pub type Outbox = mpsc::UnboundedSender<ServerNotification>;

struct Subscriber {
    id: u64,
    /// The URI as this client knows it.
    exposed: String,
    outbox: Outbox,
}

/// (upstream, the URI as the upstream knows it).
type Key = (UpstreamName, String);

/// Every live resource subscription of the gateway.
#[derive(Default)]
pub struct Subscriptions {
    by_resource: DashMap<Key, Vec<Subscriber>>,
    next_id: AtomicU64,
}

impl Subscriptions {
    /// Subscribes `outbox` to updates of `original` at `upstream`, reported as `exposed`. The
    /// subscription lasts as long as the returned value.
    pub async fn subscribe(
        self: &Arc<Self>,
        upstream: &Arc<Upstream>,
        original: String,
        exposed: String,
        outbox: Outbox,
    ) -> Result<Subscription, GatewayError> {
        let key = (upstream.name().clone(), original);
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let first = {
            let mut subscribers = self.by_resource.entry(key.clone()).or_default();
            subscribers.push(Subscriber {
                id,
                exposed,
                outbox,
            });
            subscribers.len() == 1
        };
        let subscription = Subscription {
            registry: self.clone(),
            upstream: upstream.clone(),
            key,
            id,
        };
        if first {
            // On failure the subscription is dropped, which removes the entry again.
            subscribe_upstream(upstream, &subscription.key.1).await?;
        }
        Ok(subscription)
    }

    /// Passes an update of `uri` at `upstream` to its subscribers.
    pub fn deliver(&self, upstream: &UpstreamName, uri: &str) {
        let Some(subscribers) = self.by_resource.get(&(upstream.clone(), uri.to_owned())) else {
            return;
        };
        for subscriber in subscribers.iter() {
            let notification =
                ServerNotification::ResourceUpdatedNotification(ResourceUpdatedNotification::new(
                    ResourceUpdatedNotificationParam::new(subscriber.exposed.clone()),
                ));
            let _ = subscriber.outbox.send(notification);
        }
    }

    /// Renews the upstream subscriptions of `upstream` on its new shared session.
    pub async fn renew(&self, upstream: &Upstream) {
        let uris: Vec<String> = self
            .by_resource
            .iter()
            .filter(|entry| entry.key().0 == *upstream.name())
            .map(|entry| entry.key().1.clone())
            .collect();
        for uri in uris {
            if let Err(error) = subscribe_upstream(upstream, &uri).await {
                tracing::warn!(upstream = %upstream.name(), %uri, %error, "cannot renew a resource subscription");
            }
        }
    }

    /// Removes subscriber `id`; true if it was the last one of `key`.
    fn remove(&self, key: &Key, id: u64) -> bool {
        let mut last = false;
        self.by_resource.remove_if_mut(key, |_, subscribers| {
            subscribers.retain(|s| s.id != id);
            last = subscribers.is_empty();
            last
        });
        last
    }
}

async fn subscribe_upstream(upstream: &Upstream, uri: &str) -> Result<(), GatewayError> {
    let connection = upstream.shared().map_err(|_| unavailable(upstream))?;
    connection
        .peer()
        .subscribe(SubscribeRequestParams::new(uri))
        .await
        .map_err(|error| GatewayError::from_service(upstream.name(), error))
}

/// One client's subscription to one resource; dropping it unsubscribes.
pub struct Subscription {
    registry: Arc<Subscriptions>,
    upstream: Arc<Upstream>,
    key: Key,
    id: u64,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        if !self.registry.remove(&self.key, self.id) {
            return;
        }
        let Ok(connection) = self.upstream.shared() else {
            return;
        };
        let uri = self.key.1.clone();
        tokio::spawn(async move {
            let _ = connection
                .peer()
                .unsubscribe(UnsubscribeRequestParams::new(uri))
                .await;
        });
    }
}
