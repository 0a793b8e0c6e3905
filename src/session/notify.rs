//! Notifications Switchyard sends to clients on its own: list changes when the catalog changes,
//! and resource updates for subscriptions.
//!
//! A burst of catalog rebuilds (several upstreams coming up at once, an upstream announcing many
//! changes) yields one notification per changed list, after a short quiet period.

use std::{sync::Arc, time::Duration};

use rmcp::{
    RoleServer,
    model::{
        PromptListChangedNotification, ResourceListChangedNotification, ServerNotification,
        ToolListChangedNotification,
    },
    service::Peer,
};
use tokio::{
    sync::{mpsc, watch},
    time::Instant,
};
use tokio_util::sync::CancellationToken;

use crate::{catalog::ListVersions, gateway::Gateway};

/// How long the catalog must stay unchanged before clients are told.
const DEBOUNCE: Duration = Duration::from_millis(50);

/// Follows the catalog and reports which lists changed since last reported.
pub struct ListWatcher {
    gateway: Arc<Gateway>,
    generations: watch::Receiver<u64>,
    announced: ListVersions,
    /// When a change seen is to be reported (after the burst it belongs to settles).
    due: Option<Instant>,
}

impl ListWatcher {
    pub fn new(gateway: Arc<Gateway>) -> Self {
        let generations = gateway.watch_catalog();
        let announced = gateway.catalog().versions();
        Self {
            gateway,
            generations,
            announced,
            due: None,
        }
    }

    /// Waits for the next change of any list and returns a notification per changed list.
    /// `None` when the gateway is gone. Cancel-safe: a change seen by a call that was dropped
    /// while it let the burst settle is reported by the next call.
    pub async fn changed(&mut self) -> Option<Vec<ServerNotification>> {
        loop {
            let due = match self.due {
                Some(due) => due,
                None => {
                    self.generations.changed().await.ok()?;
                    *self.due.insert(Instant::now() + DEBOUNCE)
                }
            };
            // Let a burst settle, then take the latest state.
            tokio::time::sleep_until(due).await;
            self.due = None;
            self.generations.mark_unchanged();
            let now = self.gateway.catalog().versions();
            let mut notifications = Vec::new();
            if now.tools != self.announced.tools {
                notifications.push(ServerNotification::ToolListChangedNotification(
                    ToolListChangedNotification::default(),
                ));
            }
            if now.prompts != self.announced.prompts {
                notifications.push(ServerNotification::PromptListChangedNotification(
                    PromptListChangedNotification::default(),
                ));
            }
            if now.resources != self.announced.resources {
                notifications.push(ServerNotification::ResourceListChangedNotification(
                    ResourceListChangedNotification::default(),
                ));
            }
            self.announced = now;
            if !notifications.is_empty() {
                return Some(notifications);
            }
        }
    }
}

/// Sends a session's own notifications on its peer (list changes, and whatever arrives in
/// `outbox`, such as resource updates) until `stop` is cancelled or the client is gone.
pub fn spawn_notifier(
    gateway: Arc<Gateway>,
    peer: Peer<RoleServer>,
    mut outbox: mpsc::Receiver<ServerNotification>,
    stop: CancellationToken,
) {
    let mut lists = ListWatcher::new(gateway);
    tokio::spawn(async move {
        loop {
            let notifications = tokio::select! {
                _ = stop.cancelled() => return,
                changed = lists.changed() => match changed {
                    Some(notifications) => notifications,
                    None => return,
                },
                Some(notification) = outbox.recv() => vec![notification],
            };
            for notification in notifications {
                if peer.send_notification(notification).await.is_err() {
                    return;
                }
            }
        }
    });
}
