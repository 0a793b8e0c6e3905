//! One live MCP session with an upstream server, over whichever transport it is configured for.
//!
//! Opening runs the transport and the handshake (`initialize`, or `server/discover` for the
//! 2026-07-28 era) under the connect timeout. The rmcp
//! service loop runs in its own task; the `Connection` keeps a `Peer` to send requests and a
//! signal for when the loop ends. Dropping the `Connection` ends the session: the stdio process
//! is killed, the HTTP session is deleted upstream.

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use rmcp::{
    RoleClient,
    model::{ProtocolVersion, ServerJsonRpcMessage, ServerPeerInfo},
    service::{
        ClientCacheConfig, ClientInitializeError, ClientLifecycleMode, ClientServiceExt, Peer,
        RunningService, RunningServiceCancellationToken,
    },
    transport::{Transport, async_rw::AsyncRwTransport},
};
use tokio::sync::{OwnedSemaphorePermit, mpsc};
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use super::{
    UpstreamError, client::UpstreamClient, exchange::RawLink, http, inbound::Inbound, lines,
    raw_client::RawClient, relay::Relay, session_slot::SessionSlot, sse::SseTransport, stdio,
};
use crate::{
    config::{HttpConfig, StdioConfig},
    hook::RequestHook,
    names::UpstreamName,
};

pub use crate::protocol::Era;

/// What a transport's raw path was taken from, where it has one of its own.
enum Tapped {
    Lines(lines::Lines),
    Sse(super::sse::SseTap),
}

/// How rmcp opens a session of `era`.
fn lifecycle(era: Era) -> ClientLifecycleMode {
    match era {
        Era::Legacy => ClientLifecycleMode::Initialize,
        Era::Modern => ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        },
    }
}

/// How one connection reaches its upstream: the transport, with `auto` already resolved.
#[derive(Clone, Copy)]
pub enum Dial<'a> {
    Stdio(&'a StdioConfig),
    StreamableHttp(&'a HttpConfig),
    Sse(&'a HttpConfig),
}

impl Dial<'_> {
    /// The transport's name as the config spells it.
    pub fn name(&self) -> &'static str {
        match self {
            Dial::Stdio(_) => "stdio",
            Dial::StreamableHttp(_) => "streamable_http",
            Dial::Sse(_) => "sse",
        }
    }
}

/// Everything needed to open one connection.
pub struct Opening<'a> {
    pub upstream: &'a UpstreamName,
    pub dial: Dial<'a>,
    pub era: Era,
    /// For starting the transport and the handshake together.
    pub timeout: Duration,
    /// How long a stream from the upstream may bring nothing before it is taken for stalled.
    pub stream_idle: Duration,
    /// The upstream's HTTP client (one connection pool per upstream).
    pub http: &'a reqwest::Client,
    /// The upstream's client for raw requests, and its URL, for streamable HTTP.
    pub raw: Option<(&'a RawClient, &'a ::http::Uri)>,
    pub hook: Arc<dyn RequestHook>,
    /// Held by per-client stdio processes against the upstream's process cap.
    pub slot: Option<OwnedSemaphorePermit>,
    /// Cancelled when the gateway closes all of the upstream's connections.
    pub closing: &'a CancellationToken,
    /// Where the task that runs the connection to its end is tracked, so that closing can
    /// wait for every session to be ended upstream.
    pub tasks: &'a TaskTracker,
    /// Where a streamable-HTTP connection keeps its upstream session id (and the session it
    /// adopts, if any).
    pub session: Arc<SessionSlot>,
}

/// A live session with one upstream.
pub struct Connection {
    era: Era,
    /// Names this connection among every one ever opened (random): a task created on a
    /// transport without upstream sessions belongs to it (see `router::tasks`).
    run: Arc<str>,
    transport: &'static str,
    peer: Peer<RoleClient>,
    /// Where requests sent on this connection are registered, for what comes back.
    relay: Arc<Relay>,
    /// The raw path, for a streamable-HTTP or stdio connection.
    raw: Option<RawLink>,
    /// Its upstream session id, for a streamable-HTTP connection.
    session: Arc<SessionSlot>,
    /// Where the raw path hands rmcp the messages it read that rmcp must handle.
    inject: mpsc::UnboundedSender<ServerJsonRpcMessage>,
    server: Arc<ServerPeerInfo>,
    /// Cancelled once the service loop has ended, for whatever reason.
    done: CancellationToken,
    /// Set as soon as the connection is being closed, before its loop has ended.
    retired: AtomicBool,
    /// Ends the service loop; taken by the first `close` or the drop.
    stop: Mutex<Option<RunningServiceCancellationToken>>,
}

impl Connection {
    /// Starts the transport and performs the MCP handshake with `handler` speaking for
    /// Switchyard, all within `opening.timeout`.
    pub async fn open(
        opening: Opening<'_>,
        handler: UpstreamClient,
        relay: Arc<Relay>,
    ) -> Result<Self, UpstreamError> {
        let era = opening.era;
        let context =
            (era == Era::Modern).then(|| client_context(&rmcp::ClientHandler::get_info(&handler)));
        // Held until the service loop ends (not until the last `Arc` is dropped), so that a
        // process that exited or was reaped frees its place under `max_processes` at once.
        let slot = opening.slot;
        let (inject, injected) = mpsc::unbounded_channel();
        let session = opening.session.clone();
        let hook = opening.hook.clone();
        let declare = handler.declared_tasks().capability();
        let handshake = async {
            match opening.dial {
                Dial::Stdio(stdio) => {
                    let child =
                        stdio::spawn(opening.upstream, stdio).map_err(UpstreamError::Spawn)?;
                    let (pipe, taken) =
                        lines::tap(child, opening.tasks, inject.clone(), era == Era::Legacy)
                            .map_err(UpstreamError::Spawn)?;
                    let (read, write) = tokio::io::split(pipe);
                    let transport = AsyncRwTransport::new_client(read, write);
                    let service =
                        serve(handler, transport, (&relay, injected), era, declare).await?;
                    Ok((service, Some(Tapped::Lines(taken))))
                }
                Dial::StreamableHttp(config) => {
                    let transport = http::transport(
                        config,
                        opening.stream_idle,
                        opening.http.clone(),
                        opening.hook,
                        (session.clone(), inject.clone(), declare),
                    );
                    Ok((
                        serve(handler, transport, (&relay, injected), era, None).await?,
                        None,
                    ))
                }
                Dial::Sse(config) => {
                    let transport = SseTransport::connect(
                        config.url.clone(),
                        opening.http.clone(),
                        opening.hook,
                    )
                    .await
                    .map_err(|e| {
                        let cause = crate::error::cause(&e);
                        UpstreamError::Initialize(format!("opening the event stream: {cause}"))
                    })?;
                    let tap = transport.tap();
                    Ok((
                        serve(handler, transport, (&relay, injected), era, declare).await?,
                        Some(Tapped::Sse(tap)),
                    ))
                }
            }
        };
        let (service, tapped) = tokio::time::timeout(opening.timeout, handshake)
            .await
            .map_err(|_| UpstreamError::ConnectTimeout(opening.timeout))??;

        // The gateway must see every answer fresh: rmcp's client cache would share private
        // results between the users of a shared connection and mask upstream errors.
        service
            .peer()
            .set_response_cache_config(ClientCacheConfig::disabled())
            .await;
        let peer = service.peer().clone();
        let server = peer
            .peer_info()
            .ok_or_else(|| UpstreamError::Initialize("no initialize result".into()))?;
        let raw = match (opening.dial, opening.raw, tapped) {
            (Dial::Stdio(_), _, Some(Tapped::Lines(lines))) => Some(RawLink::lines(era, lines)),
            (Dial::Sse(_), _, Some(Tapped::Sse(tap))) => Some(RawLink::sse(era, tap)),
            (Dial::StreamableHttp(_), Some((client, uri)), _) => RawLink::new(
                client.clone(),
                uri.clone(),
                era,
                server.protocol_version.as_str(),
                session.clone(),
                hook,
                opening.stream_idle,
            ),
            _ => None,
        };
        let raw = raw.map(|raw| match context {
            Some(context) => raw.with_context(context),
            None => raw,
        });
        let stop = Mutex::new(Some(service.cancellation_token()));
        let done = CancellationToken::new();
        let signal = done.clone();
        let closing = opening.closing.clone();
        let stop_on_close = service.cancellation_token();
        opening.tasks.spawn(async move {
            let waiting = service.waiting();
            tokio::pin!(waiting);
            tokio::select! {
                _ = &mut waiting => {}
                _ = closing.cancelled() => {
                    stop_on_close.cancel();
                    let _ = waiting.await;
                }
            }
            drop(slot);
            signal.cancel();
        });
        Ok(Self {
            era,
            run: Arc::from(uuid::Uuid::new_v4().simple().to_string()),
            transport: opening.dial.name(),
            peer,
            relay,
            raw,
            session,
            inject,
            server,
            done,
            retired: AtomicBool::new(false),
            stop,
        })
    }

    /// This connection's run: what no other connection, before or after, is named.
    pub fn run(&self) -> &str {
        &self.run
    }

    /// The raw path of this connection, if it has one (streamable HTTP and stdio).
    pub fn raw(&self) -> Option<&RawLink> {
        self.raw.as_ref()
    }

    /// Where its upstream session id is kept (streamable HTTP; empty otherwise).
    pub fn session(&self) -> &SessionSlot {
        &self.session
    }

    /// The upstream session as replicas share it: its id and what the upstream said at
    /// `initialize` (none without a session id).
    pub fn shareable(&self) -> Option<super::UpstreamSession> {
        Some(super::UpstreamSession {
            id: self.session.id()?,
            server: (*self.server).clone(),
        })
    }

    /// Hands rmcp a message the raw path read (a request for the client, a notification).
    pub fn inject(&self, message: ServerJsonRpcMessage) {
        // The service loop may have ended; the message has nobody to go to then.
        let _ = self.inject.send(message);
    }

    /// Closes this connection once it has been unused for `idle` (no request in flight, none
    /// started or finished for that long). Holds only a weak reference.
    pub fn reap_when_idle(self: &Arc<Self>, idle: Duration) {
        let connection = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut wait = idle;
            loop {
                tokio::time::sleep(wait).await;
                let Some(connection) = connection.upgrade() else {
                    return;
                };
                if connection.is_closed() {
                    return;
                }
                let quiet = connection.relay.quiet_for();
                if connection.relay.in_flight() == 0 && quiet >= idle {
                    tracing::debug!(
                        idle_seconds = idle.as_secs_f64(),
                        "closing an idle per-client upstream session"
                    );
                    connection.close(Duration::from_secs(5)).await;
                    return;
                }
                wait = idle.saturating_sub(quiet).max(Duration::from_millis(10));
            }
        });
    }

    /// The transport in use: `stdio`, `streamable_http` or `sse`.
    pub fn transport(&self) -> &'static str {
        self.transport
    }

    /// The protocol version agreed with the upstream.
    pub fn protocol_version(&self) -> String {
        self.server.protocol_version.to_string()
    }

    pub fn peer(&self) -> &Peer<RoleClient> {
        &self.peer
    }

    pub fn era(&self) -> Era {
        self.era
    }

    pub fn relay(&self) -> &Arc<Relay> {
        &self.relay
    }

    /// What the upstream said about itself at `initialize`.
    pub fn server(&self) -> &ServerPeerInfo {
        &self.server
    }

    pub fn is_closed(&self) -> bool {
        self.retired.load(Ordering::Acquire)
            || self.done.is_cancelled()
            || self.peer.is_transport_closed()
    }

    /// Resolves when the session has ended.
    pub async fn closed(&self) {
        self.done.cancelled().await;
    }

    /// Ends the session and waits (up to `grace`) for the transport to shut down. From now on
    /// it counts as closed.
    pub async fn close(&self, grace: Duration) {
        self.retired.store(true, Ordering::Release);
        let stop = self
            .stop
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
        if let Some(stop) = stop {
            stop.cancel();
        }
        let _ = tokio::time::timeout(grace, self.done.cancelled()).await;
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        let stop = self
            .stop
            .get_mut()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
        if let Some(stop) = stop {
            stop.cancel();
        }
    }
}

/// The `_meta` keys a 2026-07-28 upstream wants on every request, for the gateway's client
/// `info`.
fn client_context(info: &rmcp::model::ClientInfo) -> serde_json::Map<String, serde_json::Value> {
    let meta = rmcp::model::RequestMetaObject::with_client_context(
        rmcp::model::ProtocolVersion::V_2026_07_28,
        info.client_info.clone(),
        info.capabilities.clone(),
    );
    match serde_json::to_value(meta) {
        Ok(serde_json::Value::Object(meta)) => meta,
        _ => serde_json::Map::new(),
    }
}

/// Runs the handshake of `era` over `transport`, with progress taken off in arrival order.
/// `declare`: the `tasks` capability to write into `initialize` here (rmcp's streamable-HTTP
/// worker must see the typed `initialize`: that transport writes it in itself).
async fn serve<T>(
    handler: UpstreamClient,
    transport: T,
    (relay, injected): (&Arc<Relay>, mpsc::UnboundedReceiver<ServerJsonRpcMessage>),
    era: Era,
    declare: Option<serde_json::Value>,
) -> Result<RunningService<RoleClient, UpstreamClient>, UpstreamError>
where
    T: Transport<RoleClient> + Send + 'static,
{
    let transport = Inbound::new(transport, relay.clone(), injected, declare);
    // In a task of its own: rmcp runs the session under the span current where it starts,
    // which must not be that of the request that happened to open it (a traced request's
    // spans would stay open, and unexported, as long as the session).
    let handshake = tokio_util::task::AbortOnDropHandle::new(tokio::spawn(
        handler.serve_with_lifecycle(transport, lifecycle(era)),
    ));
    handshake
        .await
        .map_err(|error| UpstreamError::Initialize(format!("the handshake task failed: {error}")))?
        .map_err(|error| match error {
            // The server answered, and said no: it may speak only another protocol era.
            ClientInitializeError::JsonRpcError(error) => {
                UpstreamError::Refused(error.message.into_owned())
            }
            ClientInitializeError::TransportError { error, .. } => {
                UpstreamError::Initialize(crate::error::transport_cause(&error))
            }
            other => UpstreamError::Initialize(crate::error::cause(&other)),
        })
}
