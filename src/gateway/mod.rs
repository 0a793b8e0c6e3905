//! The gateway: the snapshot of what it runs (`Live`: the configuration, its upstreams and their
//! merged catalog), which a reload or a catalog rebuild swaps whole, and the services every
//! request shares (OAuth, the store, resource subscriptions, metrics, the journal).
//!
//! Upstream supervisors report changes here; each change rebuilds the catalog from the ready
//! upstreams and swaps a new snapshot in. Readers never lock: a request loads the snapshot
//! once and answers from it.

mod cache;
mod journal;
mod lifecycle;
mod live;
mod personal;
mod pinned;
mod reload;
mod scrape;
mod subscriptions;
mod vectors;

use std::{
    collections::{HashMap, VecDeque},
    sync::{Arc, Mutex, Weak},
    time::SystemTime,
};

use arc_swap::ArcSwap;
use rmcp::model::{Implementation, ServerCapabilities, ServerConfig};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::{
    approval::Approvals,
    audit::Audit,
    catalog::{Access, Catalog, ListChanges, NameScheme},
    config::Config,
    error::GatewayError,
    events::Events,
    guardrail::hook::HookClient,
    metrics::Metrics,
    names::UpstreamName,
    oauth::{Link, OAuth},
    pins::Pins,
    policy::ToolSearch,
    principal::Principal,
    protocol::Era,
    quota::Quotas,
    store::Store,
    upstream::{Hooks, SupervisorHooks, Upstream, UpstreamState, spawn_supervisor},
};

pub use cache::ResultCache;
pub use journal::{Journal, JournalError, ReloadEntry, ReloadOutcome, Trigger};
pub use live::{Live, Setup};
pub use subscriptions::{OUTBOX_CAPACITY, Outbox, Subscription, Subscriptions};

/// The listen addresses a configuration file gave, before they were overridden.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Written {
    pub listen: std::net::SocketAddr,
    pub admin_listen: Option<std::net::SocketAddr>,
}

impl Written {
    /// The listen addresses the file at `path` itself gives (a reload compares the file with
    /// them), where the command line's `overrides` changed some: `config`'s own where the file
    /// alone does not load.
    pub fn in_file(
        path: &std::path::Path,
        config: &Config,
        overrides: &crate::config::Overrides,
    ) -> Self {
        let effective = Self {
            listen: config.server.listen,
            admin_listen: config.admin.listen,
        };
        if overrides.listen.is_none() && overrides.admin_listen.is_none() {
            return effective;
        }
        match crate::config::load(path) {
            Ok(file) => Self {
                listen: file.server.listen,
                admin_listen: file.admin.listen,
            },
            Err(_) => effective,
        }
    }
}

/// Everything requests share. Cheap to reach through an `Arc`.
pub struct Gateway {
    live: ArcSwap<Live>,
    /// Stops each upstream's supervisor (by upstream name), when a reload retires it.
    supervisors: Mutex<HashMap<UpstreamName, CancellationToken>>,
    /// Serializes reloads; holds the listen addresses as the file wrote them, when they were
    /// overridden at start (`--listen`, or port 0 bound to a real port), so that a reload
    /// compares the file with the file.
    reloading: tokio::sync::Mutex<Option<Written>>,
    /// Recent reloads and upstream failures, for operators.
    journal: Journal,
    /// What operators are told as it happens (`/api/events`).
    events: Arc<Events>,
    started: SystemTime,
    metrics: Arc<Metrics>,
    /// Serializes the swaps of `live`, so that the last one stored reflects the latest
    /// configuration and upstream state.
    publishing: Mutex<()>,
    /// Bumped after every catalog rebuild.
    catalog_version: watch::Sender<u64>,
    subscriptions: Arc<Subscriptions>,
    /// Switchyard as the OAuth client of its upstreams.
    oauth: Arc<OAuth>,
    /// Where state shared beyond this process lives (`[store]`; fixed until a restart).
    store: Arc<Store>,
    /// The approved definitions of pinned tools.
    pins: Arc<Pins>,
    /// Results of cacheable calls and reads, and identical ones in flight.
    cache: ResultCache,
    /// The audit log (`[audit]`; fixed until a restart).
    audit: Arc<Audit>,
    approvals: Arc<Approvals>,
    /// The HTTP client the guardrails' policy hooks are asked through.
    hooks: HookClient,
    /// The counters of `[[quota]]` and the per-principal `[limits]`.
    quotas: Arc<Quotas>,
    shutdown: CancellationToken,
}

/// How Switchyard introduces itself to clients.
pub fn identity() -> Implementation {
    Implementation::new("switchyard", env!("CARGO_PKG_VERSION"))
        .with_title("Switchyard MCP gateway")
}

/// `identity`, as JSON text.
pub fn identity_json() -> &'static str {
    static JSON: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    JSON.get_or_init(|| serde_json::to_string(&identity()).unwrap_or_default())
}

impl Gateway {
    /// Creates the gateway for `config` and starts connecting every upstream in the background.
    pub fn start(config: Config) -> Arc<Self> {
        Self::start_with(config, crate::metrics::standalone())
    }

    /// `start`, counting in `metrics` (made on the registry the caller exposes).
    pub fn start_with(config: Config, metrics: Arc<Metrics>) -> Arc<Self> {
        for warning in config.warnings() {
            tracing::warn!("{warning}");
        }
        let page_size = config.catalog.page_size;
        let scheme = scheme_of(&config);
        let access = Arc::new(access_of(&config));
        let public_url = config.oauth.public_url_or(config.server.listen);
        let store = Store::new(&config.store, &config.oauth.state_dir, &metrics);
        let audit = Arc::new(
            Audit::start(&config.audit, &config.oauth.state_dir, metrics.clone()).unwrap_or_else(
                |error| {
                    tracing::error!(%error, "the audit log cannot be opened; nothing is audited");
                    Audit::off(metrics.clone())
                },
            ),
        );
        let oauth = OAuth::new(config.oauth.clone(), public_url, &store, audit.clone());
        oauth.set_users_authenticate(config.auth.configured);
        let events = Arc::new(Events::default());
        let pins = Arc::new(Pins::new(
            store.clone(),
            metrics.clone(),
            &config.catalog,
            events.clone(),
        ));
        let cache = ResultCache::new(store.clone(), metrics.clone());
        let quotas = Quotas::new(store.clone(), metrics.clone());
        let approvals = Approvals::new(events.clone());
        let gateway = Arc::new(Self {
            live: ArcSwap::from_pointee(Live {
                setup: Setup {
                    config: Arc::new(config),
                    upstreams: Vec::new(),
                    scheme: scheme.clone(),
                    access: access.clone(),
                    generation: 0,
                },
                catalog: Arc::new(Catalog::empty(scheme).paged(page_size).seen_through(access)),
                recent: VecDeque::new(),
            }),
            supervisors: Mutex::default(),
            reloading: tokio::sync::Mutex::new(None),
            journal: Journal::new(events.clone()),
            events,
            started: SystemTime::now(),
            metrics,
            publishing: Mutex::new(()),
            catalog_version: watch::Sender::new(0),
            subscriptions: Arc::default(),
            oauth,
            store,
            pins,
            cache,
            audit,
            approvals,
            hooks: HookClient::new(),
            quotas,
            shutdown: CancellationToken::new(),
        });
        gateway.store.listen(gateway.shutdown.child_token());
        gateway
            .store
            .hear(Arc::new(pinned::PinEars(Arc::downgrade(&gateway))));
        let mut setup = gateway.live.load().setup.clone();
        setup.upstreams = setup
            .config
            .upstreams
            .iter()
            .map(|upstream| gateway.launch(upstream.clone()))
            .collect();
        setup.generation = 1;
        gateway.publish(Some(setup), ListChanges::default());
        gateway
    }

    /// Creates the upstream for `config` and starts its supervisor.
    fn launch(self: &Arc<Self>, config: crate::config::UpstreamConfig) -> Arc<Upstream> {
        let (upstream, events) = Upstream::new(config, &self.oauth, &self.pins, &self.events);
        let hooks: Hooks = Arc::new(GatewayHooks(Arc::downgrade(self)));
        let stop = self.shutdown.child_token();
        // A replaced upstream's supervisor stops here.
        if let Some(previous) = self
            .lock_supervisors()
            .insert(upstream.name().clone(), stop.clone())
        {
            previous.cancel();
        }
        spawn_supervisor(upstream.clone(), events, hooks, stop);
        upstream
    }

    fn lock_supervisors(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<UpstreamName, CancellationToken>> {
        self.supervisors
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The snapshot in force: configuration, upstreams and catalog. A request loads it once.
    pub fn live(&self) -> Arc<Live> {
        self.live.load_full()
    }

    /// Notes the listen addresses the file gave, where the running ones differ from them.
    pub async fn set_written(&self, written: Written) {
        *self.reloading.lock().await = Some(written);
    }

    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Recent reloads and upstream failures.
    pub fn journal(&self) -> &Journal {
        &self.journal
    }

    /// What operators are told as it happens.
    pub fn events(&self) -> &Arc<Events> {
        &self.events
    }

    /// When the gateway started.
    pub fn started(&self) -> SystemTime {
        self.started
    }

    /// Rebuilds the catalog; clients are told about the `announced` lists even if unchanged.
    pub fn rebuild_catalog_announcing(&self, announced: ListChanges) {
        self.publish(None, announced);
    }

    /// Swaps in a new snapshot: the catalog built again from the upstreams' lists, for the
    /// current setup or `setup` (a reload's), its predecessor kept among the recent ones.
    /// Clients are told about the `announced` lists even if unchanged.
    fn publish(&self, setup: Option<Setup>, announced: ListChanges) {
        let _publishing = self
            .publishing
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let current = self.live.load_full();
        let setup = setup.unwrap_or_else(|| current.setup.clone());
        // Upstreams that show each user their own lists are merged into each user's view.
        let parts: Vec<_> = setup
            .upstreams
            .iter()
            .filter(|u| !u.discovers_per_user())
            .filter_map(|u| Some((u.name().clone(), u.catalog()?)))
            .collect();
        let order = setup.upstreams.iter().map(|u| u.name().clone()).collect();
        let personal = setup
            .upstreams
            .iter()
            .filter(|u| u.discovers_per_user() && u.health().is_ready())
            .map(|u| u.name().clone())
            .collect();
        let previous = current.catalog.clone();
        let catalog = Catalog::build(setup.scheme.clone(), &parts)
            .with_personal(order, personal)
            .paged(setup.config.catalog.page_size)
            .seen_through(setup.access.clone())
            .succeeding(&previous, announced);
        let changed = catalog.versions() != previous.versions();
        let mut recent = current.recent.clone();
        if !Arc::ptr_eq(catalog.access(), previous.access()) {
            // Pages of the earlier snapshots were cut for the earlier policy.
            recent.clear();
        }
        if recent.len() == live::RECENT_SNAPSHOTS {
            recent.pop_front();
        }
        recent.push_back(previous);
        let generation = catalog.generation();
        if changed {
            let counts = serde_json::json!({
                "generation": generation,
                "tools": catalog.tools().len(),
                "prompts": catalog.prompts().len(),
                "resources": catalog.resources().len(),
                "resource_templates": catalog.templates().len(),
            });
            self.events.publish("catalog", &counts);
        }
        let catalog = Arc::new(catalog);
        let model = setup.config.catalog.search_model.clone();
        let searched = setup.config.catalog.tool_search != ToolSearch::Off
            || (setup.config.endpoints.iter())
                .any(|e| e.tool_search.is_some_and(|s| s != ToolSearch::Off));
        self.live.store(Arc::new(Live {
            setup,
            catalog: catalog.clone(),
            recent,
        }));
        self.catalog_version.send_replace(generation);
        // Where any endpoint serves tool search, the snapshot's index (and, with a search
        // model, its tools' vectors) is built now, beside the requests, rather than by the
        // first search; unless a newer snapshot came meanwhile.
        if searched && let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let current = self.catalog_version.subscribe();
            let model = model.map(|model| model.0);
            let state_dir = self.live().config.oauth.state_dir.clone();
            runtime.spawn_blocking(move || {
                if *current.borrow() != generation {
                    return;
                }
                if let Some(model) = &model {
                    vectors::restore(model, &state_dir);
                }
                catalog.prepare_search(model.as_deref());
                if let Some(model) = &model {
                    vectors::save(model, &state_dir);
                }
            });
        }
    }

    pub fn oauth(&self) -> &Arc<OAuth> {
        &self.oauth
    }

    /// The shared store (`[store]`), or the embedded one.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    pub fn pins(&self) -> &Arc<Pins> {
        &self.pins
    }

    pub fn cache(&self) -> &ResultCache {
        &self.cache
    }

    pub fn audit(&self) -> &Audit {
        &self.audit
    }

    pub fn quotas(&self) -> &Arc<Quotas> {
        &self.quotas
    }

    /// The calls waiting for an operator's approval.
    pub fn approvals(&self) -> &Arc<Approvals> {
        &self.approvals
    }

    pub fn hooks(&self) -> &HookClient {
        &self.hooks
    }

    /// Every live resource subscription.
    pub fn subscriptions(&self) -> &Arc<Subscriptions> {
        &self.subscriptions
    }

    /// A receiver that sees every catalog rebuild (the new generation).
    pub fn watch_catalog(&self) -> watch::Receiver<u64> {
        self.catalog_version.subscribe()
    }

    /// Resolves once every upstream has been tried at least once (ready or failed).
    pub async fn wait_settled(&self) {
        let upstreams = self.live().upstreams.clone();
        futures::future::join_all(upstreams.iter().map(|u| u.health().wait_settled())).await;
    }

    /// What Switchyard announces about itself to clients who see `catalog`.
    pub fn server_info(&self, catalog: &Catalog) -> ServerConfig {
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
            .enable_tool_list_changed();
        // Tasks the 2026-07-28 way: an upstream's tools may answer with tasks, which
        // Switchyard relays (see `announce_tasks` for the legacy way).
        let mut capabilities = if catalog.task_upstreams(Era::Modern).is_empty() {
            capabilities.build()
        } else {
            capabilities.enable_tasks().build()
        };
        // MCP Apps, as an upstream offers them: its tools' interfaces are read through the
        // gateway (see `catalog::apps`).
        if let Some(settings) = catalog.ui_extension() {
            capabilities
                .extensions
                .get_or_insert_with(Default::default)
                .insert(crate::catalog::UI_EXTENSION.to_owned(), settings.clone());
        }
        let mut info = ServerConfig::new(capabilities).with_server_info(identity());
        info.instructions = catalog.instructions().map(str::to_owned);
        info
    }

    /// Stops the supervisors; shared connections close when the gateway is dropped.
    pub fn shutdown(&self) {
        self.shutdown.cancel();
    }

    /// Stops the supervisors and ends every upstream session, shared and per-client, waiting
    /// up to `grace` (stdio processes are asked to exit, HTTP sessions are deleted upstream).
    /// With replicas, first tells the others this one leaves, so that they take over what it
    /// held without waiting for its silence.
    pub async fn close(&self, grace: std::time::Duration) {
        self.store.leave().await;
        if self.store.is_shared() {
            self.subscriptions.hand_over();
        }
        self.shutdown();
        let upstreams = self.live().upstreams.clone();
        futures::future::join_all(upstreams.iter().map(|u| u.close_all(grace))).await;
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
        if let Some(catalog) = upstream.catalog() {
            let tools = catalog.tools.iter().map(|tool| &*tool.name);
            let table = gateway.metrics.tool_table(upstream.name().as_str(), tools);
            upstream.lists().set_tool_series(table);
        }
        let upstream = upstream.clone();
        tokio::spawn(async move { gateway.subscriptions.renew(&upstream).await });
    }

    fn resource_updated(&self, upstream: &Upstream, scope: Option<&Principal>, uri: &str) {
        if let Some(gateway) = self.0.upgrade() {
            gateway.subscriptions.deliver(upstream.name(), scope, uri);
        }
    }

    fn personal_changed(&self, upstream: &Upstream, principal: &Principal) {
        if let Some(gateway) = self.0.upgrade() {
            gateway.personal_changed(upstream.name().as_str(), principal);
        }
    }

    fn failed(&self, upstream: &Upstream, reason: &str) {
        if let Some(gateway) = self.0.upgrade()
            && !upstream.is_retired()
        {
            gateway
                .journal
                .error(Some(upstream.name().as_str()), reason.to_owned());
        }
    }
}

/// How names are prefixed under `config`.
/// `config`'s policy and virtual endpoints, compiled.
fn access_of(config: &Config) -> Access {
    let upstreams: Vec<_> = config.upstreams.iter().map(|u| u.name.clone()).collect();
    Access::new(
        config.policy.clone(),
        config.endpoints.clone(),
        &config.catalog,
        &upstreams,
    )
}

fn scheme_of(config: &Config) -> NameScheme {
    NameScheme::new(
        config.catalog.prefix_mode,
        &config.catalog.separator,
        config.upstreams.len(),
    )
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

/// The error for a request routed to an upstream that cannot serve now. Where everyone is
/// anonymous, it carries the link of the authorization the upstream waits for; where users
/// have their own tokens, no link of another principal's is ever shown (each user gets their
/// own when their request needs it, see `router`).
pub fn unavailable(upstream: &Upstream) -> GatewayError {
    upstream.health().want();
    if !upstream.tokens_per_user()
        && let Some(link) = upstream.current_link(&Principal::anonymous())
    {
        return authorization_required(upstream, link);
    }
    let status = upstream.health().status();
    let reason = match (&status.last_error, status.state) {
        (Some(error), UpstreamState::Failed) => error.clone(),
        (_, state) => format!("it is {}", state.as_str()),
    };
    GatewayError::Unavailable {
        upstream: upstream.name().clone(),
        reason,
    }
}
