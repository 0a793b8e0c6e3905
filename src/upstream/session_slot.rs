//! Where a streamable-HTTP connection keeps its upstream session id: as rmcp's worker
//! negotiated it (and renegotiated, after the upstream lost the session), for the raw path's
//! requests to carry. With replicas, a connection may go on with a session another replica
//! opened: the slot then answers the worker's `initialize` itself, with what the upstream
//! said when that session was opened, and swallows the `initialized` notification that
//! follows, so the worker carries on with the session as if it had opened it.

use std::sync::{
    Mutex, OnceLock,
    atomic::{AtomicBool, Ordering},
};

use arc_swap::ArcSwapOption;
use http::HeaderValue;
use rmcp::{
    model::{
        ClientJsonRpcMessage, ClientNotification, ClientRequest, InitializeResult, JsonRpcMessage,
        ServerJsonRpcMessage, ServerPeerInfo, ServerResult,
    },
    transport::streamable_http_client::StreamableHttpPostResponse,
};
use serde::{Deserialize, Serialize};

/// An upstream session as replicas share it: its id, and what the upstream said when it was
/// opened.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct UpstreamSession {
    pub id: String,
    pub server: ServerPeerInfo,
}

type Renamed = Box<dyn Fn(&str) + Send + Sync>;

#[derive(Default)]
pub struct SessionSlot {
    id: ArcSwapOption<HeaderValue>,
    /// A session opened elsewhere, to go on with: taken by the worker's `initialize`.
    adopting: Mutex<Option<UpstreamSession>>,
    /// The adopted session's `initialize` was answered here: its `initialized` is not sent.
    answered: AtomicBool,
    /// Other replicas go on with the session: closing this connection does not end it.
    kept: AtomicBool,
    /// The upstream said it no longer knows the session.
    lost: AtomicBool,
    /// Told of each new id after the first (the worker re-initialized).
    renamed: OnceLock<Renamed>,
}

impl SessionSlot {
    /// A slot that goes on with `session` instead of opening one; closing it leaves the
    /// session to the replicas that share it.
    pub fn adopting(session: UpstreamSession) -> Self {
        let slot = Self::kept();
        *slot.lock() = Some(session);
        slot
    }

    /// A slot whose session, once opened, is shared with other replicas.
    pub fn kept() -> Self {
        let slot = Self::default();
        slot.kept.store(true, Ordering::Relaxed);
        slot
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<UpstreamSession>> {
        self.adopting
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Notes the session id a request of the worker carried or an answer named.
    pub fn observe(&self, id: Option<&str>) {
        let Some(id) = id else {
            return;
        };
        let current = self.id.load();
        if current
            .as_deref()
            .is_some_and(|known| known.as_bytes() == id.as_bytes())
        {
            return;
        }
        if let Ok(value) = HeaderValue::from_str(id) {
            let had = self.id.swap(Some(std::sync::Arc::new(value)));
            if had.is_some()
                && let Some(renamed) = self.renamed.get()
            {
                renamed(id);
            }
        }
    }

    pub(super) fn get(&self) -> Option<std::sync::Arc<HeaderValue>> {
        self.id.load_full()
    }

    /// The session id in use, as text.
    pub fn id(&self) -> Option<String> {
        self.get()
            .and_then(|id| id.to_str().ok().map(str::to_owned))
    }

    /// Whether the session to adopt is still waiting for the worker (it was never used).
    pub fn still_adopting(&self) -> bool {
        self.lock().is_some()
    }

    /// Calls `renamed` with each id the worker renegotiates from now on.
    pub fn on_renamed(&self, renamed: impl Fn(&str) + Send + Sync + 'static) {
        let _ = self.renamed.set(Box::new(renamed));
    }

    /// From now on, closing the connection leaves the session to whoever else goes on with it
    /// (a task lives in it, which any replica may be asked about).
    pub fn keep(&self) {
        self.kept.store(true, Ordering::Relaxed);
    }

    /// From now on, closing the connection ends the session upstream (the client's session
    /// has ended).
    pub fn release(&self) {
        self.kept.store(false, Ordering::Relaxed);
    }

    pub fn is_kept(&self) -> bool {
        self.kept.load(Ordering::Relaxed)
    }

    /// Notes that the upstream no longer knows the session.
    pub fn lose(&self) {
        self.lost.store(true, Ordering::Relaxed);
    }

    /// The id of the session the upstream lost, if it did.
    pub fn lost_id(&self) -> Option<String> {
        self.lost
            .load(Ordering::Relaxed)
            .then(|| self.id())
            .flatten()
    }

    /// The answer to `message` that the slot gives itself: `initialize` and `initialized` of
    /// an adopted session; `None` for everything that goes upstream.
    pub fn answer_locally(
        &self,
        message: &ClientJsonRpcMessage,
    ) -> Option<StreamableHttpPostResponse> {
        match message {
            JsonRpcMessage::Request(request)
                if matches!(request.request, ClientRequest::InitializeRequest(_)) =>
            {
                let adopted = self.lock().take()?;
                let result = initialize_result(&adopted.server)?;
                self.answered.store(true, Ordering::Relaxed);
                self.observe(Some(&adopted.id));
                let answer = ServerJsonRpcMessage::response(
                    ServerResult::InitializeResult(result),
                    request.id.clone(),
                );
                Some(StreamableHttpPostResponse::Json(answer, Some(adopted.id)))
            }
            JsonRpcMessage::Notification(notification)
                if matches!(
                    notification.notification,
                    ClientNotification::InitializedNotification(_)
                ) && self.answered.swap(false, Ordering::Relaxed) =>
            {
                Some(StreamableHttpPostResponse::Accepted)
            }
            _ => None,
        }
    }
}

/// The `initialize` result `server` was read from (none without the server's identity).
fn initialize_result(server: &ServerPeerInfo) -> Option<InitializeResult> {
    serde_json::to_value(server)
        .and_then(serde_json::from_value)
        .ok()
}
