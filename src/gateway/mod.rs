//! The gateway's shared state: the configuration it runs, its upstreams, and the merged catalog
//! snapshot that every request reads.
//!
//! Upstream supervisors report changes here; each change rebuilds the catalog from the ready
//! upstreams and swaps it in whole. Readers never lock: they load the current snapshot.

mod subscriptions;

use std::{
    collections::VecDeque,
    sync::{Arc, Mutex, Weak},
};

use arc_swap::{ArcSwap, Guard};
use bytes::Bytes;
use rmcp::model::{Implementation, ServerCapabilities, ServerConfig};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::{
    catalog::{Catalog, Cursor, ListChanges, ListKind, NameScheme},
    config::Config,
    error::GatewayError,
    names::UpstreamName,
    oauth::{Link, OAuth},
    principal::Principal,
    protocol::Era,
    upstream::{Hooks, SupervisorHooks, Upstream, UpstreamState, spawn_supervisor},
};

pub use subscriptions::{OUTBOX_CAPACITY, Outbox, Subscription, Subscriptions};

/// How many earlier catalog snapshots pagination cursors may refer to.
const RECENT_SNAPSHOTS: usize = 8;

/// Everything requests share. Cheap to reach through an `Arc`.
pub struct Gateway {
    config: Arc<Config>,
    /// In config order.
    upstreams: Vec<Arc<Upstream>>,
    catalog: ArcSwap<Catalog>,
    /// Serializes rebuilds so the last one stored reflects the latest upstream state; holds
    /// the last few snapshots, which open pagination cursors may still refer to.
    recent: Mutex<VecDeque<Arc<Catalog>>>,
    /// Bumped after every catalog rebuild.
    catalog_version: watch::Sender<u64>,
    subscriptions: Arc<Subscriptions>,
    /// Switchyard as the OAuth client of its upstreams.
    oauth: Arc<OAuth>,
    shutdown: CancellationToken,
}

impl Gateway {
    /// Creates the gateway for `config` and starts connecting every upstream in the background.
    pub fn start(config: Config) -> Arc<Self> {
        let page_size = config.catalog.page_size;
        let scheme = NameScheme::new(
            config.catalog.prefix_mode,
            &config.catalog.separator,
            config.upstreams.len(),
        );
        let public_url = config.oauth.public_url_or(config.server.listen);
        let oauth = OAuth::new(config.oauth.clone(), public_url);
        let mut receivers = Vec::new();
        let upstreams = config
            .upstreams
            .iter()
            .map(|upstream| {
                let (upstream, events) = Upstream::new(upstream.clone(), &oauth);
                receivers.push(events);
                upstream
            })
            .collect();
        let gateway = Arc::new(Self {
            config: Arc::new(config),
            upstreams,
            catalog: ArcSwap::from_pointee(Catalog::empty(scheme).paged(page_size)),
            recent: Mutex::new(VecDeque::with_capacity(RECENT_SNAPSHOTS)),
            catalog_version: watch::Sender::new(0),
            subscriptions: Arc::default(),
            oauth,
            shutdown: CancellationToken::new(),
        });
        let hooks: Hooks = Arc::new(GatewayHooks(Arc::downgrade(&gateway)));
        for (upstream, events) in gateway.upstreams.iter().zip(receivers) {
            spawn_supervisor(
                upstream.clone(),
                events,
                hooks.clone(),
                gateway.shutdown.child_token(),
            );
        }
        gateway
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The current catalog snapshot. Hold it briefly: clone what you need before awaiting.
    pub fn catalog(&self) -> Guard<Arc<Catalog>> {
        self.catalog.load()
    }

    pub fn upstreams(&self) -> &[Arc<Upstream>] {
        &self.upstreams
    }

    pub fn upstream(&self, name: &str) -> Option<&Arc<Upstream>> {
        self.upstreams.iter().find(|u| u.name().as_str() == name)
    }

    /// The upstream a route points to, or why it cannot serve (it is down, and listed still
    /// because of `failure_mode = "closed"`).
    pub fn serving_upstream(&self, name: &UpstreamName) -> Result<&Arc<Upstream>, GatewayError> {
        let upstream = self.upstream(name.as_str()).ok_or_else(|| {
            GatewayError::Internal(format!("upstream `{name}` is not configured"))
        })?;
        if upstream.is_ready() {
            Ok(upstream)
        } else {
            Err(unavailable(upstream))
        }
    }

    /// The error for a tool or prompt name that is not in the catalog: if its prefix names a
    /// configured upstream that is down, say so; otherwise the name is unknown.
    pub fn missing_name(&self, name: &str, unknown: fn(String) -> GatewayError) -> GatewayError {
        let catalog = self.catalog();
        let owner = catalog
            .scheme()
            .split_name(name)
            .and_then(|(upstream, _)| self.upstream(upstream));
        match owner {
            Some(upstream) if upstream.status().state != UpstreamState::Ready => {
                unavailable(upstream)
            }
            _ => unknown(name.to_owned()),
        }
    }

    /// Rebuilds the catalog from the upstreams that are ready now.
    pub fn rebuild_catalog(&self) {
        self.rebuild_catalog_announcing(ListChanges::default());
    }

    /// Rebuilds the catalog; clients are told about the `announced` lists even if unchanged.
    pub fn rebuild_catalog_announcing(&self, announced: ListChanges) {
        let mut recent = self
            .recent
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let parts: Vec<_> = self
            .upstreams
            .iter()
            .filter_map(|u| Some((u.name().clone(), u.catalog()?)))
            .collect();
        let previous = self.catalog.load_full();
        let next = Catalog::build(previous.scheme().clone(), &parts)
            .paged(self.config.catalog.page_size)
            .succeeding(&previous, announced);
        let generation = next.generation();
        self.catalog.store(Arc::new(next));
        if recent.len() == RECENT_SNAPSHOTS {
            recent.pop_front();
        }
        recent.push_back(previous);
        drop(recent);
        self.catalog_version.send_replace(generation);
    }

    pub fn oauth(&self) -> &Arc<OAuth> {
        &self.oauth
    }

    /// Every live resource subscription.
    pub fn subscriptions(&self) -> &Arc<Subscriptions> {
        &self.subscriptions
    }

    /// The catalog snapshot numbered `generation`, if it is current or recent.
    pub fn catalog_at(&self, generation: u64) -> Option<Arc<Catalog>> {
        let current = self.catalog.load_full();
        if current.generation() == generation {
            return Some(current);
        }
        let recent = self
            .recent
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        recent
            .iter()
            .find(|c| c.generation() == generation)
            .cloned()
    }

    /// The result JSON of a page of list `kind` for a client of `era`: the first page of the
    /// current snapshot, or the page a cursor names in the snapshot it was given out for.
    pub fn list_page(
        &self,
        kind: ListKind,
        era: Era,
        cursor: Option<&str>,
    ) -> Result<Bytes, GatewayError> {
        let Some(text) = cursor else {
            return Ok(self.catalog().list_page(kind, era, 0));
        };
        let invalid = |why: &str| GatewayError::InvalidParams(format!("cursor `{text}` {why}"));
        let cursor = Cursor::decode(text, kind).ok_or_else(|| invalid("is not valid"))?;
        let catalog = self.catalog_at(cursor.generation).ok_or_else(|| {
            invalid("has expired: the list changed since; list again from the start")
        })?;
        Ok(catalog.list_page(kind, era, cursor.offset))
    }

    /// A receiver that sees every catalog rebuild (the new generation).
    pub fn watch_catalog(&self) -> watch::Receiver<u64> {
        self.catalog_version.subscribe()
    }

    /// Resolves once every upstream has been tried at least once (ready or failed).
    pub async fn wait_settled(&self) {
        futures::future::join_all(self.upstreams.iter().map(|u| u.wait_settled())).await;
    }

    /// What Switchyard announces about itself to clients.
    pub fn server_info(&self) -> ServerConfig {
        #[allow(deprecated)] // logging: still part of the legacy protocol, which is relayed
        let capabilities = ServerCapabilities::builder()
            .enable_completions()
            .enable_logging()
            .enable_prompts()
            .enable_resources()
            .enable_tools()
            .enable_prompts_list_changed()
            .enable_resources_list_changed()
            .enable_resources_subscribe()
            .enable_tool_list_changed()
            .build();
        let mut info = ServerConfig::new(capabilities).with_server_info(
            Implementation::new("switchyard", env!("CARGO_PKG_VERSION"))
                .with_title("Switchyard MCP gateway"),
        );
        info.instructions = self.catalog().instructions().map(str::to_owned);
        info
    }

    /// Stops the supervisors; shared connections close when the gateway is dropped.
    pub fn shutdown(&self) {
        self.shutdown.cancel();
    }

    /// Stops the supervisors and ends every upstream session, shared and per-client, waiting
    /// up to `grace` (stdio processes are asked to exit, HTTP sessions are deleted upstream).
    pub async fn close(&self, grace: std::time::Duration) {
        self.shutdown();
        futures::future::join_all(self.upstreams.iter().map(|u| u.close_all(grace))).await;
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// How supervisors reach the gateway; weak, so that supervisors do not keep it alive.
struct GatewayHooks(Weak<Gateway>);

impl SupervisorHooks for GatewayHooks {
    fn changed(&self, announced: ListChanges) {
        if let Some(gateway) = self.0.upgrade() {
            gateway.rebuild_catalog_announcing(announced);
        }
    }

    fn ready(&self, upstream: &Arc<Upstream>) {
        let Some(gateway) = self.0.upgrade() else {
            return;
        };
        let upstream = upstream.clone();
        tokio::spawn(async move { gateway.subscriptions.renew(&upstream).await });
    }

    fn resource_updated(&self, upstream: &Upstream, uri: &str) {
        if let Some(gateway) = self.0.upgrade() {
            gateway.subscriptions.deliver(upstream.name(), uri);
        }
    }
}

/// The error for a request to an upstream that a user must authorize first.
pub fn authorization_required(upstream: &Upstream, link: Link) -> GatewayError {
    GatewayError::AuthorizationRequired {
        upstream: upstream.name().clone(),
        url: link.url,
        expires_in: link
            .expires
            .duration_since(std::time::SystemTime::now())
            .unwrap_or_default(),
        elicitation_id: link.elicitation_id,
        url_elicitation: false,
    }
}

/// The error for a request routed to an upstream that cannot serve now.
pub fn unavailable(upstream: &Upstream) -> GatewayError {
    if let Some(link) = upstream.current_link(&Principal::anonymous()) {
        return authorization_required(upstream, link);
    }
    let status = upstream.status();
    let reason = match (&status.last_error, status.state) {
        (Some(error), UpstreamState::Failed) => error.clone(),
        (_, state) => format!("it is {}", state.as_str()),
    };
    GatewayError::Unavailable {
        upstream: upstream.name().clone(),
        reason,
    }
}
