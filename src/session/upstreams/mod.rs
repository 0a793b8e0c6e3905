//! The upstream sessions of one downstream session, opened on first use and closed with it.
//!
//! For `per_client` upstreams each downstream session gets its own upstream session, so a
//! stateful upstream keeps per-client state as if the client were connected to it directly
//! (with replicas, the same one on every replica: `shared`). `shared` upstreams are reached
//! through their one shared connection.

// logging/setLevel is legacy-only (deprecated by SEP-2577), but still relayed.
#![allow(deprecated)]

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use rmcp::model::{Implementation, LoggingLevel, SetLevelRequestParams};
use tokio::sync::OnceCell;

mod shared;

use crate::{
    config::TransportConfig,
    downstream::{Downstream, Outlet, SessionLogLevel},
    error::GatewayError,
    gateway::unavailable,
    names::UpstreamName,
    principal::Principal,
    router::ConnectionSource,
    upstream::{Connection, SessionSlot, Upstream},
};

/// One lazily opened connection slot; the cell makes concurrent first requests open it once.
type Slot = Arc<OnceCell<Arc<Connection>>>;

/// A slot, with the upstream it was opened for: a reload may replace an upstream under the
/// same name, and the new one must not be reached through the old one's session.
struct Entry {
    upstream: std::sync::Weak<Upstream>,
    slot: Slot,
}

impl Entry {
    fn is_for(&self, upstream: &Upstream) -> bool {
        std::ptr::eq(self.upstream.as_ptr(), upstream)
    }
}

/// A downstream session's own upstream connections. Dropping it closes them all.
pub struct SessionUpstreams {
    /// How the client introduced itself; upstream sessions are opened in its name.
    client: Implementation,
    /// The session itself, for what its upstream sessions send outside any request.
    home: Arc<Downstream>,
    /// Per-session lock, held only to find or insert a slot, never across an await.
    slots: Mutex<HashMap<UpstreamName, Entry>>,
    /// The log level the client asked for: applied to each upstream session it opens, and
    /// by Switchyard to what shared upstream sessions send it.
    log_level: Arc<SessionLogLevel>,
}

impl SessionUpstreams {
    pub fn new(
        client: Implementation,
        home: Arc<Downstream>,
        log_level: Arc<SessionLogLevel>,
    ) -> Self {
        Self {
            client,
            home,
            slots: Mutex::new(HashMap::new()),
            log_level,
        }
    }

    pub fn log_level(&self) -> &Arc<SessionLogLevel> {
        &self.log_level
    }

    /// Sets the log level on every upstream session this session has, and on those it opens
    /// later. Shared upstream sessions keep their own level (they serve other clients too):
    /// what they send this client is filtered by Switchyard instead.
    pub async fn set_log_level(&self, level: LoggingLevel) {
        self.log_level.set(level);
        for connection in self.open_connections() {
            apply_log_level(&connection, level).await;
        }
    }

    /// Tells this session's own upstream sessions that the client's roots changed (shared
    /// ones ask whichever client's request they serve, so they need not be told).
    pub async fn roots_changed(&self) {
        for connection in self.open_connections() {
            let _ = connection.peer().notify_roots_list_changed().await;
        }
    }

    fn open_connections(&self) -> Vec<Arc<Connection>> {
        self.lock()
            .values()
            .filter_map(|entry| entry.slot.get().cloned())
            .collect()
    }

    /// The upstreams this session has its own sessions with.
    pub fn open_names(&self) -> Vec<String> {
        self.lock()
            .iter()
            .filter(|(_, entry)| entry.slot.initialized())
            .map(|(name, _)| name.to_string())
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<UpstreamName, Entry>> {
        self.slots
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// This session's connection to `upstream` if it is open.
    fn open_connection(&self, upstream: &Upstream) -> Option<Arc<Connection>> {
        let slots = self.lock();
        let entry = slots.get(upstream.name()).filter(|e| e.is_for(upstream))?;
        let connection = entry.slot.get()?;
        (!connection.is_closed()).then(|| connection.clone())
    }

    /// This session's connection to `upstream`, opening it if needed. A connection that has
    /// closed (the upstream restarted, say) is replaced once.
    async fn own_connection(
        &self,
        upstream: &Arc<Upstream>,
    ) -> Result<Arc<Connection>, GatewayError> {
        // The upstream session the upstream said it lost, not to be gone on with again.
        let mut lost = None;
        for _ in 0..2 {
            let slot = {
                let mut slots = self.lock();
                let fresh = || Entry {
                    upstream: Arc::downgrade(upstream),
                    slot: Slot::default(),
                };
                let entry = slots.entry(upstream.name().clone()).or_insert_with(fresh);
                if !entry.is_for(upstream) {
                    *entry = fresh();
                }
                entry.slot.clone()
            };
            let connection = slot
                .get_or_try_init(|| self.open(upstream, lost.as_deref()))
                .await?;
            if !connection.is_closed() {
                return Ok(connection.clone());
            }
            lost = connection.session().lost_id();
            let mut slots = self.lock();
            if slots
                .get(upstream.name())
                .is_some_and(|e| Arc::ptr_eq(&e.slot, &slot))
            {
                slots.remove(upstream.name());
            }
        }
        Err(GatewayError::UpstreamFailed {
            upstream: upstream.name().clone(),
            reason: "its session closed as soon as it was opened".into(),
        })
    }
}

impl SessionUpstreams {
    /// Opens this session's connection to `upstream`; with a shared store, one to the
    /// upstream session the replicas serving the session share.
    async fn open(
        &self,
        upstream: &Arc<Upstream>,
        lost: Option<&str>,
    ) -> Result<Arc<Connection>, GatewayError> {
        let shared = match &self.home.outlet {
            Outlet::Session(standalone) => standalone.shared(),
            Outlet::Request { .. } => None,
        };
        match shared {
            Some(shared) if matches!(upstream.config().transport, TransportConfig::Http(_)) => {
                self.open_shared(upstream, shared, lost).await
            }
            _ => self.connect(upstream, SessionSlot::default()).await,
        }
    }

    /// Opens a connection to `upstream` whose session id is kept in `session`.
    async fn connect(
        &self,
        upstream: &Arc<Upstream>,
        session: SessionSlot,
    ) -> Result<Arc<Connection>, GatewayError> {
        let connection = upstream
            .open_session_connection(self.client.clone(), self.home.clone(), session)
            .await
            .map_err(|error| GatewayError::Unavailable {
                upstream: upstream.name().clone(),
                reason: error.to_string(),
            })?;
        tracing::debug!(upstream = %upstream.name(), "opened a per-client upstream session");
        if let Some(level) = self.log_level.get() {
            apply_log_level(&connection, level).await;
        }
        Ok(connection)
    }

    /// The client's session has ended: closing its connections ends their upstream sessions,
    /// including those shared with other replicas.
    pub fn release(&self) {
        for connection in self.open_connections() {
            connection.session().release();
        }
    }
}

/// Asks an upstream session for `level`; upstreams without logging ignore it (and say so).
async fn apply_log_level(connection: &Connection, level: LoggingLevel) {
    if connection.server().capabilities.logging.is_none() {
        return;
    }
    if let Err(error) = connection
        .peer()
        .set_level(SetLevelRequestParams::new(level))
        .await
    {
        tracing::debug!(%error, "an upstream refused logging/setLevel");
    }
}

/// Where one request gets its connections: its session's, or only those not tied to a session
/// (requests outside a session, from 2026-07-28 clients), for its principal.
#[derive(Clone, Copy)]
pub enum Source<'a> {
    Session(&'a SessionUpstreams),
    Stateless(&'a Principal),
}

impl ConnectionSource for Source<'_> {
    async fn connection(&self, upstream: &Arc<Upstream>) -> Result<Arc<Connection>, GatewayError> {
        match self {
            Source::Session(session) if upstream.is_per_client() => {
                if let Some(open) = session.open_connection(upstream) {
                    return Ok(open);
                }
                // Boxed: opening is rare, and its future is large.
                Box::pin(session.own_connection(upstream)).await
            }
            Source::Session(session) => upstream
                .connection_for(&session.home.principal, false)
                .await
                .map_err(|_| unavailable(upstream)),
            Source::Stateless(principal) => upstream
                .connection_for(principal, true)
                .await
                .map_err(|_| unavailable(upstream)),
        }
    }
}
