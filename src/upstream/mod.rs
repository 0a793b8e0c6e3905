//! Upstream MCP servers: one `Upstream` per configured server, holding its shared connection,
//! what it listed, and its state; plus the transports, the handler Switchyard answers them with,
//! discovery, and the supervisor task that keeps each one connected.
//!
//! Every upstream keeps one shared connection (for discovery, list-change notifications, shared
//! mode and stateless clients). In `per_client` mode each downstream session also opens its own
//! (see `session`), which `open_session_connection` provides.

// Roots and sampling are deprecated by SEP-2577 but still relayed on the legacy protocol.
#![allow(deprecated)]

mod client;
mod connection;
mod discovery;
mod hook;
mod http;
mod ordered;
mod relay;
mod status;
mod stdio;
mod supervisor;

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use arc_swap::{ArcSwap, ArcSwapOption};
use rmcp::model::{
    ClientCapabilities, ElicitationCapability, FormElicitationCapability, Implementation,
    RootsCapabilities, SamplingCapability, UrlElicitationCapability,
};
use tokio::sync::{Semaphore, mpsc};

pub use client::{UpstreamClient, UpstreamEvent, gateway_identity};
pub use connection::{Connection, Era};
pub use hook::{HookError, RequestHeaders, RequestHook, StaticHeaders};
pub use relay::{Downstream, Registration, Relay};
pub use status::{UpstreamState, UpstreamStatus};
pub use supervisor::{Hooks, SupervisorHooks, spawn_supervisor};

use crate::{
    catalog::UpstreamCatalog,
    config::{SessionMode, TransportConfig, UpstreamConfig},
    names::UpstreamName,
};

/// Why an upstream could not be reached or listed.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    #[error("{0}")]
    Spawn(std::io::Error),
    #[error("no answer to initialize within {}s", .0.as_secs_f64())]
    ConnectTimeout(Duration),
    #[error("initialize failed: {0}")]
    Initialize(String),
    #[error("listing its {what} took longer than {}s", .timeout.as_secs_f64())]
    DiscoveryTimeout {
        what: &'static str,
        timeout: Duration,
    },
    #[error("listing its {what} failed: {reason}")]
    Discovery { what: &'static str, reason: String },
    #[error("not connected ({0})")]
    NotConnected(String),
    #[error("all {0} per-client processes are in use")]
    ProcessLimit(usize),
}

/// One configured upstream server and everything known about it.
pub struct Upstream {
    config: UpstreamConfig,
    /// One connection pool for all of this upstream's HTTP sessions.
    http: reqwest::Client,
    /// The shared session; swapped as the supervisor reconnects.
    shared: ArcSwapOption<Connection>,
    /// The shared 2026-07-28 session for stateless clients, opened on first need.
    modern: ArcSwapOption<Connection>,
    /// Serializes opening the modern session; remembers an upstream that does not speak it.
    modern_state: tokio::sync::Mutex<ModernSupport>,
    /// What the upstream listed last; `None` until first discovered.
    catalog: ArcSwapOption<UpstreamCatalog>,
    status: ArcSwap<UpstreamStatus>,
    /// Where every connection of this upstream reports list changes (read by the supervisor).
    events: mpsc::UnboundedSender<UpstreamEvent>,
    /// Caps the processes of a `per_client` stdio upstream.
    process_slots: Arc<Semaphore>,
    /// Set once the first connection attempt has ended, either way.
    settled: AtomicBool,
}

impl Upstream {
    /// A new, not yet connected upstream, and the receiver its supervisor reads events from.
    pub fn new(config: UpstreamConfig) -> (Arc<Self>, mpsc::UnboundedReceiver<UpstreamEvent>) {
        let (events, receiver) = mpsc::unbounded_channel();
        let slots = match &config.transport {
            TransportConfig::Stdio(stdio) => stdio.max_processes,
            TransportConfig::StreamableHttp(_) => Semaphore::MAX_PERMITS,
        };
        let upstream = Arc::new(Self {
            http: http::http_client(config.connect_timeout),
            config,
            shared: ArcSwapOption::empty(),
            modern: ArcSwapOption::empty(),
            modern_state: tokio::sync::Mutex::new(ModernSupport::Unknown),
            catalog: ArcSwapOption::empty(),
            status: ArcSwap::from_pointee(UpstreamStatus::new(UpstreamState::Connecting)),
            events,
            process_slots: Arc::new(Semaphore::new(slots)),
            settled: AtomicBool::new(false),
        });
        (upstream, receiver)
    }

    pub fn name(&self) -> &UpstreamName {
        &self.config.name
    }

    pub fn config(&self) -> &UpstreamConfig {
        &self.config
    }

    /// Whether the first connection attempt has ended (ready or failed).
    pub fn has_settled(&self) -> bool {
        self.settled.load(Ordering::Acquire)
    }

    pub fn status(&self) -> Arc<UpstreamStatus> {
        self.status.load_full()
    }

    /// The last discovered lists, if the upstream is ready.
    pub fn catalog(&self) -> Option<Arc<UpstreamCatalog>> {
        if self.status.load().state == UpstreamState::Ready {
            self.catalog.load_full()
        } else {
            None
        }
    }

    /// The shared connection, if it is up.
    pub fn shared(&self) -> Result<Arc<Connection>, UpstreamError> {
        match self.shared.load_full() {
            Some(connection) if !connection.is_closed() => Ok(connection),
            _ => {
                let status = self.status.load();
                let reason = match &status.last_error {
                    Some(error) if status.state != UpstreamState::Ready => error.clone(),
                    _ => format!("{:?}", status.state).to_lowercase(),
                };
                Err(UpstreamError::NotConnected(reason))
            }
        }
    }

    /// Removes the shared connections, for shutdown.
    pub fn take_shared(&self) -> Vec<Arc<Connection>> {
        [self.shared.swap(None), self.modern.swap(None)]
            .into_iter()
            .flatten()
            .collect()
    }

    /// The connection for a stateless (2026-07-28) request: the upstream's own 2026-07-28
    /// session if it speaks that protocol (opened on first need, so that results such as
    /// `input_required` pass through as they are), else the shared session.
    pub async fn stateless(&self) -> Result<Arc<Connection>, UpstreamError> {
        if !matches!(self.config.transport, TransportConfig::StreamableHttp(_)) {
            // A second stdio session would be a second process.
            return self.shared();
        }
        if let Some(modern) = self.modern.load_full()
            && !modern.is_closed()
        {
            return Ok(modern);
        }
        let shared = self.shared()?;
        let mut support = self.modern_state.lock().await;
        if *support == ModernSupport::Unsupported {
            return Ok(shared);
        }
        if let Some(modern) = self.modern.load_full()
            && !modern.is_closed()
        {
            return Ok(modern);
        }
        match self.open_shared(Era::Modern).await {
            Ok(modern) => {
                *support = ModernSupport::Supported;
                // Listing once teaches rmcp's transport the tools' `x-mcp-header` parameters.
                let _ = modern.peer().list_tools(None).await;
                let modern = Arc::new(modern);
                self.modern.store(Some(modern.clone()));
                Ok(modern)
            }
            Err(error) => {
                tracing::info!(upstream = %self.name(), %error, "upstream does not speak 2026-07-28; stateless clients use its session");
                *support = ModernSupport::Unsupported;
                Ok(shared)
            }
        }
    }

    /// Whether downstream sessions get their own upstream session.
    pub fn is_per_client(&self) -> bool {
        self.config.session == SessionMode::PerClient
    }

    /// Opens a connection for one downstream session, introducing it as the client `home`
    /// introduced itself and declaring the same capabilities. A stdio upstream starts a process,
    /// within its `max_processes`.
    pub async fn open_session_connection(
        &self,
        client: Implementation,
        home: Arc<Downstream>,
    ) -> Result<Connection, UpstreamError> {
        let slot = match &self.config.transport {
            TransportConfig::Stdio(stdio) => Some(
                self.process_slots
                    .clone()
                    .try_acquire_owned()
                    .map_err(|_| UpstreamError::ProcessLimit(stdio.max_processes))?,
            ),
            TransportConfig::StreamableHttp(_) => None,
        };
        let capabilities = relayable(&home.capabilities);
        self.open(
            Era::Legacy,
            client,
            capabilities,
            Relay::for_session(home),
            slot,
        )
        .await
    }

    /// Opens a connection shared by all sessions. It declares every capability Switchyard can
    /// relay; each request is then passed to the client it concerns, or refused if that client
    /// lacks the capability.
    async fn open_shared(&self, era: Era) -> Result<Connection, UpstreamError> {
        let mut capabilities = ClientCapabilities::default();
        capabilities.roots = Some(RootsCapabilities::default());
        capabilities.sampling = Some(SamplingCapability::default());
        capabilities.elicitation = Some(
            ElicitationCapability::new()
                .with_form(FormElicitationCapability::default())
                .with_url(UrlElicitationCapability::default()),
        );
        self.open(
            era,
            client::gateway_identity(),
            capabilities,
            Relay::shared(),
            None,
        )
        .await
    }

    async fn open(
        &self,
        era: Era,
        client: Implementation,
        capabilities: ClientCapabilities,
        relay: Arc<Relay>,
        slot: Option<tokio::sync::OwnedSemaphorePermit>,
    ) -> Result<Connection, UpstreamError> {
        let handler = UpstreamClient::new(
            self.name().clone(),
            client,
            capabilities,
            self.events.clone(),
            relay.clone(),
        );
        let hook = self.request_hook();
        Connection::open(&self.config, era, handler, relay, &self.http, hook, slot).await
    }

    /// The hook for a new connection: the configured static headers.
    fn request_hook(&self) -> Arc<dyn RequestHook> {
        match &self.config.transport {
            TransportConfig::StreamableHttp(http) => StaticHeaders::new(http.headers.clone()),
            TransportConfig::Stdio(_) => StaticHeaders::new(Vec::new()),
        }
    }

    fn set_status(&self, status: UpstreamStatus) {
        self.status.store(Arc::new(status));
    }

    fn mark_settled(&self) {
        self.settled.store(true, Ordering::Release);
    }
}

/// The part of a client's capabilities Switchyard can relay: roots, sampling and elicitation.
/// Extensions (tasks, say) are left out, since their requests would have nowhere to go.
fn relayable(client: &ClientCapabilities) -> ClientCapabilities {
    let mut capabilities = ClientCapabilities::default();
    capabilities.roots = client.roots.clone().map(|_| RootsCapabilities::default());
    capabilities.sampling = client.sampling.clone();
    capabilities.elicitation = client.elicitation.clone();
    capabilities
}

/// Whether an upstream speaks 2026-07-28, as far as Switchyard has found out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ModernSupport {
    Unknown,
    Supported,
    Unsupported,
}
