//! Progress in arrival order: a transport wrapper that passes an upstream's progress
//! notifications on as they come off the wire, before the next message is read.
//!
//! rmcp hands every notification to a task of its own but delivers a response to its waiting
//! request directly, so a response could overtake the last progress notifications of its request,
//! which would then be dropped (the request is no longer registered). Forwarding progress here,
//! in order, keeps it ahead of the result.

use std::sync::Arc;

use rmcp::{
    RoleClient,
    model::{ServerJsonRpcMessage, ServerNotification},
    service::TxJsonRpcMessage,
    transport::Transport,
};

use super::relay::Relay;

/// `inner`, with progress for registered requests taken off and forwarded in order.
pub struct ProgressInOrder<T> {
    inner: T,
    relay: Arc<Relay>,
}

impl<T> ProgressInOrder<T> {
    pub fn new(inner: T, relay: Arc<Relay>) -> Self {
        Self { inner, relay }
    }
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for ProgressInOrder<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<ServerJsonRpcMessage> {
        loop {
            let message = self.inner.receive().await?;
            let ServerJsonRpcMessage::Notification(notification) = message else {
                return Some(message);
            };
            let ServerNotification::ProgressNotification(progress) = notification.notification
            else {
                return Some(ServerJsonRpcMessage::Notification(notification));
            };
            self.relay.forward_progress(progress.params).await;
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}
