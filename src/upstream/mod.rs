//! Upstream MCP servers: one `Upstream` per configured server, its configuration and four
//! parts of its own: `Connections` (the shared one, the stateless one, each user's own, and
//! what making them needs), `Lists` (what it lists, as discovered and as served), `Health`
//! (its status and the signals between its requests and its supervisor) and `Load` (its
//! requests in flight, under its limit); plus the transports, the handler Switchyard answers
//! them with, discovery, and the supervisor task that keeps each one connected.
//!
//! Every upstream keeps one shared connection (for discovery, list-change notifications, shared
//! mode and stateless clients). In `per_client` mode each downstream session also opens its own
//! (see `session`), which `open_session_connection` provides; `open` has how connections are
//! made (transport detection, protocol era).

// Roots and sampling are deprecated by SEP-2577 but still relayed on the legacy protocol.
#![allow(deprecated)]

mod admission;
mod asked;
mod augmented;
mod client;
mod connection;
mod connections;
mod detect;
mod discovery;
mod exchange;
mod health;
mod http;
mod inbound;
mod lines;
mod listen;
mod lists;
mod load;
mod needs;
mod open;
mod personal;
mod principals;
mod raw_client;
mod relay;
pub mod sandbox;
mod session_slot;
mod settle;
mod sse;
mod status;
mod stdio;
mod supervisor;
mod tasks;

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use tokio::sync::mpsc;

pub use admission::{Admission, Admitted, Overloaded};
pub use augmented::lift;
pub use client::{UpstreamClient, UpstreamEvent, gateway_identity, log_upstream_message};
pub use connection::{Connection, Dial, Era};
pub use exchange::{Answer, Exchange, ExchangeError, Outgoing, RawLink, Step};
pub use health::Health;
pub use lists::Lists;
pub use load::{InFlight, Load};
pub use raw_client::{BoxError, RawClient, UpstreamBody};
pub use relay::{Registration, Relay};
pub use session_slot::{SessionSlot, UpstreamSession};
pub use sse::{SseError, SseTransport};
pub use status::{UpstreamState, UpstreamStatus, escape_for_display};
pub use supervisor::{Hooks, SupervisorHooks, spawn_supervisor};
pub use tasks::{TaskWatch, TaskWatches};

use connections::Connections;

use crate::{
    catalog::UpstreamCatalog,
    config::{FailureMode, SessionMode, TransportConfig, UpstreamConfig},
    events::Events,
    names::UpstreamName,
    oauth::{Authorizer, Link, Need, OAuth},
    pins::Pins,
    principal::Principal,
};

/// How long closing an upstream's sessions may take once its calls are done or cut.
const CLOSE_GRACE: Duration = Duration::from_secs(5);

/// Why an upstream could not be reached or listed.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    #[error("{0}")]
    Spawn(std::io::Error),
    #[error("no answer to initialize within {}s", .0.as_secs_f64())]
    ConnectTimeout(Duration),
    #[error("initialize failed: {0}")]
    Initialize(String),
    /// The server answered the handshake with an error.
    #[error("the handshake was refused: {0}")]
    Refused(String),
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
    /// Its connections, and what making them needs.
    connections: Connections,
    /// What it lists, as discovered and as served, and what is kept beside.
    lists: Lists,
    /// How it is doing, and the signals between its requests and its supervisor.
    health: Health,
    /// Where every connection of this upstream reports list changes (read by the supervisor).
    events: mpsc::UnboundedSender<UpstreamEvent>,
    /// Its requests in flight, under `max_concurrent_requests` if set.
    load: Load,
    /// Switchyard's OAuth client for this upstream (HTTP upstreams, unless disabled).
    auth: Option<Arc<Authorizer>>,
    /// Set once a reload removed or replaced this upstream: it finishes its calls, then closes.
    retired: AtomicBool,
    /// Where its state changes are told to operators.
    operators: Arc<Events>,
}

impl Upstream {
    /// A new, not yet connected upstream, and the receiver its supervisor reads events from.
    pub fn new(
        config: UpstreamConfig,
        oauth: &Arc<OAuth>,
        pins: &Arc<Pins>,
        operators: &Arc<Events>,
    ) -> (Arc<Self>, mpsc::UnboundedReceiver<UpstreamEvent>) {
        let (events, receiver) = mpsc::unbounded_channel();
        let auth = match &config.transport {
            TransportConfig::Http(http) if http.oauth.enabled => {
                Some(oauth.authorizer(&config.name, &http.url, &http.oauth))
            }
            _ => None,
        };
        let policy = &config.policy;
        let admission = policy
            .max_concurrent_requests
            .map(|limit| Admission::new(limit, policy.max_queued_requests));
        let health = Health::new(matches!(config.transport, TransportConfig::Http(_)));
        let upstream = Arc::new(Self {
            connections: Connections::new(&config),
            load: Load::new(admission),
            auth,
            config,
            lists: Lists::new(pins),
            health,
            events,
            retired: AtomicBool::new(false),
            operators: operators.clone(),
        });
        upstream.tell_status(&upstream.health.status());
        (upstream, receiver)
    }

    pub fn name(&self) -> &UpstreamName {
        &self.config.name
    }

    pub fn config(&self) -> &UpstreamConfig {
        &self.config
    }

    /// How it is doing: its status, whether it serves, the signals between its requests and
    /// its supervisor.
    pub fn health(&self) -> &Health {
        &self.health
    }

    /// What it lists, as discovered and as served, and what is kept beside.
    pub fn lists(&self) -> &Lists {
        &self.lists
    }

    /// What the catalog lists of this upstream: its last discovered lists while it is ready;
    /// while it is down, nothing (`failure_mode = "open"`) or still those
    /// (`failure_mode = "closed"`, so that clients see the tools and calls fail naming it).
    pub fn catalog(&self) -> Option<Arc<UpstreamCatalog>> {
        if self.health.is_ready() || self.config.policy.failure_mode == FailureMode::Closed {
            self.lists.served.load_full()
        } else {
            None
        }
    }

    /// The shared connection, if it is up.
    pub fn shared(&self) -> Result<Arc<Connection>, UpstreamError> {
        match self.connections.shared() {
            Some(connection) => Ok(connection),
            None => {
                let status = self.health.status();
                let reason = match &status.last_error {
                    Some(error) if status.state != UpstreamState::Ready => error.clone(),
                    _ => status.state.as_str().to_owned(),
                };
                Err(UpstreamError::NotConnected(reason))
            }
        }
    }

    /// Its requests in flight, and its limit.
    pub fn load(&self) -> &Load {
        &self.load
    }

    /// Whether a reload removed or replaced this upstream.
    pub fn is_retired(&self) -> bool {
        self.retired.load(Ordering::Acquire)
    }

    /// Retires the upstream after a reload removed or replaced it: no new request finds it
    /// (the gateway no longer lists it), those in flight get up to `grace` to finish, then
    /// every connection is closed (processes asked to exit, HTTP sessions deleted).
    /// Lists the tools, prompts and resources again, as when the upstream says they changed
    /// (its shared lists; each user's own, for a per-user upstream, when next used).
    pub fn rediscover(&self) {
        for event in [
            UpstreamEvent::ToolsChanged(None),
            UpstreamEvent::PromptsChanged(None),
            UpstreamEvent::ResourcesChanged(None),
        ] {
            let _ = self.events.send(event);
        }
    }

    pub async fn retire(&self, grace: Duration) {
        self.retired.store(true, Ordering::Release);
        let deadline = tokio::time::Instant::now() + grace;
        if !self.load.drained_by(deadline).await {
            tracing::warn!(
                upstream = %self.name(),
                in_flight = self.load.in_flight(),
                "calls still in flight after the grace period; cutting them"
            );
        }
        self.close_all(CLOSE_GRACE).await;
    }

    /// Ends every connection of this upstream, shared and per-client (stdio processes are
    /// asked to exit, HTTP sessions are deleted upstream), waiting up to `grace` for them.
    /// For shutdown: the supervisor must be stopped first, or it would reconnect.
    pub async fn close_all(&self, grace: Duration) {
        self.health.set_serving(false);
        self.lists.personal.clear();
        if !self.connections.close_all(grace).await {
            tracing::warn!(upstream = %self.name(), "some upstream sessions did not end in time");
        }
    }

    /// Whether downstream sessions get their own upstream session. (Not with an upstream that
    /// speaks only 2026-07-28, which has no sessions.)
    pub fn is_per_client(&self) -> bool {
        self.config.session == SessionMode::PerClient
            && self.era_support() != EraSupport::ModernOnly
    }

    /// Whether requests to this upstream can take the raw path (its connections are
    /// streamable HTTP).
    pub fn has_raw_path(&self) -> bool {
        self.connections.has_raw_path()
    }

    /// The HTTP client and URL of a streamable-HTTP upstream, for requests that go to
    /// it as they are (the raw path's, shared with it).
    pub fn http_client(&self) -> Option<(&RawClient, &::http::Uri)> {
        let (client, url) = self.connections.raw.as_ref()?;
        Some((client, url))
    }

    /// Whether the upstream speaks only 2026-07-28 (it refused `initialize`).
    pub fn speaks_only_modern(&self) -> bool {
        self.era_support() == EraSupport::ModernOnly
    }

    /// Switchyard's OAuth client for this upstream, if it has one.
    pub fn auth(&self) -> Option<&Arc<Authorizer>> {
        self.auth.as_ref()
    }

    /// The link `principal` must follow before this upstream serves them, if they must (made
    /// now, if there is none yet).
    pub async fn authorization_link(&self, principal: &Principal) -> Option<Link> {
        let auth = self.auth.as_ref()?;
        let grant = auth.grant(principal).await;
        // A token had without them (their own, exchanged) decides whether they must act.
        if grant.token().is_none() && auth.exchanges_for(&grant) {
            auth.token(&grant).await;
        }
        if !matches!(grant.need(), Need::Authorization { .. }) {
            return None;
        }
        match auth.link(&grant).await {
            Ok(link) => link,
            Err(error) => {
                tracing::warn!(upstream = %self.name(), %error, "cannot start an authorization");
                None
            }
        }
    }

    /// Why `principal`'s authorization at this upstream failed, if it did (in their own words
    /// of the server, or Switchyard's).
    pub fn authorization_failure(&self, principal: &Principal) -> Option<String> {
        match self.auth.as_ref()?.grant_if_made(principal)?.need() {
            Need::Failed(reason) => Some(reason),
            _ => None,
        }
    }

    /// The unexpired link shown for `principal`'s authorization, if there is one.
    pub fn current_link(&self, principal: &Principal) -> Option<Link> {
        match self.auth.as_ref()?.grant_if_made(principal)?.need() {
            Need::Authorization {
                link: Some(link), ..
            } if link.is_live() => Some(link),
            _ => None,
        }
    }

    fn era_support(&self) -> EraSupport {
        self.connections.era_support()
    }

    fn set_era_support(&self, support: EraSupport) {
        self.connections.set_era_support(support);
    }
}

/// Which protocol eras an upstream speaks, as far as Switchyard has found out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum EraSupport {
    Unknown,
    /// `initialize` and 2026-07-28 both.
    Both,
    /// `initialize` only.
    LegacyOnly,
    /// 2026-07-28 only: `initialize` was refused.
    ModernOnly,
}

impl EraSupport {
    fn from_u8(value: u8) -> Self {
        [
            Self::Unknown,
            Self::Both,
            Self::LegacyOnly,
            Self::ModernOnly,
        ]
        .into_iter()
        .find(|support| *support as u8 == value)
        .unwrap_or(Self::Unknown)
    }
}
