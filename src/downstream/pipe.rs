//! The messages of one request on their way to its reply: a small bounded queue from whatever
//! serves the request (the router, the relay, rmcp's handler) to the reply that streams them.
//! Lighter than a general channel, for it is made for every request and most requests send
//! nothing through it: one small allocation, and none more until a message is queued.

use std::{
    collections::VecDeque,
    sync::{Arc, Mutex},
    task::{Context, Poll, Waker},
};

use bytes::Bytes;
use tokio::sync::Notify;

/// A queue of at most `capacity` messages, and its two ends.
pub fn pipe(capacity: usize) -> (PipeSender, PipeReceiver) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            queue: VecDeque::new(),
            reader: None,
            senders: 1,
            receiver_gone: false,
        }),
        room: Notify::new(),
        capacity,
    });
    (PipeSender(shared.clone()), PipeReceiver(shared))
}

struct Shared {
    /// Held only to look at or change the queue, never across an await.
    state: Mutex<State>,
    /// Woken when a message is taken, for senders waiting for room.
    room: Notify,
    capacity: usize,
}

struct State {
    queue: VecDeque<Bytes>,
    reader: Option<Waker>,
    senders: usize,
    receiver_gone: bool,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Why a message could not be queued now; it comes back.
#[derive(Debug)]
pub enum Refused {
    Full(Bytes),
    /// The reply is gone (the client went away, or the request was answered).
    Gone(Bytes),
}

/// The end that queues messages. Clones are more senders of the same queue.
pub struct PipeSender(Arc<Shared>);

impl PipeSender {
    /// Queues `message`, waiting for room; back if the reply is gone.
    pub async fn send(&self, message: Bytes) -> Result<(), Bytes> {
        let mut message = message;
        loop {
            let room = self.0.room.notified();
            tokio::pin!(room);
            // Registered before looking, so that room made meanwhile is not missed.
            room.as_mut().enable();
            match self.try_send(message) {
                Ok(()) => return Ok(()),
                Err(Refused::Gone(back)) => return Err(back),
                Err(Refused::Full(back)) => message = back,
            }
            room.await;
        }
    }

    /// Queues `message` if there is room now.
    pub fn try_send(&self, message: Bytes) -> Result<(), Refused> {
        let reader = {
            let mut state = self.0.lock();
            if state.receiver_gone {
                return Err(Refused::Gone(message));
            }
            if state.queue.len() >= self.0.capacity {
                return Err(Refused::Full(message));
            }
            state.queue.push_back(message);
            state.reader.take()
        };
        if let Some(reader) = reader {
            reader.wake();
        }
        Ok(())
    }
}

impl Clone for PipeSender {
    fn clone(&self) -> Self {
        self.0.lock().senders += 1;
        Self(self.0.clone())
    }
}

impl Drop for PipeSender {
    fn drop(&mut self) {
        let reader = {
            let mut state = self.0.lock();
            state.senders -= 1;
            (state.senders == 0).then(|| state.reader.take()).flatten()
        };
        // The last sender gone: a waiting reader learns the queue has ended.
        if let Some(reader) = reader {
            reader.wake();
        }
    }
}

/// The end the reply reads from.
pub struct PipeReceiver(Arc<Shared>);

impl PipeReceiver {
    /// The next message; `None` once every sender is gone and the queue is empty.
    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        let mut state = self.0.lock();
        if let Some(message) = state.queue.pop_front() {
            drop(state);
            self.0.room.notify_one();
            return Poll::Ready(Some(message));
        }
        if state.senders == 0 {
            return Poll::Ready(None);
        }
        match &state.reader {
            Some(waker) if waker.will_wake(cx.waker()) => {}
            _ => state.reader = Some(cx.waker().clone()),
        }
        Poll::Pending
    }

    pub async fn recv(&mut self) -> Option<Bytes> {
        std::future::poll_fn(|cx| self.poll_recv(cx)).await
    }

    /// The next message, if one is queued now.
    pub fn try_recv(&mut self) -> Option<Bytes> {
        let message = self.0.lock().queue.pop_front();
        if message.is_some() {
            self.0.room.notify_one();
        }
        message
    }
}

impl Drop for PipeReceiver {
    fn drop(&mut self) {
        let mut state = self.0.lock();
        state.receiver_gone = true;
        state.queue.clear();
        drop(state);
        self.0.room.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn messages_arrive_in_order_and_the_end_is_seen() {
        let (sender, mut receiver) = pipe(2);
        let other = sender.clone();
        sender.send(Bytes::from_static(b"1")).await.unwrap();
        other.send(Bytes::from_static(b"2")).await.unwrap();
        assert!(matches!(
            other.try_send(Bytes::from_static(b"3")),
            Err(Refused::Full(_))
        ));
        assert_eq!(receiver.recv().await.unwrap(), "1");
        let waiting = tokio::spawn(async move { other.send(Bytes::from_static(b"3")).await });
        assert_eq!(receiver.recv().await.unwrap(), "2");
        waiting.await.unwrap().unwrap();
        assert_eq!(receiver.recv().await.unwrap(), "3");
        drop(sender);
        assert_eq!(receiver.recv().await, None);
    }

    #[tokio::test]
    async fn senders_learn_the_reply_is_gone() {
        let (sender, receiver) = pipe(1);
        sender.send(Bytes::from_static(b"1")).await.unwrap();
        let waiting = tokio::spawn({
            let sender = sender.clone();
            async move { sender.send(Bytes::from_static(b"2")).await }
        });
        tokio::task::yield_now().await;
        drop(receiver);
        assert!(waiting.await.unwrap().is_err());
        assert!(matches!(
            sender.try_send(Bytes::new()),
            Err(Refused::Gone(_))
        ));
    }
}
