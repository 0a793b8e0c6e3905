//! What an upstream sends, taken as it comes off the wire: a transport wrapper that forwards
//! progress in arrival order and notes, on messages that carry no stream marker, who they
//! concern at that moment. Messages the raw path read on its own streams (requests for the
//! client, notifications) are injected here, so that rmcp handles them like the rest.
//!
//! rmcp hands every notification and request to a task of its own but delivers a response to
//! its waiting request directly. So a response could overtake the last progress of its request
//! (which would then be dropped, the request being no longer registered), and by the time a log
//! message's task runs, the request it came with may have ended and another begun. Forwarding
//! progress here, before the next message is read, keeps it ahead of the result; an `Arrival`
//! on each unmarked message keeps its attribution to the moment it arrived.

use std::{sync::Arc, time::Duration};

use rmcp::{
    RoleClient,
    model::{GetExtensions, ServerJsonRpcMessage, ServerNotification},
    service::{InboundStreamOrigin, TxJsonRpcMessage},
    transport::Transport,
};
use tokio::{sync::mpsc, task::JoinHandle, time::Instant};

use super::relay::{Relay, forward_progress};

/// The longest the next message waits for progress to reach a client: a slow client must not
/// hold up everyone else's answers on a shared connection.
const DELIVERY_BUDGET: Duration = Duration::from_millis(50);

/// `inner`, with progress taken off and forwarded in order, and unmarked messages attributed.
pub struct Inbound<T> {
    inner: T,
    relay: Arc<Relay>,
    /// Messages the raw path received for rmcp to handle.
    injected: mpsc::UnboundedReceiver<ServerJsonRpcMessage>,
    /// Progress on its way to a client, and until when the next message waits for it. Kept
    /// here so that a `receive` dropped while waiting resumes the same wait.
    delivering: Option<(JoinHandle<()>, Instant)>,
    /// The `tasks` capability `initialize` declares, if any (see `augmented`).
    declare: Option<serde_json::Value>,
}

impl<T> Inbound<T> {
    pub fn new(
        inner: T,
        relay: Arc<Relay>,
        injected: mpsc::UnboundedReceiver<ServerJsonRpcMessage>,
        declare: Option<serde_json::Value>,
    ) -> Self {
        Self {
            inner,
            relay,
            injected,
            delivering: None,
            declare,
        }
    }

    /// Waits (within its budget) for the progress last sent on its way.
    async fn settle_delivery(&mut self) {
        if let Some((delivery, deadline)) = &mut self.delivering {
            let _ = tokio::time::timeout_at(*deadline, delivery).await;
            self.delivering = None;
        }
    }

    fn forward(&mut self, params: rmcp::model::ProgressNotificationParam) {
        match self.relay.progress_target(&params.progress_token) {
            Some(target) => {
                let delivery = tokio::spawn(async move { forward_progress(&target, params).await });
                self.delivering = Some((delivery, Instant::now() + DELIVERY_BUDGET));
            }
            None => {
                let relay = self.relay.clone();
                tokio::spawn(async move { relay.forward_early_progress(params).await });
            }
        }
    }
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for Inbound<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let item = match &self.declare {
            Some(tasks) => super::augmented::declare(item, tasks),
            None => item,
        };
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<ServerJsonRpcMessage> {
        loop {
            self.settle_delivery().await;
            let message = tokio::select! {
                message = self.inner.receive() => message?,
                Some(message) = self.injected.recv() => message,
            };
            match message {
                ServerJsonRpcMessage::Notification(mut notification) => {
                    match notification.notification {
                        ServerNotification::ProgressNotification(progress) => {
                            self.forward(progress.params);
                            continue;
                        }
                        ServerNotification::TaskStatusNotification(status) => {
                            if let Ok(params) = serde_json::to_value(&status.params) {
                                self.relay.tasks.status(params);
                            }
                            continue;
                        }
                        ServerNotification::CustomNotification(custom)
                            if custom.method == "notifications/tasks/status" =>
                        {
                            if let Some(params) = custom.params {
                                self.relay.tasks.status(params);
                            }
                            continue;
                        }
                        _ => {}
                    }
                    let arrival = self.relay.arrival();
                    notification.notification.extensions_mut().insert(arrival);
                    return Some(ServerJsonRpcMessage::Notification(notification));
                }
                ServerJsonRpcMessage::Request(mut request) => {
                    let extensions = request.request.extensions_mut();
                    if extensions.get::<InboundStreamOrigin>().is_none() {
                        extensions.insert(self.relay.arrival());
                    }
                    return Some(ServerJsonRpcMessage::Request(request));
                }
                other => return Some(other),
            }
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}
