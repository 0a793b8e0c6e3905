//! An upstream's connections: the shared one, the 2026-07-28 one for stateless clients, each
//! user's own, and what making them needs (the HTTP clients, the protocol eras found out, the
//! transport detected, the process slots of a `per_client` stdio upstream, the tasks that run
//! them). `Upstream` decides which connection a request goes on and opens them (`open`,
//! `principals`); this part holds them, and ends them all at once.

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU8, Ordering},
    },
    time::Duration,
};

use arc_swap::{ArcSwap, ArcSwapOption};
use tokio::sync::Semaphore;
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use super::{Connection, EraSupport, http, principals, raw_client};
use crate::{
    config::{HttpProtocol, TransportConfig, UpstreamConfig},
    principal::Principal,
};

pub(super) struct Connections {
    /// One connection pool for all of this upstream's HTTP sessions.
    pub(super) http: reqwest::Client,
    /// For streamable HTTP: the pooled client of the raw path, and the URL it posts to.
    pub(super) raw: Option<(raw_client::RawClient, ::http::Uri)>,
    /// Whether the upstream's connections have a raw path (its shared one had, when made).
    raw_ready: AtomicBool,
    /// The shared session; swapped as the supervisor reconnects.
    shared: ArcSwapOption<Connection>,
    /// The shared 2026-07-28 session for stateless clients, opened on first need.
    pub(super) modern: ArcSwapOption<Connection>,
    /// Which protocol eras the upstream speaks, as far as found out; its lock serializes
    /// opening the modern session.
    pub(super) eras: tokio::sync::Mutex<()>,
    /// An `EraSupport`, read by every request routed here (hence an atomic, not a lock).
    era_support: AtomicU8,
    /// With `transport = "auto"`: the HTTP transport found to work, until a connection fails.
    pub(super) detected: Mutex<Option<HttpProtocol>>,
    /// Woken when `detected` is found out.
    pub(super) detecting: tokio::sync::Notify,
    /// Caps the processes of a `per_client` stdio upstream.
    pub(super) process_slots: Arc<Semaphore>,
    /// Cancelled to end every connection of this upstream, shared and per-client (shutdown).
    pub(super) closing: CancellationToken,
    /// The tasks running this upstream's connections, each until its session has ended.
    pub(super) tasks: TaskTracker,
    /// The principal whose token the shared connection carries.
    pub(super) service: ArcSwap<Principal>,
    /// With tokens per user: other users' own connections, where the upstream is shared.
    pub(super) by_principal: principals::Connections,
}

impl Connections {
    /// None yet, for an upstream configured as `config`.
    pub(super) fn new(config: &UpstreamConfig) -> Self {
        let slots = match &config.transport {
            TransportConfig::Stdio(stdio) => stdio.max_processes,
            TransportConfig::Http(_) => Semaphore::MAX_PERMITS,
        };
        Self {
            http: http::http_client(config.policy.connect_timeout),
            raw: raw_path(config),
            raw_ready: AtomicBool::new(false),
            shared: ArcSwapOption::empty(),
            modern: ArcSwapOption::empty(),
            eras: tokio::sync::Mutex::new(()),
            era_support: AtomicU8::new(EraSupport::Unknown as u8),
            detected: Mutex::new(None),
            detecting: tokio::sync::Notify::new(),
            process_slots: Arc::new(Semaphore::new(slots)),
            closing: CancellationToken::new(),
            tasks: TaskTracker::new(),
            service: ArcSwap::from_pointee(Principal::anonymous()),
            by_principal: Default::default(),
        }
    }

    /// The shared connection, if there is one and it is open.
    pub(super) fn shared(&self) -> Option<Arc<Connection>> {
        self.shared
            .load_full()
            .filter(|connection| !connection.is_closed())
    }

    /// Puts `connection` in service as the shared one (`None`: there is none).
    /// The connection is in place before the raw path is said to be ready, as a request that
    /// finds the raw path takes the shared connection.
    pub(super) fn set_shared(&self, connection: Option<Arc<Connection>>) {
        let raw = connection
            .as_ref()
            .map(|connection| connection.raw().is_some());
        self.shared.store(connection);
        if let Some(raw) = raw {
            self.raw_ready.store(raw, Ordering::Release);
        }
    }

    /// Whether requests can take the raw path (the shared connection is streamable HTTP).
    pub(super) fn has_raw_path(&self) -> bool {
        self.raw_ready.load(Ordering::Acquire)
    }

    pub(super) fn era_support(&self) -> EraSupport {
        EraSupport::from_u8(self.era_support.load(Ordering::Acquire))
    }

    pub(super) fn set_era_support(&self, support: EraSupport) {
        self.era_support.store(support as u8, Ordering::Release);
    }

    /// Ends every connection, shared, stateless and per-user (stdio processes are asked to
    /// exit, HTTP sessions are deleted upstream), waiting up to `grace` for them: whether they
    /// all ended in time.
    pub(super) async fn close_all(&self, grace: Duration) -> bool {
        self.shared.store(None);
        self.modern.store(None);
        self.by_principal.clear();
        self.closing.cancel();
        self.tasks.close();
        tokio::time::timeout(grace, self.tasks.wait()).await.is_ok()
    }
}

/// The raw path's client and URL for an HTTP upstream (unused if it turns out to speak
/// legacy SSE). Without a TLS setup or a URL hyper takes, requests take the typed path.
fn raw_path(config: &UpstreamConfig) -> Option<(raw_client::RawClient, ::http::Uri)> {
    let TransportConfig::Http(http) = &config.transport else {
        return None;
    };
    let uri = match http.url.as_str().parse::<::http::Uri>() {
        Ok(uri) => uri,
        Err(error) => {
            tracing::warn!(upstream = %config.name, %error, "the URL cannot be used for raw requests; all requests go the typed way");
            return None;
        }
    };
    match raw_client::RawClient::new(&uri, config.policy.connect_timeout) {
        Ok(client) => Some((client, uri)),
        Err(error) => {
            tracing::warn!(upstream = %config.name, %error, "no TLS setup for raw requests; all requests go the typed way");
            None
        }
    }
}
