//! Notifications from a 2026-07-28 upstream. Such a server announces list changes and resource
//! updates only on a `subscriptions/listen` request, so the supervisor keeps one open on the
//! upstream's shared connection for as long as that connection lives, and opens it again with
//! a new filter whenever the set of resources clients subscribed to changes.

use std::{sync::Arc, time::Duration};

use rmcp::{
    model::{ServerNotification, SubscriptionFilter},
    service::SubscriptionEnd,
};
use tokio::task::JoinHandle;

use super::{Connection, Upstream, UpstreamEvent};

/// The wait before listening again after the upstream ended a listen request on its own.
const RELISTEN_DELAY: Duration = Duration::from_secs(1);

/// Listens on `connection` until it closes (or the returned task is aborted), reporting what
/// the upstream announces as the events of its other connections would be.
pub fn spawn_listener(upstream: Arc<Upstream>, connection: Arc<Connection>) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut watched = upstream.lists.watched.subscribe();
        loop {
            let uris: Vec<String> = watched.borrow_and_update().iter().cloned().collect();
            let filter = SubscriptionFilter::builder()
                .tools_list_changed()
                .prompts_list_changed()
                .resources_list_changed()
                .resource_subscriptions(uris)
                .build();
            let mut subscription = match connection.peer().listen(filter).await {
                Ok(subscription) => subscription,
                Err(error) => {
                    tracing::info!(upstream = %upstream.name(), %error, "the upstream does not take subscriptions/listen; its changes will not be announced");
                    return;
                }
            };
            loop {
                tokio::select! {
                    next = subscription.next() => match next {
                        Ok(Some(notification)) => report(&upstream, notification),
                        // The connection is gone: the supervisor takes over.
                        _ if connection.is_closed() => return,
                        Ok(None) | Err(_) => {
                            if !matches!(subscription.end(), Some(SubscriptionEnd::Lagged { .. })) {
                                tokio::time::sleep(RELISTEN_DELAY).await;
                            }
                            break;
                        }
                    },
                    // Listen again with the new set (dropping the old request cancels it).
                    changed = watched.changed() => if changed.is_err() { return } else { break },
                }
            }
        }
    })
}

fn report(upstream: &Upstream, notification: ServerNotification) {
    let event = match notification {
        ServerNotification::ToolListChangedNotification(_) => UpstreamEvent::ToolsChanged(None),
        ServerNotification::PromptListChangedNotification(_) => UpstreamEvent::PromptsChanged(None),
        ServerNotification::ResourceListChangedNotification(_) => {
            UpstreamEvent::ResourcesChanged(None)
        }
        ServerNotification::ResourceUpdatedNotification(update) => {
            UpstreamEvent::ResourceUpdated(update.params.uri, None)
        }
        _ => return,
    };
    // The supervisor may be gone during shutdown; nothing is lost then.
    let _ = upstream.events.send(event);
}
