//! How an upstream's connections are opened: which transport (`auto` is probed once and the
//! answer remembered until a connection fails), which protocol era (`initialize` first; an
//! upstream that refuses it is tried with 2026-07-28 `server/discover`), and in whose name.

use std::sync::Arc;

use rmcp::model::{
    ClientCapabilities, ElicitationCapability, FormElicitationCapability, Implementation,
    RootsCapabilities, SamplingCapability, UrlElicitationCapability,
};
use tokio::sync::OwnedSemaphorePermit;

use super::{
    Connection, EraSupport, Relay, SessionSlot, Upstream, UpstreamClient, UpstreamError, client,
    connection::{Dial, Era, Opening},
    detect::detect,
};
use crate::{
    catalog::Features,
    config::{HttpProtocol, TransportConfig},
    downstream::{Downstream, TaskSupport},
    hook::{RequestHook, StaticHeaders},
    oauth::OAuthHook,
    principal::Principal,
};

impl Upstream {
    /// Opens the shared session the supervisor keeps: over `initialize` if the upstream takes
    /// it, else over 2026-07-28 (and then remembers that the upstream speaks only that).
    pub(super) async fn open_shared_session(&self) -> Result<Connection, UpstreamError> {
        if self.era_support() == EraSupport::ModernOnly {
            return self.open_shared(Era::Modern).await;
        }
        match self.open_shared(Era::Legacy).await {
            Err(UpstreamError::Refused(reason)) => {
                let modern = self.open_shared(Era::Modern).await.map_err(|error| {
                    tracing::debug!(upstream = %self.name(), %error, "2026-07-28 failed too");
                    UpstreamError::Refused(reason)
                })?;
                tracing::info!(upstream = %self.name(), "the upstream speaks only 2026-07-28");
                self.set_era_support(EraSupport::ModernOnly);
                Ok(modern)
            }
            other => other,
        }
    }

    /// The connection for a stateless (2026-07-28) request: the upstream's own 2026-07-28
    /// session if it speaks that protocol (opened on first need, so that results such as
    /// `input_required` pass through as they are), else the shared session.
    pub async fn stateless(&self) -> Result<Arc<Connection>, UpstreamError> {
        if let Some(ready) = self.stateless_now()? {
            return Ok(ready);
        }
        // Boxed: opening is rare, and its future is large.
        Box::pin(self.open_stateless()).await
    }

    /// The connection for a stateless request if it needs no opening.
    fn stateless_now(&self) -> Result<Option<Arc<Connection>>, UpstreamError> {
        let shared = self.shared()?;
        if shared.era() == Era::Modern || shared.transport() != "streamable_http" {
            // Already modern; or stdio, where a second session would be a second process; or
            // legacy SSE, which predates 2026-07-28.
            return Ok(Some(shared));
        }
        if let Some(modern) = self.connections.modern.load_full()
            && !modern.is_closed()
        {
            return Ok(Some(modern));
        }
        if self.era_support() == EraSupport::LegacyOnly {
            return Ok(Some(shared));
        }
        Ok(None)
    }

    /// Opens the upstream's 2026-07-28 session, or finds it speaks only the legacy era.
    async fn open_stateless(&self) -> Result<Arc<Connection>, UpstreamError> {
        let shared = self.shared()?;
        let _opening = self.connections.eras.lock().await;
        if self.era_support() == EraSupport::LegacyOnly {
            return Ok(shared);
        }
        if let Some(modern) = self.connections.modern.load_full()
            && !modern.is_closed()
        {
            return Ok(modern);
        }
        match self.open_shared(Era::Modern).await {
            Ok(modern) => {
                self.set_era_support(EraSupport::Both);
                // Listing once teaches rmcp's transport the tools' `x-mcp-header` parameters,
                // for the calls that go the typed way (the raw path writes them itself).
                let timeout = self.config.policy.discovery_timeout;
                let _ = tokio::time::timeout(timeout, modern.peer().list_tools(None)).await;
                let modern = Arc::new(modern);
                self.connections.modern.store(Some(modern.clone()));
                Ok(modern)
            }
            Err(error) => {
                tracing::info!(upstream = %self.name(), %error, "upstream does not speak 2026-07-28; stateless clients use its session");
                self.set_era_support(EraSupport::LegacyOnly);
                Ok(shared)
            }
        }
    }

    /// Opens a connection for one downstream session, introducing it as the client `home`
    /// introduced itself and declaring the same capabilities. A stdio upstream starts a process,
    /// within its `max_processes`.
    /// `session` is where its upstream session id is kept (and which session it goes on with,
    /// if another replica opened it).
    pub async fn open_session_connection(
        &self,
        client: Implementation,
        home: Arc<Downstream>,
        session: SessionSlot,
    ) -> Result<Arc<Connection>, UpstreamError> {
        let slot = match &self.config.transport {
            TransportConfig::Stdio(stdio) => Some(
                self.connections
                    .process_slots
                    .clone()
                    .try_acquire_owned()
                    .map_err(|_| UpstreamError::ProcessLimit(stdio.max_processes))?,
            ),
            TransportConfig::Http(_) => None,
        };
        let (capabilities, tasks) = relayable(&home);
        let holder = Holder {
            hook: self.request_hook(&home.principal).await,
            scope: self.connections_per_user().then(|| home.principal.clone()),
            heard: true,
        };
        let relay = Relay::for_session(home);
        let connection = self
            .open(
                Era::Legacy,
                (client, capabilities, tasks),
                relay,
                slot,
                holder,
                Arc::new(session),
            )
            .await?;
        let connection = Arc::new(connection);
        if let Some(idle) = self.config.policy.idle_timeout {
            connection.reap_when_idle(idle);
        }
        Ok(connection)
    }

    /// Opens a connection shared by all sessions. It declares every capability Switchyard can
    /// relay; each request is then passed to the client it concerns, or refused if that client
    /// lacks the capability.
    async fn open_shared(&self, era: Era) -> Result<Connection, UpstreamError> {
        let principal = match &self.auth {
            Some(auth) => auth.service_grant().await.principal.clone(),
            None => Principal::default(),
        };
        let connection = self.open_for(era, &principal, false).await?;
        self.connections.service.store(Arc::new(principal));
        Ok(connection)
    }

    /// Opens a connection for `principal`'s requests that is not tied to one client session:
    /// `theirs` alone (its events are about them), or shared by everyone.
    pub(super) async fn open_for(
        &self,
        era: Era,
        principal: &Principal,
        theirs: bool,
    ) -> Result<Connection, UpstreamError> {
        let holder = Holder {
            hook: self.request_hook(principal).await,
            scope: theirs.then(|| principal.clone()),
            heard: true,
        };
        self.open_declaring(era, Features::ALL, holder).await
    }

    /// Opens a connection to find out what tools need of clients (see `needs`): as the
    /// service principal, declaring `features`, its events unheard (the list changes of a
    /// connection that lives for one listing say nothing of the upstream's lists).
    pub(super) async fn open_probe(
        &self,
        era: Era,
        features: Features,
    ) -> Result<Connection, UpstreamError> {
        let principal = self.connections.service.load_full();
        let holder = Holder {
            hook: self.request_hook(&principal).await,
            scope: None,
            heard: false,
        };
        self.open_declaring(era, features, holder).await
    }

    /// Opens a connection not tied to one client session, declaring `features`.
    async fn open_declaring(
        &self,
        era: Era,
        features: Features,
        holder: Holder,
    ) -> Result<Connection, UpstreamError> {
        let (capabilities, tasks) = declaring(features);
        self.open(
            era,
            (client::gateway_identity(), capabilities, tasks),
            Relay::shared(),
            None,
            holder,
            Arc::default(),
        )
        .await
    }

    /// Opens a connection introducing Switchyard as `client` does (its identity and the
    /// capabilities declared).
    async fn open(
        &self,
        era: Era,
        declared: (Implementation, ClientCapabilities, TaskSupport),
        relay: Arc<Relay>,
        slot: Option<OwnedSemaphorePermit>,
        Holder { hook, scope, heard }: Holder,
        session: Arc<SessionSlot>,
    ) -> Result<Connection, UpstreamError> {
        // Unheard: sent where nobody listens.
        let events = if heard {
            self.events.clone()
        } else {
            tokio::sync::mpsc::unbounded_channel().0
        };
        let handler = UpstreamClient::new(
            self.name().clone(),
            declared,
            events,
            relay.clone(),
            (scope, self.config.roots.as_slice().into()),
        );
        let opening = Opening {
            upstream: self.name(),
            dial: self.dial(hook.as_ref()).await?,
            era,
            timeout: self.config.policy.connect_timeout,
            stream_idle: self.config.policy.stream_idle_timeout,
            http: &self.connections.http,
            raw: self.http_client(),
            hook,
            slot,
            closing: &self.connections.closing,
            tasks: &self.connections.tasks,
            session,
        };
        Connection::open(opening, handler, relay).await
    }

    /// The transport to open the next connection with. `auto` is resolved by probing the URL,
    /// once; the answer is kept until `forget_discovered`.
    async fn dial(&self, hook: &dyn RequestHook) -> Result<Dial<'_>, UpstreamError> {
        let http = match &self.config.transport {
            TransportConfig::Stdio(stdio) => return Ok(Dial::Stdio(stdio)),
            TransportConfig::Http(http) => http,
        };
        let protocol = match http.protocol {
            HttpProtocol::Auto => {
                let known = *self
                    .connections
                    .detected
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
                match known {
                    Some(protocol) => protocol,
                    None => {
                        let timeout = self.config.policy.connect_timeout;
                        let protocol = tokio::time::timeout(
                            timeout,
                            detect(&self.connections.http, &http.url, hook),
                        )
                        .await
                        .map_err(|_| UpstreamError::ConnectTimeout(timeout))??;
                        tracing::info!(upstream = %self.name(), transport = ?protocol, "detected the upstream's HTTP transport");
                        *self
                            .connections
                            .detected
                            .lock()
                            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(protocol);
                        self.connections.detecting.notify_waiters();
                        protocol
                    }
                }
            }
            configured => configured,
        };
        Ok(match protocol {
            HttpProtocol::Sse => Dial::Sse(http),
            _ => Dial::StreamableHttp(http),
        })
    }

    /// The URL and HTTP transport of an HTTP upstream (`Auto` while `auto` has not found it
    /// out yet); `None` for stdio upstreams.
    pub fn http_transport(&self) -> Option<(&url::Url, HttpProtocol)> {
        let TransportConfig::Http(http) = &self.config.transport else {
            return None;
        };
        let protocol = match http.protocol {
            HttpProtocol::Auto => self
                .connections
                .detected
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .unwrap_or(HttpProtocol::Auto),
            configured => configured,
        };
        Some((&http.url, protocol))
    }

    /// `http_transport`, once the transport is known: waits up to `within` for an `auto`
    /// upstream's to be found out (as it is when Switchyard has just started).
    pub async fn http_transport_known(
        &self,
        within: std::time::Duration,
    ) -> Option<(&url::Url, HttpProtocol)> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let found = self.connections.detecting.notified();
            let transport = self.http_transport();
            if !matches!(transport, Some((_, HttpProtocol::Auto))) {
                return transport;
            }
            if tokio::time::timeout_at(deadline, found).await.is_err() {
                return self.http_transport();
            }
        }
    }

    /// Forgets the detected transport and protocol eras, so the next connection finds them out
    /// again (the server may have been replaced by one that speaks others).
    pub(super) fn forget_discovered(&self) {
        *self
            .connections
            .detected
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = None;
        self.set_era_support(EraSupport::Unknown);
    }

    /// The hook for a new connection made for `principal`: the configured headers (those
    /// naming the user filled in with the principal's claims), and the principal's access
    /// token where the upstream uses OAuth.
    pub async fn request_hook(&self, principal: &Principal) -> Arc<dyn RequestHook> {
        let TransportConfig::Http(http) = &self.config.transport else {
            return StaticHeaders::new(Vec::new());
        };
        let mut headers = http.headers.clone();
        headers.extend(
            http.user_headers
                .iter()
                .filter_map(|(name, template)| Some((name.clone(), template.render(principal)?))),
        );
        match &self.auth {
            Some(auth) => OAuthHook::new(auth.clone(), auth.grant(principal).await, headers),
            None => StaticHeaders::new(headers),
        }
    }
}

/// Whom a connection is for: the headers (and token) its requests carry, and the user whose
/// own connection it is (`None`: shared by everyone), which its events are about.
struct Holder {
    hook: Arc<dyn RequestHook>,
    scope: Option<Principal>,
    /// Whether its events (list changes, resource updates) reach the upstream's supervisor.
    heard: bool,
}

/// The capabilities (and the tasks run when asked) a connection declares for `features`.
/// Switchyard's own connections declare every one it relays, so that each request is passed
/// to the client it concerns (or refused if that client lacks the capability).
fn declaring(features: Features) -> (ClientCapabilities, TaskSupport) {
    let mut capabilities = ClientCapabilities::default();
    let has = |feature| features.contains(feature);
    if has(Features::ROOTS) {
        capabilities.roots = Some(RootsCapabilities::default());
    }
    if has(Features::SAMPLING) {
        capabilities.sampling = Some(SamplingCapability::default());
    }
    // URL mode only with elicitation: left out, elicitation goes whole.
    if has(Features::ELICITATION) {
        let mut elicitation =
            ElicitationCapability::new().with_form(FormElicitationCapability::default());
        if has(Features::URL_ELICITATION) {
            elicitation = elicitation.with_url(UrlElicitationCapability::default());
        }
        capabilities.elicitation = Some(elicitation);
    }
    if has(Features::APPS) {
        // MCP Apps: the gateway relays a tool's interface (see `catalog::apps`), so servers
        // that offer one only to hosts that render them offer it here.
        let mut apps = rmcp::model::JsonObject::new();
        apps.insert(
            "mimeTypes".into(),
            serde_json::json!([crate::catalog::apps::APP_MIME_TYPE]),
        );
        capabilities.extensions = Some(
            [(crate::catalog::UI_EXTENSION.to_owned(), apps)]
                .into_iter()
                .collect(),
        );
    }
    let tasks = if has(Features::TASKS) {
        TaskSupport::RELAYED
    } else {
        TaskSupport::default()
    };
    (capabilities, tasks)
}

/// The part of a client's capabilities Switchyard can relay: roots, sampling and elicitation,
/// the sampling and elicitation it runs as tasks, and MCP Apps (whose interfaces are read
/// through the gateway). Other extensions (2026-07-28 tasks, say) are left out, since their
/// requests would have nowhere to go.
fn relayable(home: &Downstream) -> (ClientCapabilities, TaskSupport) {
    let client = &home.capabilities;
    let mut capabilities = ClientCapabilities::default();
    capabilities.roots = client.roots.clone().map(|_| RootsCapabilities::default());
    capabilities.sampling = client.sampling.clone();
    capabilities.elicitation = client.elicitation.clone();
    let apps = (client.extensions.as_ref())
        .and_then(|extensions| extensions.get(crate::catalog::UI_EXTENSION));
    if let Some(apps) = apps {
        capabilities.extensions = Some(
            [(crate::catalog::UI_EXTENSION.to_owned(), apps.clone())]
                .into_iter()
                .collect(),
        );
    }
    let tasks = home
        .asks
        .as_ref()
        .map(|asks| asks.tasks)
        .unwrap_or_default();
    (capabilities, tasks)
}
