//! A session's standalone stream when a shared store keeps its events: every message for it
//! goes to the store, and the replica that holds the client's stream (whichever it is) reads
//! them from there, in order, under the store's ids. A client that reconnects to any replica
//! with `Last-Event-ID` gets what it missed; one without gets what no stream was sent yet.
//! If the store cannot take a message, it goes to this replica's own stream, if it has one,
//! so that nothing waits on Redis.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use bytes::Bytes;
use tokio::sync::mpsc;

use super::Closed;
use crate::{
    store::{Store, is_event_id},
    wire::sse,
};

/// Events buffered for the live stream.
const STREAM_CAPACITY: usize = 64;

pub struct SharedStream {
    store: Arc<Store>,
    /// The session's hash: its name in the store.
    hash: String,
    /// How long events are kept without news of the session.
    ttl: Duration,
    /// The stream open on this replica: whole SSE events, ids included.
    live: Mutex<Option<mpsc::Sender<Bytes>>>,
    /// The last event sent to the live stream; held while reading the store, so that reads
    /// run one at a time and in order.
    delivered: tokio::sync::Mutex<Option<String>>,
}

impl SharedStream {
    pub fn new(store: Arc<Store>, hash: String, ttl: Duration) -> Arc<Self> {
        Arc::new(Self {
            store,
            hash,
            ttl,
            live: Mutex::default(),
            delivered: tokio::sync::Mutex::default(),
        })
    }

    /// The session's hash: what the store knows it by.
    pub fn hash(&self) -> &str {
        &self.hash
    }

    /// The store the session is shared in.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// How long what the store keeps of the session lasts without news of it.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// Keeps `message` in the store for whichever replica holds the stream.
    pub async fn send(&self, message: Bytes) -> Result<(), Closed> {
        match self
            .store
            .append_event(&self.hash, &message, self.ttl)
            .await
        {
            Ok(()) => Ok(()),
            Err(error) => {
                tracing::debug!(%error, "a stream event not kept in the shared store; sent on the stream here, if any");
                match self.live_sender() {
                    Some(live) => live
                        .send(sse::message_event(None, &message))
                        .await
                        .map_err(|_| Closed),
                    None => Ok(()),
                }
            }
        }
    }

    /// `send`, without waiting for it.
    pub fn offer(self: &Arc<Self>, message: Bytes) {
        let stream = self.clone();
        tokio::spawn(async move {
            let _ = stream.send(message).await;
        });
    }

    /// Opens the client's stream here: from the event after `last_event_id` if the client
    /// gave one, else after the last one any stream was sent. A stream already open here
    /// ends (its client has come back on this one).
    pub fn attach(self: &Arc<Self>, last_event_id: Option<&str>) -> mpsc::Receiver<Bytes> {
        let (sender, receiver) = mpsc::channel(STREAM_CAPACITY);
        *self.lock_live() = Some(sender);
        let start = last_event_id
            .filter(|id| is_event_id(id))
            .map(str::to_owned);
        let stream = self.clone();
        tokio::spawn(async move {
            let mut delivered = stream.delivered.lock().await;
            *delivered = match start {
                Some(id) => Some(id),
                None => stream.store.events_seen(&stream.hash).await.ok().flatten(),
            };
            stream.pull_locked(&mut delivered).await;
        });
        receiver
    }

    /// Reads what the store has that the live stream was not sent (there is news of it).
    pub fn pull(self: &Arc<Self>) {
        if !self.is_open() {
            return;
        }
        let stream = self.clone();
        tokio::spawn(async move {
            let mut delivered = stream.delivered.lock().await;
            stream.pull_locked(&mut delivered).await;
        });
    }

    async fn pull_locked(&self, delivered: &mut Option<String>) {
        let Some(live) = self.live_sender() else {
            return;
        };
        let events = match self
            .store
            .events_after(&self.hash, delivered.as_deref())
            .await
        {
            Ok(events) => events,
            Err(error) => {
                tracing::warn!(%error, "cannot read a session's stream events");
                return;
            }
        };
        let Some(last) = events.last().map(|event| event.id.clone()) else {
            return;
        };
        for event in events {
            if live
                .send(sse::message_event(Some(&event.id), &event.message))
                .await
                .is_err()
            {
                return;
            }
            *delivered = Some(event.id);
        }
        let _ = self
            .store
            .set_events_seen(&self.hash, &last, self.ttl)
            .await;
    }

    /// Whether a stream is open here.
    pub fn is_open(&self) -> bool {
        self.lock_live()
            .as_ref()
            .is_some_and(|live| !live.is_closed())
    }

    /// Ends the stream open here, if any.
    pub fn close(&self) {
        self.lock_live().take();
    }

    fn live_sender(&self) -> Option<mpsc::Sender<Bytes>> {
        self.lock_live()
            .as_ref()
            .filter(|live| !live.is_closed())
            .cloned()
    }

    fn lock_live(&self) -> std::sync::MutexGuard<'_, Option<mpsc::Sender<Bytes>>> {
        self.live
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
