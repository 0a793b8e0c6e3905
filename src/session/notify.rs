//! Notifications Switchyard sends to clients on its own: list changes when the catalog changes
//! (to every session, and to each `subscriptions/listen` request).
//!
//! A burst of catalog rebuilds (several upstreams coming up at once, an upstream announcing many
//! changes) yields one notification per changed list, after a short quiet period.

use std::{
    sync::{Arc, Weak},
    time::Duration,
};

use bytes::Bytes;
use rmcp::model::{
    PromptListChangedNotification, ResourceListChangedNotification, ServerNotification,
    ToolListChangedNotification,
};
use tokio::{sync::watch, time::Instant};
use tokio_util::sync::CancellationToken;

use super::SessionTable;
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
        let announced = gateway.live().catalog.versions();
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
            let now = self.settled().await?;
            let notifications = notifications(&self.announced, &now);
            self.announced = now;
            if !notifications.is_empty() {
                return Some(notifications);
            }
        }
    }

    /// Waits for the catalog to change and the burst to settle; the lists' versions then.
    /// `None` when the gateway is gone.
    pub async fn settled(&mut self) -> Option<ListVersions> {
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
        Some(self.gateway.live().catalog.versions())
    }
}

/// A notification for each list whose version differs between `announced` and `now`.
pub fn notifications(announced: &ListVersions, now: &ListVersions) -> Vec<ServerNotification> {
    let mut notifications = Vec::new();
    if now.tools != announced.tools {
        notifications.push(ServerNotification::ToolListChangedNotification(
            ToolListChangedNotification::default(),
        ));
    }
    if now.prompts != announced.prompts {
        notifications.push(ServerNotification::PromptListChangedNotification(
            PromptListChangedNotification::default(),
        ));
    }
    if now.resources != announced.resources {
        notifications.push(ServerNotification::ResourceListChangedNotification(
            ResourceListChangedNotification::default(),
        ));
    }
    notifications
}

/// Tells every session when the catalog's lists change (after a burst settles), on its
/// standalone stream, until `shutdown` or until the table is gone.
pub fn spawn_list_notifier(
    gateway: Arc<Gateway>,
    sessions: Weak<SessionTable>,
    shutdown: CancellationToken,
) {
    let mut lists = ListWatcher::new(gateway);
    tokio::spawn(async move {
        loop {
            let now = tokio::select! {
                _ = shutdown.cancelled() => return,
                settled = lists.settled() => match settled {
                    Some(now) => now,
                    None => return,
                },
            };
            let Some(sessions) = sessions.upgrade() else {
                return;
            };
            for session in sessions.sessions() {
                // A session hears of the changes since it last heard, or since it began.
                let announced = session.announce_lists(now);
                for notification in notifications(&announced, &now) {
                    if let Some(message) = message(&notification) {
                        let _ = session.home().outlet.offer(message);
                    }
                }
            }
        }
    });
}

/// The JSON-RPC message of a list change (one of three, the same bytes for every session).
fn message(notification: &ServerNotification) -> Option<Bytes> {
    Some(Bytes::from_static(match notification {
        ServerNotification::ToolListChangedNotification(_) => {
            br#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#
        }
        ServerNotification::PromptListChangedNotification(_) => {
            br#"{"jsonrpc":"2.0","method":"notifications/prompts/list_changed"}"#
        }
        ServerNotification::ResourceListChangedNotification(_) => {
            br#"{"jsonrpc":"2.0","method":"notifications/resources/list_changed"}"#
        }
        _ => return None,
    }))
}
