//! `subscriptions/listen` (2026-07-28): one long-lived request that carries the list-change
//! notifications and resource updates a client asked for, fanned in from every upstream.

use std::sync::Arc;

use rmcp::{ErrorData, service::SubscriptionContext};
use tokio::sync::mpsc;

use super::notify::ListWatcher;
use crate::{
    downstream::Downstream,
    gateway::{Gateway, OUTBOX_CAPACITY, Outbox},
    request::Request,
};

/// Serves one listen request until the client ends it.
pub async fn serve(
    gateway: &Arc<Gateway>,
    request: &Request,
    downstream: &Downstream,
    context: SubscriptionContext,
) -> Result<(), ErrorData> {
    let (outbox, mut updates) = mpsc::channel(OUTBOX_CAPACITY);
    let mut subscriptions = Vec::new();
    let uris = context
        .accepted()
        .resource_subscriptions
        .clone()
        .unwrap_or_default();
    let (live, view) = (&request.live, request.view());
    for uri in uris {
        let (owner, original, _) = live.resolve_uri(view, &uri)?;
        let upstream = live.serving_upstream(&owner)?;
        let subscription = gateway
            .subscriptions()
            .subscribe(
                &upstream,
                &downstream.principal,
                original,
                uri,
                Outbox::Channel(outbox.clone()),
            )
            .await?;
        subscriptions.push(subscription);
    }
    let mut lists = ListWatcher::new(gateway.clone());
    loop {
        let notifications = tokio::select! {
            _ = context.cancelled() => break,
            changed = lists.changed() => match changed {
                Some(notifications) => notifications,
                None => break,
            },
            Some(update) = updates.recv() => vec![update],
        };
        for notification in notifications {
            // The sink drops kinds the client did not ask for; only a closed stream ends it.
            if let Err(rmcp::service::SubscriptionSendError::SubscriptionClosed) =
                context.sink().send(notification).await
            {
                return Ok(());
            }
        }
    }
    drop(subscriptions);
    Ok(())
}
