//! Client sessions, and the serving of one client request.
//!
//! A client that `initialize`s gets a `Session`: who it is and what it can do, its log level,
//! its own upstream sessions (opened on first use, closed with it), its resource subscriptions,
//! its standalone stream, and the requests sent to it awaiting an answer. A 2026-07-28 client has
//! no session; each of its requests stands alone. `serve` answers a request of either: the hot
//! methods on the raw path, lists from the catalog's prepared pages, the rest through rmcp's
//! typed handler (`handler`).

// resources/subscribe and logging/setLevel are legacy-only (deprecated), but still served.
#![allow(deprecated)]

mod approve;
mod audited;
mod cached;
mod guarded;
mod handler;
mod id;
mod inlined;
mod listen;
mod modern;
mod notify;
mod parked;
mod screened;
mod search;
mod serve;
mod subscribed;
mod table;
mod takeover;
#[cfg(test)]
mod tests;
mod typed;
mod upstreams;

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
};

use foldhash::fast::RandomState;
use rmcp::model::{ClientCapabilities, InitializeRequestParams, ProtocolVersion};
use tokio_util::sync::CancellationToken;

pub use handler::{announce_tasks, negotiate};
pub use id::{SessionIds, Ticket};
pub use modern::{has_modern_meta, meta_version};
pub use notify::{ListWatcher, spawn_list_notifier};
pub use parked::Parked;
pub use search::recall_found;
pub use serve::{Client, Served, serve};
pub use table::{SessionTable, TableEars};
pub use takeover::spawn_takeover;
pub use upstreams::{SessionUpstreams, Source};

use crate::{
    catalog::{Features, ListVersions},
    downstream::{Asks, Downstream, LogLevel, Outlet, SessionLogLevel, Standalone, TaskSupport},
    gateway::Subscription,
    policy::EndpointName,
    principal::Principal,
};

/// One client session.
pub struct Session {
    id: Arc<str>,
    /// How the client introduced itself, with the protocol version agreed.
    client: InitializeRequestParams,
    version: ProtocolVersion,
    /// The session's own traffic: what its upstream sessions send outside any request goes to
    /// its standalone stream.
    home: Arc<Downstream>,
    upstreams: SessionUpstreams,
    /// The resources it subscribed to, by the URI it used. Held only to insert or remove.
    subscriptions: Mutex<HashMap<String, Subscription>>,
    /// Numbers its request streams, for their event ids.
    streams: AtomicU64,
    /// Its requests in flight by JSON-RPC id (as JSON text), so that `notifications/cancelled`
    /// can stop one. Held only to insert or remove.
    in_flight: Mutex<HashMap<Arc<str>, CancellationToken, RandomState>>,
    /// When it last made a request (milliseconds on its table's clock).
    last_active: AtomicU64,
    /// The catalog's list versions it was last told of (tools, prompts, resources).
    lists: [AtomicU64; 3],
    /// Cancelled when the session ends: stops its requests and its streams.
    closed: CancellationToken,
    /// When the client initialized it.
    opened: std::time::SystemTime,
    /// With tool search: the tools its client found, which its own tool list shows (by the
    /// name clients call them), oldest first, at most `search::MAX_FOUND`.
    found: Mutex<Vec<Arc<str>>>,
}

/// Eight hex digits of the SHA-256 of a session id: enough to tell sessions apart in logs and
/// the admin API, useless to take one over.
pub fn short_hash(id: &str) -> String {
    let mut hash = crate::store::session_hash(id);
    hash.truncate(8);
    hash
}

impl Session {
    /// A session for the client that sent `client`, speaking `version`, for `principal` at
    /// `endpoint`.
    pub fn new(
        id: Arc<str>,
        (mut client, tasks): (InitializeRequestParams, TaskSupport),
        version: ProtocolVersion,
        principal: Principal,
        endpoint: EndpointName,
        now: u64,
        lists: ListVersions,
    ) -> Arc<Self> {
        client.protocol_version = version.clone();
        let log_level = Arc::new(SessionLogLevel::new());
        let home = Arc::new(Downstream {
            outlet: Outlet::Session(Arc::new(Standalone::default())),
            asks: Some(Arc::new(Asks::new(tasks))),
            bridge: None,
            progress_token: None,
            capabilities: Arc::new(client.capabilities.clone()),
            principal,
            endpoint,
            log_level: LogLevel::Session(log_level.clone()),
        });
        Arc::new(Self {
            id,
            upstreams: SessionUpstreams::new(client.client_info.clone(), home.clone(), log_level),
            client,
            version,
            home,
            subscriptions: Mutex::default(),
            streams: AtomicU64::new(0),
            in_flight: Mutex::default(),
            last_active: AtomicU64::new(now),
            lists: [lists.tools, lists.prompts, lists.resources].map(AtomicU64::new),
            closed: CancellationToken::new(),
            opened: std::time::SystemTime::now(),
            found: Mutex::default(),
        })
    }

    /// The tools its client found with tool search.
    pub fn found(&self) -> Vec<Arc<str>> {
        self.found
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// Adds tools its client found; whether any was new to it. The oldest are forgotten past
    /// `search::MAX_FOUND`.
    pub fn find<'a>(&self, names: impl IntoIterator<Item = &'a str>) -> bool {
        let mut found = self
            .found
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let before = found.len();
        let mut grew = false;
        for name in names {
            if !found.iter().any(|known| &**known == name) {
                found.push(name.into());
                grew = true;
            }
        }
        let excess = found.len().saturating_sub(search::MAX_FOUND);
        found.drain(..excess);
        grew || found.len() != before
    }

    /// When the client initialized the session.
    pub fn opened(&self) -> std::time::SystemTime {
        self.opened
    }

    pub fn id(&self) -> &Arc<str> {
        &self.id
    }

    /// The version agreed at `initialize`.
    pub fn version(&self) -> &ProtocolVersion {
        &self.version
    }

    /// The client's `initialize` parameters (with the agreed version).
    pub fn client(&self) -> &InitializeRequestParams {
        &self.client
    }

    pub fn capabilities(&self) -> &Arc<ClientCapabilities> {
        &self.home.capabilities
    }

    pub fn principal(&self) -> &Principal {
        &self.home.principal
    }

    /// The session's own downstream side (its standalone stream, its pending requests).
    pub fn home(&self) -> &Arc<Downstream> {
        &self.home
    }

    /// The client features its client declared at `initialize`.
    pub fn features(&self) -> Features {
        let runs_tasks = (self.home.asks.as_ref()).is_some_and(|asks| asks.tasks.runs_any());
        Features::declared(&self.home.capabilities, runs_tasks)
    }

    /// Where answers to what the session's client was asked arrive.
    pub fn asks(&self) -> &Arc<Asks> {
        // Every session's home can be asked; see `new`.
        self.home.asks.as_ref().expect("a session can be asked")
    }

    /// What a shared store knows the session by (none without one).
    pub fn shared_hash(&self) -> Option<&str> {
        self.standalone().shared().map(|shared| shared.hash())
    }

    /// The session's standalone stream.
    pub fn standalone(&self) -> &Arc<Standalone> {
        match &self.home.outlet {
            Outlet::Session(standalone) => standalone,
            Outlet::Request { .. } => unreachable!("a session's home is its standalone stream"),
        }
    }

    pub fn upstreams(&self) -> &SessionUpstreams {
        &self.upstreams
    }

    /// The number of the next request stream.
    pub fn next_stream(&self) -> u64 {
        self.streams.fetch_add(1, Ordering::Relaxed)
    }

    /// Notes that the session is told of the lists at `now`; the versions it knew before.
    pub fn announce_lists(&self, now: ListVersions) -> ListVersions {
        let [tools, prompts, resources] = &self.lists;
        ListVersions {
            tools: tools.swap(now.tools, Ordering::Relaxed),
            prompts: prompts.swap(now.prompts, Ordering::Relaxed),
            resources: resources.swap(now.resources, Ordering::Relaxed),
        }
    }

    pub fn touch(&self, now: u64) {
        self.last_active.store(now, Ordering::Relaxed);
    }

    pub fn last_active(&self) -> u64 {
        self.last_active.load(Ordering::Relaxed)
    }

    /// Resolves when the session ends.
    pub async fn closed(&self) {
        self.closed.cancelled().await;
    }

    pub fn is_closed(&self) -> bool {
        self.closed.is_cancelled()
    }

    /// Ends the session: its requests in flight are cancelled, its streams end.
    pub fn close(&self) {
        self.closed.cancel();
        for token in self.lock_in_flight().values() {
            token.cancel();
        }
        self.standalone().close_all();
        self.asks().close();
    }

    /// Stops request `id` (JSON text), as the client asked with `notifications/cancelled`.
    pub fn cancel(&self, id: &str) {
        if let Some(token) = self.lock_in_flight().remove(id) {
            token.cancel();
        }
    }

    /// Registers request `id` as in flight until the returned guard goes.
    fn begin(self: &Arc<Self>, id: &str) -> InFlight {
        // A token of its own (not a child of `closed`, whose tree has a lock): `close`
        // cancels the ones in flight.
        let token = CancellationToken::new();
        if self.closed.is_cancelled() {
            token.cancel();
        }
        let id: Arc<str> = id.into();
        self.lock_in_flight().insert(id.clone(), token.clone());
        InFlight {
            session: self.clone(),
            id,
            token,
        }
    }

    /// The session's requests being answered now.
    pub fn in_flight_count(&self) -> usize {
        self.lock_in_flight().len()
    }

    fn lock_in_flight(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<Arc<str>, CancellationToken, RandomState>> {
        self.in_flight
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Whether this copy of the session holds resource subscriptions (its updates come from
    /// this replica).
    pub fn has_subscriptions(&self) -> bool {
        !self.subscribed().is_empty()
    }

    /// Passes `message` of the client to the session's copies on other replicas (nothing
    /// without a shared store).
    pub async fn relay(&self, store: &crate::store::Store, message: &[u8]) {
        let Some(hash) = self.shared_hash() else {
            return;
        };
        if let Err(error) = store.relay_message(hash, message).await {
            tracing::warn!(%error, "cannot pass a client's message to the other replicas");
        }
    }

    /// Another replica relayed `message` of the client: an answer to a request this replica
    /// sent, or an unsubscribe from a resource this replica's copy is subscribed to.
    pub fn relayed(&self, message: &[u8]) {
        match crate::wire::parse(message) {
            Ok(crate::wire::Message::Response { id, result }) => {
                self.asks().answer(id, Ok(result));
            }
            Ok(crate::wire::Message::Error {
                id: Some(id),
                error,
            }) => {
                self.asks().answer(id, Err(error));
            }
            Ok(crate::wire::Message::Notification(notification))
                if notification.method == "resources/unsubscribe" =>
            {
                #[derive(serde::Deserialize)]
                struct Uri {
                    uri: String,
                }
                let params = notification
                    .params
                    .map(|p| serde_json::from_str::<Uri>(p.get()));
                if let Some(Ok(params)) = params {
                    self.subscribed().remove(&params.uri);
                }
            }
            Ok(_) => {}
            Err(error) => tracing::warn!(%error, "a relayed message was ignored"),
        }
    }

    fn subscribed(&self) -> std::sync::MutexGuard<'_, HashMap<String, Subscription>> {
        self.subscriptions
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// A session request in flight; its token is cancelled if the client cancels it.
struct InFlight {
    session: Arc<Session>,
    id: Arc<str>,
    token: CancellationToken,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.session.lock_in_flight().remove(&self.id);
    }
}
