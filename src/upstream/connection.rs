//! One live MCP session with an upstream server, over whichever transport it is configured for.
//!
//! Opening runs the transport and the `initialize` handshake under the connect timeout. The rmcp
//! service loop runs in its own task; the `Connection` keeps a `Peer` to send requests and a
//! signal for when the loop ends. Dropping the `Connection` ends the session: the stdio process
//! is killed, the HTTP session is deleted upstream.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use rmcp::{
    RoleClient,
    model::{ProtocolVersion, ServerPeerInfo},
    service::{
        ClientCacheConfig, ClientLifecycleMode, ClientServiceExt, Peer,
        RunningServiceCancellationToken,
    },
};
use tokio::sync::OwnedSemaphorePermit;
use tokio_util::sync::CancellationToken;

use super::{
    UpstreamError, client::UpstreamClient, hook::RequestHook, http, ordered::ProgressInOrder,
    relay::Relay, stdio,
};
use crate::config::{TransportConfig, UpstreamConfig};

/// The protocol era a connection speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// `initialize` and a session (2024-11-05 … 2025-11-25).
    Legacy,
    /// `server/discover` and self-contained requests (2026-07-28).
    Modern,
}

impl Era {
    fn lifecycle(self) -> ClientLifecycleMode {
        match self {
            Era::Legacy => ClientLifecycleMode::Initialize,
            Era::Modern => ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        }
    }
}

/// A live session with one upstream.
pub struct Connection {
    era: Era,
    peer: Peer<RoleClient>,
    /// Where requests sent on this connection are registered, for what comes back.
    relay: Arc<Relay>,
    server: Arc<ServerPeerInfo>,
    /// Cancelled once the service loop has ended, for whatever reason.
    done: CancellationToken,
    /// Ends the service loop; taken by the first `close` or the drop.
    stop: Mutex<Option<RunningServiceCancellationToken>>,
    /// Held by per-client stdio processes against the upstream's process cap.
    _slot: Option<OwnedSemaphorePermit>,
}

impl Connection {
    /// Starts the transport of `config` and performs the MCP handshake with `handler` speaking
    /// for Switchyard, all within `config.connect_timeout`.
    pub async fn open(
        config: &UpstreamConfig,
        era: Era,
        handler: UpstreamClient,
        relay: Arc<Relay>,
        http_client: &reqwest::Client,
        hook: Arc<dyn RequestHook>,
        slot: Option<OwnedSemaphorePermit>,
    ) -> Result<Self, UpstreamError> {
        let handshake = async {
            match &config.transport {
                TransportConfig::Stdio(stdio) => {
                    let transport =
                        stdio::spawn(&config.name, stdio).map_err(UpstreamError::Spawn)?;
                    let transport = ProgressInOrder::new(transport, relay.clone());
                    handler
                        .serve_with_lifecycle(transport, era.lifecycle())
                        .await
                }
                TransportConfig::StreamableHttp(http) => {
                    let transport = http::transport(http, http_client.clone(), hook);
                    let transport = ProgressInOrder::new(transport, relay.clone());
                    handler
                        .serve_with_lifecycle(transport, era.lifecycle())
                        .await
                }
            }
            .map_err(|e| UpstreamError::Initialize(e.to_string()))
        };
        let service = tokio::time::timeout(config.connect_timeout, handshake)
            .await
            .map_err(|_| UpstreamError::ConnectTimeout(config.connect_timeout))??;

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
        let stop = Mutex::new(Some(service.cancellation_token()));
        let done = CancellationToken::new();
        let signal = done.clone();
        tokio::spawn(async move {
            let _ = service.waiting().await;
            signal.cancel();
        });
        Ok(Self {
            era,
            peer,
            relay,
            server,
            done,
            stop,
            _slot: slot,
        })
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
        self.done.is_cancelled() || self.peer.is_transport_closed()
    }

    /// Resolves when the session has ended.
    pub async fn closed(&self) {
        self.done.cancelled().await;
    }

    /// Ends the session and waits (up to `grace`) for the transport to shut down.
    pub async fn close(&self, grace: Duration) {
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
