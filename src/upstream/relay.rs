//! The relay: what an upstream sends back while serving a request (progress, log messages,
//! requests for sampling, elicitation or roots) goes to the downstream request that caused it.
//!
//! Each connection has one `Relay`. The router registers every request it forwards under the
//! upstream request id and progress token rmcp assigned; the connection's handler looks them up.
//! Over streamable HTTP an upstream request names the request whose stream it came on, so even a
//! shared connection routes exactly; over stdio there is no such marker, and a request can only be
//! routed when one request is in flight (or the connection belongs to one session), judged as it
//! comes off the wire (see `inbound`).

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use arc_swap::ArcSwapOption;
use dashmap::DashMap;
use foldhash::fast::RandomState;
use rmcp::{
    RoleClient,
    model::{
        CancelledNotification, CancelledNotificationParam, ClientNotification,
        ProgressNotification, ProgressNotificationParam, ProgressToken, RequestId,
        ServerJsonRpcMessage, ServerNotification,
    },
    service::{InboundStreamOrigin, Peer},
};
use tokio::sync::{Notify, futures::Notified};

use crate::downstream::Downstream;

/// Who an upstream message without a stream marker concerns, as judged when it came off the
/// wire (by the time rmcp's task for it runs, the requests in flight may have changed).
#[derive(Clone)]
pub struct Arrival {
    /// The one request in flight then, if there was exactly one.
    only: Option<Arc<Downstream>>,
    in_flight: usize,
}

impl Arrival {
    /// How many requests were in flight on the connection.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }
}

/// The in-flight requests of one upstream connection.
pub struct Relay {
    requests: DashMap<RequestId, Arc<Downstream>, RandomState>,
    /// Every request in flight by its upstream progress token (rmcp gives each one a token).
    progress: DashMap<ProgressToken, Tracked>,
    /// The session a per-client connection belongs to.
    home: Option<Arc<Downstream>>,
    /// On such a connection: the resources that session subscribed to on it, as the upstream
    /// knows them, with the URI its client used.
    subscribed: DashMap<String, String>,
    /// URL-mode elicitations passed to clients, by elicitation id: where their completion
    /// notification goes, and since when (entries are dropped after `ELICITATION_LIFETIME`).
    elicitations: DashMap<String, (Arc<Downstream>, Instant)>,
    /// On a shared connection: the request that ended last, and when. A message without a
    /// marker that arrives just after its request ended (it took another way than the answer)
    /// is still that request's.
    recent: ArcSwapOption<Finished>,
    /// The tasks created through the connection.
    pub tasks: super::TaskWatches,
    /// The tasks clients run for the upstream, as it asked.
    pub asked: super::asked::AskedTasks,
    /// When the relay was made, and milliseconds from then to the last request started or ended.
    epoch: Instant,
    last_active: AtomicU64,
}

/// A request's progress entry: who it is for, and how its waiter learns of progress.
struct Tracked {
    downstream: Arc<Downstream>,
    progressed: Arc<Notify>,
}

/// A request that ended, and when.
struct Finished {
    downstream: Arc<Downstream>,
    at: Instant,
}

/// How long after its request ended an unmarked message is still taken for that request's.
const RECENT_GRACE: Duration = Duration::from_millis(50);

/// How long to wait for a registration an upstream message refers to: the upstream may answer
/// before the router has registered what it just sent.
const REGISTRATION_GRACE: Duration = Duration::from_millis(20);
/// How long the completion of a URL-mode elicitation is awaited.
const ELICITATION_LIFETIME: Duration = Duration::from_secs(3600);

impl Relay {
    /// The relay of a connection shared by all sessions.
    pub fn shared() -> Arc<Self> {
        Self::with_home(None)
    }

    /// The relay of a connection that belongs to the session `home`.
    pub fn for_session(home: Arc<Downstream>) -> Arc<Self> {
        Self::with_home(Some(home))
    }

    fn with_home(home: Option<Arc<Downstream>>) -> Arc<Self> {
        Arc::new(Self {
            requests: DashMap::default(),
            progress: DashMap::new(),
            elicitations: DashMap::new(),
            home,
            subscribed: DashMap::new(),
            recent: ArcSwapOption::empty(),
            tasks: super::TaskWatches::default(),
            asked: Default::default(),
            epoch: Instant::now(),
            last_active: AtomicU64::new(0),
        })
    }

    fn touch(&self) {
        let now = self.epoch.elapsed().as_millis() as u64;
        self.last_active.fetch_max(now, Ordering::Relaxed);
    }

    /// How long since a request was last started or finished here.
    pub fn quiet_for(&self) -> Duration {
        let last = Duration::from_millis(self.last_active.load(Ordering::Relaxed));
        self.epoch.elapsed().saturating_sub(last)
    }

    /// Notes that the session of this connection subscribed to `original` on it, as
    /// `exposed`; false on a connection of no one session.
    pub fn note_subscription(&self, original: &str, exposed: &str) -> bool {
        if self.home.is_none() {
            return false;
        }
        self.subscribed
            .insert(original.to_owned(), exposed.to_owned());
        true
    }

    pub fn forget_subscription(&self, original: &str) {
        self.subscribed.remove(original);
    }

    /// Where an update of `original` goes, if this connection's session subscribed to it
    /// here: the session, and the URI its client used.
    pub fn subscriber(&self, original: &str) -> Option<(Arc<Downstream>, String)> {
        let home = self.home.as_ref()?;
        let exposed = self.subscribed.get(original)?;
        Some((home.clone(), exposed.clone()))
    }

    /// Whether the connection belongs to one session (whose client is one principal).
    pub fn is_per_session(&self) -> bool {
        self.home.is_some()
    }

    /// How many requests are in flight.
    pub fn in_flight(&self) -> usize {
        self.requests.len()
    }

    /// Records that upstream request `id` serves `downstream`, for what the upstream asks or
    /// tells during it; the entry goes with the returned guard.
    pub fn register_request(self: &Arc<Self>, id: RequestId, downstream: Arc<Downstream>) -> Entry {
        self.touch();
        self.requests.insert(id.clone(), downstream);
        Entry {
            relay: self.clone(),
            id,
        }
    }

    /// Records that upstream request `id` (with progress token `token`) serves `downstream`,
    /// until the returned registration is dropped. A registration dropped before `finish` means
    /// the downstream request was abandoned: the upstream is told to cancel.
    pub fn register(
        self: &Arc<Self>,
        peer: &Peer<RoleClient>,
        id: RequestId,
        token: ProgressToken,
        downstream: Arc<Downstream>,
    ) -> Registration {
        self.touch();
        let progressed = Arc::new(Notify::new());
        let tracked = Tracked {
            downstream: downstream.clone(),
            progressed: progressed.clone(),
        };
        self.progress.insert(token.clone(), tracked);
        self.requests.insert(id.clone(), downstream);
        Registration {
            relay: self.clone(),
            peer: peer.clone(),
            id: Some(id),
            progress: Some(token),
            progressed,
        }
    }

    /// The request progress token `token` belongs to, if it is registered; notes the progress
    /// (which extends the request's timeout).
    pub fn progress_target(&self, token: &ProgressToken) -> Option<Arc<Downstream>> {
        self.progress.get(token).map(|tracked| {
            tracked.progressed.notify_one();
            tracked.downstream.clone()
        })
    }

    /// Passes progress for a token that was not registered when it arrived, if its request
    /// registers within the grace period (the upstream answered before the router registered
    /// what it had just sent); otherwise it is late, or unknown, and dropped.
    pub async fn forward_early_progress(&self, params: ProgressNotificationParam) {
        let target = wait_for(|| self.progress_target(&params.progress_token)).await;
        if let Some(target) = target {
            forward_progress(&target, params).await;
        }
    }

    /// Who a message without a stream marker concerns, judged now.
    pub fn arrival(&self) -> Arrival {
        Arrival {
            only: self.only_in_flight(),
            in_flight: self.requests.len(),
        }
    }

    /// Who an upstream request (or notification) is for: the request whose stream it came on;
    /// without a marker, the only request in flight when it arrived; else the connection's
    /// session.
    pub async fn resolve(
        &self,
        origin: Option<&InboundStreamOrigin>,
        arrival: Option<&Arrival>,
    ) -> Option<Arc<Downstream>> {
        match (origin, arrival) {
            (Some(InboundStreamOrigin::OutboundRequest(id)), _) => {
                let found = wait_for(|| self.requests.get(id).map(|d| d.clone())).await;
                found.or_else(|| self.home.clone())
            }
            (Some(InboundStreamOrigin::Unassociated), _) => self.home.clone(),
            (
                None,
                Some(Arrival {
                    only: Some(only), ..
                }),
            ) => Some(only.clone()),
            // Nothing was in flight on a shared connection: the request that caused this may
            // be registering just now.
            (None, Some(Arrival { in_flight: 0, .. })) if self.home.is_none() => {
                wait_for(|| self.only_in_flight()).await
            }
            (None, Some(_)) => self.home.clone(),
            (None, None) => self.only_in_flight().or_else(|| self.home.clone()),
        }
    }

    /// Remembers that the URL-mode elicitation `id` went to `target`.
    pub fn elicitation_sent(&self, id: String, target: Arc<Downstream>) {
        self.elicitations
            .retain(|_, (_, since)| since.elapsed() < ELICITATION_LIFETIME);
        self.elicitations.insert(id, (target, Instant::now()));
    }

    /// The client a URL-mode elicitation went to, once it has completed.
    pub fn elicitation_completed(&self, id: &str) -> Option<Arc<Downstream>> {
        self.elicitations.remove(id).map(|(_, (target, _))| target)
    }

    /// The one request in flight, if there is exactly one; with none, the one that ended
    /// just now.
    fn only_in_flight(&self) -> Option<Arc<Downstream>> {
        match self.requests.len() {
            0 => self
                .recent
                .load()
                .as_ref()
                .filter(|finished| finished.at.elapsed() < RECENT_GRACE)
                .map(|finished| finished.downstream.clone()),
            1 => self
                .requests
                .iter()
                .next()
                .map(|entry| entry.value().clone()),
            _ => None,
        }
    }

    /// Removes request `id`; on a shared connection, remembers it as the one that ended last.
    fn finish(&self, id: &RequestId) {
        let removed = self.requests.remove(id);
        if let (Some((_, downstream)), None) = (removed, &self.home) {
            self.recent.store(Some(Arc::new(Finished {
                downstream,
                at: Instant::now(),
            })));
        }
        self.touch();
    }

    pub fn home(&self) -> Option<&Arc<Downstream>> {
        self.home.as_ref()
    }
}

/// Passes upstream progress to the client under the client's own token, if it asked for
/// progress.
pub async fn forward_progress(target: &Downstream, mut params: ProgressNotificationParam) {
    if let Some(token) = target.progress_token.clone() {
        params.progress_token = token;
        let notification =
            ServerNotification::ProgressNotification(ProgressNotification::new(params));
        send_notification(target, notification).await;
    }
}

/// Sends `notification` to the client of `target`, if it is still listening.
pub async fn send_notification(target: &Downstream, notification: ServerNotification) {
    let message = ServerJsonRpcMessage::notification(notification);
    match serde_json::to_vec(&message) {
        Ok(bytes) => {
            let _ = target.outlet.send(bytes.into()).await;
        }
        Err(error) => tracing::warn!(%error, "a notification for a client cannot be written"),
    }
}

/// Looks `find` up until it succeeds or the registration grace has passed: an upstream may answer
/// (with progress, say) before the router has registered the request it just sent.
async fn wait_for<T>(find: impl Fn() -> Option<T>) -> Option<T> {
    let deadline = tokio::time::Instant::now() + REGISTRATION_GRACE;
    loop {
        if let Some(found) = find() {
            return Some(found);
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// A forwarded request's entry in the relay; see `Relay::register`.
pub struct Registration {
    relay: Arc<Relay>,
    peer: Peer<RoleClient>,
    id: Option<RequestId>,
    progress: Option<ProgressToken>,
    progressed: Arc<Notify>,
}

impl Registration {
    /// The upstream answered: remove the entry without cancelling.
    pub fn finish(mut self) {
        self.remove();
    }

    /// Resolves at the next progress the upstream reports for this request (or at once if
    /// some came since the last wait).
    pub fn progressed(&self) -> Notified<'_> {
        self.progressed.notified()
    }

    /// Gives up on the request and tells the upstream to stop working on it, for `reason`.
    pub fn cancel(mut self, reason: &str) {
        self.cancel_upstream(reason);
    }

    fn remove(&mut self) -> Option<RequestId> {
        if let Some(token) = self.progress.take() {
            self.relay.progress.remove(&token);
        }
        let id = self.id.take()?;
        self.relay.finish(&id);
        Some(id)
    }

    fn cancel_upstream(&mut self, reason: &str) {
        let Some(id) = self.remove() else {
            return;
        };
        let notification = ClientNotification::CancelledNotification(CancelledNotification::new(
            CancelledNotificationParam::new(Some(id), Some(reason.to_owned())),
        ));
        let peer = self.peer.clone();
        tokio::spawn(async move {
            let _ = peer.send_notification(notification).await;
        });
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        // Abandoned (the client cancelled or went away): tell the upstream to stop working.
        self.cancel_upstream("cancelled by the client");
    }
}

/// A request's entry in the relay; see `Relay::register_request`.
pub struct Entry {
    relay: Arc<Relay>,
    id: RequestId,
}

impl Drop for Entry {
    fn drop(&mut self) {
        self.relay.finish(&self.id);
    }
}
