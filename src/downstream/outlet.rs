//! Where messages for a client go: the response stream of one of its requests, or its
//! session's standalone stream (the one a client opens with GET), which keeps what is sent to it
//! before the client opens it.

use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;
use tokio::sync::mpsc;

use super::{
    Closed,
    pipe::{PipeSender, Refused},
    shared_stream::SharedStream,
};

/// Where messages for one client go. Each message is one JSON-RPC message as JSON text.
#[derive(Clone)]
pub enum Outlet {
    /// The response stream of the request being served; it ends with the request's answer.
    /// What still concerns the request after that (an upstream giving up on what it asked, a
    /// URL elicitation completing) goes to the session's stream, if there is a session.
    Request {
        stream: PipeSender,
        session: Option<Arc<Standalone>>,
    },
    /// The session's standalone stream, for what is sent outside any request.
    Session(Arc<Standalone>),
}

impl Outlet {
    /// Sends `message`, waiting for room if the client reads slowly.
    pub async fn send(&self, message: Bytes) -> Result<(), Closed> {
        match self {
            Outlet::Request { stream, session } => match stream.send(message).await {
                Ok(()) => Ok(()),
                Err(message) => match session {
                    Some(session) => session.send(message).await,
                    None => Err(Closed),
                },
            },
            Outlet::Session(standalone) => standalone.send(message).await,
        }
    }

    /// Sends `message` if there is room now; a notification a slow client cannot take is
    /// dropped rather than holding up the upstream it came from.
    pub fn offer(&self, message: Bytes) -> Result<(), Closed> {
        let sent = match self {
            Outlet::Request { stream, session } => match stream.try_send(message) {
                Ok(()) => Ok(()),
                Err(Refused::Full(message)) => Err(mpsc::error::TrySendError::Full(message)),
                Err(Refused::Gone(message)) => match session {
                    Some(session) => session.offer(message),
                    None => Err(mpsc::error::TrySendError::Closed(message)),
                },
            },
            Outlet::Session(standalone) => standalone.offer(message),
        };
        match sent {
            Ok(()) => Ok(()),
            Err(mpsc::error::TrySendError::Full(_)) => {
                tracing::debug!("a client is not reading its stream; a notification was dropped");
                Ok(())
            }
            Err(mpsc::error::TrySendError::Closed(_)) => Err(Closed),
        }
    }
}

/// Messages kept for a session while it has no standalone stream open (the client opens it
/// just after `initialize`, and may be slower than the first thing sent on it).
const BACKLOG: usize = 64;
/// Streams opened while one is live get only keep-alives; at most this many are kept open.
const MAX_SHADOWS: usize = 32;
/// Messages buffered per standalone stream.
const STREAM_CAPACITY: usize = 64;

/// A session's standalone stream: the one the client opened with GET, and until it does, the
/// messages waiting for it.
#[derive(Default)]
pub struct Standalone {
    /// Held only to look at or change the state, never across an await.
    state: Mutex<StandaloneState>,
    /// With a shared store: the store keeps the stream's events, and this replica's stream
    /// reads them from there (the local state then holds nothing).
    shared: OnceLock<Arc<SharedStream>>,
}

#[derive(Default)]
struct StandaloneState {
    live: Option<mpsc::Sender<Bytes>>,
    backlog: std::collections::VecDeque<Bytes>,
    /// Senders of streams opened while another was live; they carry nothing.
    shadows: Vec<mpsc::Sender<Bytes>>,
    closed: bool,
}

/// A standalone stream just opened.
pub enum Attached {
    /// The session's stream, starting with what waited for it.
    Live(mpsc::Receiver<Bytes>),
    /// A second stream while the first is live: it stays open and quiet.
    Shadow(mpsc::Receiver<Bytes>),
    /// The session has ended.
    Closed,
}

impl Standalone {
    /// From now on, the stream's events are kept in a shared store.
    pub fn share(&self, shared: Arc<SharedStream>) {
        let _ = self.shared.set(shared);
    }

    /// The shared side of the stream, if a shared store keeps its events.
    pub fn shared(&self) -> Option<&Arc<SharedStream>> {
        self.shared.get()
    }

    /// Opens a stream for the session's client.
    pub fn attach(&self) -> Attached {
        let mut state = self.lock();
        if state.closed {
            return Attached::Closed;
        }
        let (sender, receiver) = mpsc::channel(STREAM_CAPACITY);
        if state.live.as_ref().is_some_and(|live| !live.is_closed()) {
            if state.shadows.len() == MAX_SHADOWS {
                state.shadows.remove(0);
            }
            state.shadows.retain(|shadow| !shadow.is_closed());
            state.shadows.push(sender);
            return Attached::Shadow(receiver);
        }
        while let Some(waiting) = state.backlog.pop_front() {
            if let Err(mpsc::error::TrySendError::Full(_)) = sender.try_send(waiting) {
                tracing::debug!("a client's backlog exceeds its stream; a message was dropped");
            }
        }
        state.live = Some(sender);
        Attached::Live(receiver)
    }

    /// Whether a stream is open now.
    pub fn is_open(&self) -> bool {
        if let Some(shared) = self.shared() {
            return shared.is_open();
        }
        self.lock()
            .live
            .as_ref()
            .is_some_and(|live| !live.is_closed())
    }

    /// Ends every stream of the session, for good.
    pub fn close_all(&self) {
        if let Some(shared) = self.shared() {
            shared.close();
        }
        let mut state = self.lock();
        state.closed = true;
        state.live = None;
        state.shadows.clear();
        state.backlog.clear();
    }

    /// The live stream's sender; or, with none, `message` goes to the backlog.
    fn sender_or_keep(&self, message: Bytes) -> Result<(mpsc::Sender<Bytes>, Bytes), ()> {
        let mut state = self.lock();
        if let Some(live) = state.live.as_ref().filter(|live| !live.is_closed()) {
            return Ok((live.clone(), message));
        }
        state.live = None;
        // The same message twice (a list change announced again) need not wait twice.
        if !state.closed && !state.backlog.contains(&message) {
            if state.backlog.len() == BACKLOG {
                state.backlog.pop_front();
            }
            state.backlog.push_back(message);
        }
        Err(())
    }

    async fn send(&self, message: Bytes) -> Result<(), Closed> {
        if let Some(shared) = self.shared() {
            if self.lock().closed {
                return Err(Closed);
            }
            return shared.send(message).await;
        }
        match self.sender_or_keep(message) {
            Ok((sender, message)) => sender.send(message).await.map_err(|_| Closed),
            Err(()) if self.lock().closed => Err(Closed),
            Err(()) => Ok(()),
        }
    }

    fn offer(&self, message: Bytes) -> Result<(), mpsc::error::TrySendError<Bytes>> {
        if let Some(shared) = self.shared() {
            if self.lock().closed {
                return Err(mpsc::error::TrySendError::Closed(message));
            }
            shared.offer(message);
            return Ok(());
        }
        match self.sender_or_keep(message) {
            Ok((sender, message)) => sender.try_send(message),
            Err(()) => Ok(()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, StandaloneState> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
