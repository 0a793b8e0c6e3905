//! Resource subscriptions: which clients want `notifications/resources/updated` for which
//! upstream resource, and the one upstream subscription per resource that serves them all.
//!
//! The first client to subscribe to a resource subscribes the upstream; the last to leave
//! unsubscribes it. Where each user reaches the upstream on a connection of their own (their
//! token, their headers), a user's subscriptions are made on that connection and its updates
//! go to that user's subscribers alone: no subscription rides on another user's credentials. A per-resource lock orders these, so that an unsubscribe still on its way
//! cannot undo a newer subscribe, and every subscriber waits until the upstream has accepted.
//! Updates fan out to exactly the clients subscribed, under the URI each of them used. After an
//! upstream reconnects, its subscriptions are renewed. A 2026-07-28 upstream is not subscribed
//! to but told, through its `subscriptions/listen` stream, which resources to watch.

// resources/subscribe is legacy-only (2026-07-28 uses subscriptions/listen), but both use it.
#![allow(deprecated)]

use std::sync::{
    Arc,
    atomic::{AtomicU64, Ordering},
};

use dashmap::DashMap;
use rmcp::model::{
    ResourceUpdatedNotification, ResourceUpdatedNotificationParam, ServerJsonRpcMessage,
    ServerNotification, SubscribeRequestParams, UnsubscribeRequestParams,
};
use tokio::sync::{Mutex, mpsc};

use super::unavailable;
use crate::{
    downstream::Outlet,
    error::GatewayError,
    names::UpstreamName,
    principal::Principal,
    upstream::{Connection, Era, Upstream},
};

/// Where a subscriber's notifications go.
#[derive(Clone)]
pub enum Outbox {
    /// A `subscriptions/listen` request, which tags them before sending them on.
    Channel(mpsc::Sender<ServerNotification>),
    /// A session's standalone stream.
    Outlet(Outlet),
}

impl Outbox {
    /// Passes `notification` on if there is room; `false` if there was none.
    fn offer(&self, notification: ServerNotification) -> bool {
        match self {
            Outbox::Channel(sender) => sender.try_send(notification).is_ok(),
            Outbox::Outlet(outlet) => {
                let message = ServerJsonRpcMessage::notification(notification);
                serde_json::to_vec(&message).is_ok_and(|bytes| outlet.offer(bytes.into()).is_ok())
            }
        }
    }
}

/// Updates buffered per subscriber; beyond that a slow client misses updates (they are hints
/// to read the resource again, and the next one says the same) rather than growing memory.
pub const OUTBOX_CAPACITY: usize = 256;

struct Subscriber {
    id: u64,
    /// The URI as this client knows it.
    exposed: String,
    outbox: Outbox,
}

/// (upstream, whose connection carries it (`None`: the shared one), the URI as the upstream
/// knows it).
type Key = (UpstreamName, Option<Principal>, String);

/// Every live resource subscription of the gateway.
#[derive(Default)]
pub struct Subscriptions {
    by_resource: DashMap<Key, Vec<Subscriber>>,
    /// Per resource: whether the upstream is subscribed. Its lock is held across the upstream
    /// request, so subscribing and unsubscribing one resource happen one at a time, in order.
    upstream_side: DashMap<Key, Arc<Mutex<bool>>>,
    next_id: AtomicU64,
    /// This replica left (it is stopping): the replicas that take its subscriptions over
    /// deliver their updates, and it delivers none, or each would arrive twice.
    handed_over: std::sync::atomic::AtomicBool,
}

impl Subscriptions {
    /// Subscribes `outbox` of `principal` to updates of `original` at `upstream`, reported as
    /// `exposed`, once the upstream has accepted. The subscription lasts as long as the
    /// returned value.
    pub async fn subscribe(
        self: &Arc<Self>,
        upstream: &Arc<Upstream>,
        principal: &Principal,
        original: String,
        exposed: String,
        outbox: Outbox,
    ) -> Result<Subscription, GatewayError> {
        let key = (
            upstream.name().clone(),
            upstream.scope_of(principal),
            original,
        );
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.by_resource
            .entry(key.clone())
            .or_default()
            .push(Subscriber {
                id,
                exposed,
                outbox,
            });
        let side = self.upstream_side(&key);
        // From here on, dropping the subscription (on failure too) removes the entry again.
        let subscription = Subscription(Held::Shared {
            registry: self.clone(),
            upstream: upstream.clone(),
            key: key.clone(),
            id,
        });
        let mut subscribed = side.lock().await;
        if !*subscribed {
            let (_, scope, uri) = &key;
            subscribe_upstream(upstream, scope.as_ref(), uri).await?;
            *subscribed = true;
        }
        Ok(subscription)
    }

    fn upstream_side(&self, key: &Key) -> Arc<Mutex<bool>> {
        self.upstream_side.entry(key.clone()).or_default().clone()
    }

    /// Passes an update of `uri` at `upstream`, which came on the connection of `scope`, to
    /// the subscribers of that connection.
    pub fn deliver(&self, upstream: &UpstreamName, scope: Option<&Principal>, uri: &str) {
        if self.handed_over.load(std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        let key = (upstream.clone(), scope.cloned(), uri.to_owned());
        let Some(subscribers) = self.by_resource.get(&key) else {
            return;
        };
        for subscriber in subscribers.iter() {
            let notification =
                ServerNotification::ResourceUpdatedNotification(ResourceUpdatedNotification::new(
                    ResourceUpdatedNotificationParam::new(subscriber.exposed.clone()),
                ));
            if !subscriber.outbox.offer(notification) {
                tracing::debug!(%upstream, %uri, "a client is not reading its resource updates; one dropped");
            }
        }
    }

    /// Stops delivering updates: this replica left, and others take its subscriptions over.
    pub fn hand_over(&self) {
        self.handed_over
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Renews the upstream subscriptions of `upstream` on its new shared session.
    pub async fn renew(&self, upstream: &Upstream) {
        let keys: Vec<Key> = self
            .by_resource
            .iter()
            .filter(|entry| entry.key().0 == *upstream.name() && entry.key().1.is_none())
            .map(|entry| entry.key().clone())
            .collect();
        for key in keys {
            let side = self.upstream_side(&key);
            let mut subscribed = side.lock().await;
            match subscribe_upstream(upstream, None, &key.2).await {
                Ok(()) => *subscribed = true,
                Err(error) => {
                    *subscribed = false;
                    tracing::warn!(upstream = %upstream.name(), uri = %key.2, %error, "cannot renew a resource subscription");
                }
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

    /// Unsubscribes the upstream from `key`, unless someone subscribed again meanwhile.
    async fn release(&self, upstream: &Upstream, key: &Key) {
        let side = self.upstream_side(key);
        let mut subscribed = side.lock().await;
        if self.by_resource.contains_key(key) || !*subscribed {
            return;
        }
        *subscribed = false;
        unsubscribe_upstream(upstream, key.1.as_ref(), &key.2).await;
        drop(subscribed);
        self.upstream_side
            .remove_if(key, |_, side| Arc::strong_count(side) <= 2);
    }
}

/// The connection a subscription of `scope` goes on: that user's own, or the shared one.
async fn connection_of(
    upstream: &Upstream,
    scope: Option<&Principal>,
) -> Result<Arc<crate::upstream::Connection>, GatewayError> {
    match scope {
        None => upstream.shared().map_err(|_| unavailable(upstream)),
        Some(principal) => upstream
            .connection_for(principal, false)
            .await
            .map_err(|error| GatewayError::Unavailable {
                upstream: upstream.name().clone(),
                reason: error.to_string(),
            }),
    }
}

async fn subscribe_upstream(
    upstream: &Upstream,
    scope: Option<&Principal>,
    uri: &str,
) -> Result<(), GatewayError> {
    let connection = connection_of(upstream, scope).await?;
    if connection.era() == Era::Modern {
        upstream.lists().watch_resource(uri);
        return Ok(());
    }
    connection
        .peer()
        .subscribe(SubscribeRequestParams::new(uri))
        .await
        .map_err(|error| GatewayError::from_service(upstream.name(), error))
}

async fn unsubscribe_upstream(upstream: &Upstream, scope: Option<&Principal>, uri: &str) {
    upstream.lists().unwatch_resource(uri);
    let Ok(connection) = connection_of(upstream, scope).await else {
        return;
    };
    if connection.era() == Era::Legacy {
        let request = UnsubscribeRequestParams::new(uri);
        if let Err(error) = connection.peer().unsubscribe(request).await {
            tracing::debug!(upstream = %upstream.name(), %uri, %error, "unsubscribing failed");
        }
    }
}

/// One client's subscription to one resource; dropping it unsubscribes.
pub struct Subscription(Held);

enum Held {
    /// Through the registry, on a connection shared by its subscribers.
    Shared {
        registry: Arc<Subscriptions>,
        upstream: Arc<Upstream>,
        key: Key,
        id: u64,
    },
    /// On the connection of the subscribing session alone.
    Own {
        connection: Arc<Connection>,
        original: String,
    },
}

impl Subscriptions {
    /// Subscribes the session that `connection` belongs to (its own connection to `upstream`)
    /// to updates of `original`, reported as `exposed`. The upstream keeps subscriptions per
    /// session, and that session is where the client's calls go, so the subscription goes
    /// there too, and its updates come back on it.
    pub async fn subscribe_own(
        &self,
        upstream: &Upstream,
        connection: Arc<Connection>,
        original: String,
        exposed: &str,
    ) -> Result<Subscription, GatewayError> {
        if !connection.relay().note_subscription(&original, exposed) {
            return Err(GatewayError::Internal(
                "a subscription of one session went to a shared connection".into(),
            ));
        }
        // From here on, dropping it (on failure too) unsubscribes.
        let subscription = Subscription(Held::Own {
            connection: connection.clone(),
            original: original.clone(),
        });
        connection
            .peer()
            .subscribe(SubscribeRequestParams::new(original))
            .await
            .map_err(|error| GatewayError::from_service(upstream.name(), error))?;
        Ok(subscription)
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        match &self.0 {
            Held::Shared {
                registry,
                upstream,
                key,
                id,
            } => {
                if !registry.remove(key, *id) {
                    return;
                }
                let (registry, upstream, key) = (registry.clone(), upstream.clone(), key.clone());
                tokio::spawn(async move { registry.release(&upstream, &key).await });
            }
            Held::Own {
                connection,
                original,
            } => {
                connection.relay().forget_subscription(original);
                let (connection, request) = (
                    connection.clone(),
                    UnsubscribeRequestParams::new(original.clone()),
                );
                tokio::spawn(async move {
                    if let Err(error) = connection.peer().unsubscribe(request).await {
                        tracing::debug!(%error, "unsubscribing on a session's own connection failed");
                    }
                });
            }
        }
    }
}
