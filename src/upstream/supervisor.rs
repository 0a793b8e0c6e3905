//! The supervisor: one task per upstream that connects it, discovers it, keeps its lists current
//! when it announces changes, checks that it is alive, and reconnects it with backoff
//! (`restart = { max_attempts, delay_ms, max_delay_ms }`) when it fails or goes away.
//!
//! The supervisor is the only writer of the upstream's shared connection, catalog and status.
//! After every change that affects what the gateway serves it calls `changed`.

use std::{
    pin::{Pin, pin},
    sync::Arc,
    time::{Duration, Instant},
};

use rmcp::model::{ClientRequest, PingRequest, RequestMetaObject};
use tokio::{sync::mpsc, task::JoinHandle};
use tokio_util::sync::CancellationToken;

use super::{
    Connection, Era, Upstream, UpstreamError, UpstreamEvent, UpstreamState, discovery::discover,
    listen::spawn_listener,
};
use crate::{
    catalog::ListChanges,
    config::{RestartPolicy, TransportConfig},
    oauth::Need,
    principal::Principal,
};

/// A burst of list-change notifications within this window causes one rediscovery.
const DEBOUNCE: Duration = Duration::from_millis(100);
/// The least time between two looks at whether calls in flight are stuck.
const LEAST_WATCH: Duration = Duration::from_millis(50);
/// A connection lost sooner than this after it was made counts as a failed attempt.
const STABLE: Duration = Duration::from_secs(10);

/// What supervisors report to the gateway.
pub trait SupervisorHooks: Send + Sync + 'static {
    /// An upstream's state or lists changed (`announced`: those it said had changed): the
    /// catalog must be rebuilt.
    fn changed(&self, announced: ListChanges);
    /// An upstream is ready on a new shared session.
    fn ready(&self, upstream: &Arc<Upstream>);
    /// A resource the gateway subscribed to changed (its URI as the upstream knows it).
    /// A resource subscribed to on the connection of `scope` (its user; `None`: the shared
    /// one) changed.
    fn resource_updated(&self, upstream: &Upstream, scope: Option<&Principal>, uri: &str);
    /// `principal`'s own lists of the upstream (`discovery = "per_user"`) changed.
    fn personal_changed(&self, upstream: &Upstream, principal: &Principal);
    /// An upstream failed (to connect, or after it was up), for `reason`.
    fn failed(&self, upstream: &Upstream, reason: &str);
}

pub type Hooks = Arc<dyn SupervisorHooks>;

/// Starts supervising `upstream` until `shutdown` is cancelled, or until its restart policy
/// gives up on it.
pub fn spawn_supervisor(
    upstream: Arc<Upstream>,
    mut events: mpsc::UnboundedReceiver<UpstreamEvent>,
    hooks: Hooks,
    shutdown: CancellationToken,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let restart = upstream.config.policy.restart;
        // Consecutive failed attempts to connect (a connection lost soon after it was made
        // counts as one, so that a server crashing at start backs off like one failing to).
        let mut failures: u32 = 0;
        loop {
            let attempted = Instant::now();
            let token_before = shared_token(&upstream).await;
            let attempt = tokio::select! {
                attempt = connect(&upstream) => attempt,
                _ = shutdown.cancelled() => return,
            };
            match attempt {
                Ok(connection) => {
                    let connection = Arc::new(connection);
                    let up_since = Instant::now();
                    publish(&upstream, &connection, &hooks);
                    // A 2026-07-28 upstream announces changes only to a listen request.
                    let listener = (connection.era() == Era::Modern)
                        .then(|| spawn_listener(upstream.clone(), connection.clone()));
                    let ended = watch(&upstream, &connection, &mut events, &hooks, &shutdown).await;
                    if let Some(listener) = listener {
                        listener.abort();
                    }
                    let reason = match ended {
                        Ended::Shutdown => return,
                        Ended::Closed => "the connection closed".to_owned(),
                        Ended::Unhealthy(reason) => {
                            upstream.health().count_failed_check();
                            reason
                        }
                    };
                    failures = if up_since.elapsed() < STABLE {
                        failures.saturating_add(1)
                    } else {
                        0
                    };
                    withdraw(&upstream, &connection, &reason, failures, &hooks).await;
                }
                Err(error) => {
                    let authorized =
                        authorization(&upstream, &hooks, &shutdown, token_before.as_deref());
                    let reason = match authorized.await {
                        Authorization::Shutdown => return,
                        // Authorized: connect again at once.
                        Authorization::Given => continue,
                        Authorization::NotNeeded => error.to_string(),
                        Authorization::Failed(reason) => reason,
                    };
                    failures = failures.saturating_add(1);
                    upstream.forget_discovered();
                    upstream.set_status(upstream.health().status().failed(&reason, failures));
                    hooks.failed(&upstream, &reason);
                    upstream.health().mark_settled();
                    hooks.changed(ListChanges::default());
                }
            }
            let error = upstream
                .health()
                .status()
                .last_error
                .clone()
                .unwrap_or_default();
            if restart.max_attempts.is_some_and(|max| failures >= max) {
                let gave_up =
                    format!("gave up after {failures} failed attempts; the last: {error}");
                tracing::error!(upstream = %upstream.name(), error = %error, attempts = failures, "upstream unavailable; not retrying");
                upstream.set_status(upstream.health().status().failed(&gave_up, failures));
                hooks.failed(&upstream, &gave_up);
                hooks.changed(ListChanges::default());
                return;
            }
            let delay = backoff(&restart, failures);
            // Retried at every request while it is down: the same failure is told once in a
            // while, with how many times it happened meanwhile.
            let key = format!("{} {error}", upstream.name());
            if let Some(unlogged) = RETRIES.note(&key) {
                tracing::warn!(
                    upstream = %upstream.name(),
                    %error,
                    retry_in_seconds = delay.as_secs_f64(),
                    more_like_it_unlogged = unlogged,
                    "upstream unavailable"
                );
            }
            tokio::select! {
                _ = tokio::time::sleep(delay) => {}
                // A user authorized meanwhile (through a link a client was given).
                _ = authorized(&upstream) => {}
                // A request wanted it: soon after the last attempt, not at the end of the backoff.
                _ = upstream.health().wanted_since(attempted, EAGER_RETRY) => {}
                _ = shutdown.cancelled() => return,
            }
        }
    })
}

/// Puts a newly connected upstream in service: its lists go into the catalog first, so that
/// by the time it shows as ready its tools are served.
fn publish(upstream: &Arc<Upstream>, connection: &Arc<Connection>, hooks: &Hooks) {
    if upstream.health().status().last_error.is_some() {
        upstream.health().count_restart();
    }
    upstream.connections.set_shared(Some(connection.clone()));
    upstream.health().set_serving(true);
    hooks.changed(ListChanges::default());
    mark_ready(upstream, connection);
    upstream.health().mark_settled();
    hooks.ready(upstream);
}

/// Takes a lost upstream out of service: it shows as failed (so that requests get the reason),
/// its lists leave the catalog (`failure_mode = "open"`), requests in flight on any of its
/// connections fail, and then its shared connection is closed.
async fn withdraw(
    upstream: &Upstream,
    connection: &Connection,
    reason: &str,
    failures: u32,
    hooks: &Hooks,
) {
    upstream.set_status(upstream.health().status().failed(reason, failures));
    hooks.failed(upstream, reason);
    upstream.health().set_serving(false);
    upstream.connections.set_shared(None);
    // An HTTP server that went away fails every session with it; a stdio upstream's
    // per-client processes are processes of their own and go on.
    if !matches!(upstream.config.transport, TransportConfig::Stdio(_)) {
        upstream.health().declare_outage();
    }
    hooks.changed(ListChanges::default());
    connection.close(Duration::from_secs(1)).await;
}

/// How waiting for a user's authorization ended.
enum Authorization {
    /// The failure was not for want of authorization, or no new token came since.
    NotNeeded,
    /// A token came, or was renewed, since the failed attempt started.
    Given,
    /// Authorization failed, or cannot be done; why, for display.
    Failed(String),
    Shutdown,
}

/// After a failed connection: if the upstream wants authorization (its grant says so), waits
/// in state `authenticating`, showing the link, until a user authorizes or it fails. A link
/// that expires is replaced. `before` is the access token as the attempt started: only a
/// different one is worth an attempt at once (an upstream that is down while the token is
/// good must wait out the backoff like any other).
async fn authorization(
    upstream: &Upstream,
    hooks: &Hooks,
    shutdown: &CancellationToken,
    before: Option<&str>,
) -> Authorization {
    let Some(auth) = upstream.auth() else {
        return Authorization::NotNeeded;
    };
    let mut others = auth.authorizations();
    loop {
        // A user who authorizes meanwhile may become the one the shared connection acts for.
        let grant = auth.service_grant().await;
        let mut changes = grant.subscribe();
        others.borrow_and_update();
        changes.borrow_and_update();
        match grant.need() {
            Need::Nothing
                if grant
                    .token()
                    .is_some_and(|t| Some(t.access_token.as_str()) != before) =>
            {
                return Authorization::Given;
            }
            Need::Nothing => return Authorization::NotNeeded,
            Need::Failed(reason) => {
                grant.clear_failure();
                return Authorization::Failed(reason);
            }
            Need::Authorization { .. } => {}
        }
        let link = match auth.link(&grant).await {
            Ok(Some(link)) => link,
            Ok(None) => continue,
            Err(error) => {
                return Authorization::Failed(format!("cannot start its authorization: {error}"));
            }
        };
        if upstream.health().status().authorization_url.as_deref() != Some(link.url.as_str()) {
            upstream.set_status(upstream.health().status().authenticating(link.url.clone()));
            upstream.health().mark_settled();
            hooks.changed(ListChanges::default());
            tracing::warn!(upstream = %upstream.name(), url = %link.url, "the upstream needs authorization: open the URL to authorize Switchyard");
        }
        let expires = link
            .expires
            .duration_since(std::time::SystemTime::now())
            .unwrap_or_default();
        tokio::select! {
            _ = changes.changed() => {}
            _ = others.changed() => {}
            _ = tokio::time::sleep(expires) => {}
            _ = shutdown.cancelled() => return Authorization::Shutdown,
        }
    }
}

/// The access token of the upstream's shared grant, if it has OAuth and a token.
async fn shared_token(upstream: &Upstream) -> Option<String> {
    let grant = upstream.auth()?.service_grant().await;
    grant.token().map(|t| t.access_token.clone())
}

/// Resolves when the upstream's shared connection has a new token to try: its grant got one,
/// or a user authorized and their grant is now the one it uses (never, without OAuth).
async fn authorized(upstream: &Upstream) {
    let Some(auth) = upstream.auth() else {
        return std::future::pending().await;
    };
    let mut any = auth.authorizations();
    let before = shared_token(upstream).await;
    while any.changed().await.is_ok() {
        let now = shared_token(upstream).await;
        if now.is_some() && now != before {
            return;
        }
    }
    std::future::pending().await
}

/// Opens the shared connection and discovers the upstream's lists.
async fn connect(upstream: &Upstream) -> Result<Connection, UpstreamError> {
    upstream.set_status(
        upstream
            .health()
            .status()
            .moved_to(UpstreamState::Connecting),
    );
    let connection = upstream.open_shared_session().await?;
    let mut status = upstream
        .health()
        .status()
        .moved_to(UpstreamState::Connected);
    status.transport = Some(connection.transport());
    status.protocol_version = Some(connection.protocol_version());
    upstream.set_status(status);
    upstream.set_status(
        upstream
            .health()
            .status()
            .moved_to(UpstreamState::Discovering),
    );
    rediscover(upstream, &connection).await?;
    // Users' own lists were found on the connections of before; find them again.
    upstream.forget_personal();
    Ok(connection)
}

/// Lists everything again and stores it, within the discovery timeout.
async fn rediscover(upstream: &Upstream, connection: &Connection) -> Result<(), UpstreamError> {
    let timeout = upstream.config.policy.discovery_timeout;
    let catalog = tokio::time::timeout(
        timeout,
        discover(connection.peer(), connection.raw(), connection.server()),
    )
    .await
    .map_err(|_| UpstreamError::DiscoveryTimeout {
        what: "tools, prompts and resources",
        timeout,
    })??;
    let mut catalog = catalog;
    let needs = upstream.needs_of(connection.era(), &catalog).await;
    catalog.needs = (needs.iter())
        .filter(|(tool, _)| catalog.tools.iter().any(|listed| *listed.name == **tool))
        .map(|(tool, needed)| (tool.clone(), *needed))
        .collect();
    upstream
        .lists
        .discovered
        .store(Some(Arc::new(catalog.clone())));
    let catalog = upstream.settle(catalog).await?;
    for left_out in &catalog.rejected {
        tracing::warn!(
            upstream = %upstream.name(), kind = left_out.kind, name = %left_out.name,
            reason = %left_out.reason,
            "a definition the upstream listed is left out; the rest are served"
        );
    }
    upstream.lists.served.store(Some(Arc::new(catalog)));
    Ok(())
}

fn mark_ready(upstream: &Upstream, connection: &Connection) {
    let mut status = upstream.health().status().moved_to(UpstreamState::Ready);
    status.retries = 0;
    upstream.set_status(status);
    let catalog = upstream.lists.served.load();
    let count = |f: fn(&crate::catalog::UpstreamCatalog) -> usize| catalog.as_deref().map_or(0, f);
    tracing::info!(
        upstream = %upstream.name(),
        transport = connection.transport(),
        protocol = %connection.protocol_version(),
        tools = count(|c| c.tools.len()),
        prompts = count(|c| c.prompts.len()),
        resources = count(|c| c.resources.len()),
        templates = count(|c| c.templates.len()),
        "upstream ready"
    );
}

/// How serving a connection ended.
#[derive(Debug, PartialEq, Eq)]
enum Ended {
    Closed,
    /// A health check failed, for this reason.
    Unhealthy(String),
    Shutdown,
}

/// Serves a ready upstream until its connection ends or a health check fails: passes resource
/// updates on, and rediscovers once per burst of list changes.
async fn watch(
    upstream: &Upstream,
    connection: &Connection,
    events: &mut mpsc::UnboundedReceiver<UpstreamEvent>,
    hooks: &Hooks,
    shutdown: &CancellationToken,
) -> Ended {
    // A ready upstream is checked (a ping, or `server/discover` for 2026-07-28) every
    // `health_interval`; at once when a request saw its transport fail; and at once when calls
    // are in flight but none has finished for `health_timeout` (it may have hung while still
    // accepting connections). Each check may take `health_timeout`.
    let policy = &upstream.config().policy;
    let mut health = tokio::time::interval(policy.health_interval);
    health.reset();
    let mut watch = tokio::time::interval((policy.health_timeout / 2).max(LEAST_WATCH));
    watch.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Whatever the supervisor waits for (`None`: it went well), the connection ending or
    // shutdown cuts it short.
    let interruptible = async |work: Pin<&mut (dyn Future<Output = Option<Ended>> + Send)>| {
        tokio::select! {
            ended = work => ended,
            _ = connection.closed() => Some(Ended::Closed),
            _ = shutdown.cancelled() => Some(Ended::Shutdown),
        }
    };
    loop {
        let wake = tokio::select! {
            _ = connection.closed() => return Ended::Closed,
            _ = shutdown.cancelled() => return Ended::Shutdown,
            Some(event) = events.recv() => Wake::Event(event),
            _ = health.tick() => Wake::Check { routine: true },
            _ = upstream.health().suspected() => Wake::Check { routine: false },
            _ = watch.tick() => {
                let Some(stuck) = upstream.load().stuck_for().filter(|s| *s >= policy.health_timeout) else {
                    continue;
                };
                tracing::info!(
                    upstream = %upstream.name(),
                    in_flight = upstream.load().in_flight(),
                    stuck_ms = stuck.as_millis() as u64,
                    "no call to the upstream has finished for a while; checking it now"
                );
                Wake::Check { routine: false }
            }
        };
        let event = match wake {
            Wake::Event(event) => event,
            Wake::Check { routine } => {
                if let Some(ended) = interruptible(pin!(check(upstream, connection))).await {
                    return ended;
                }
                // Checked out of turn: the next routine check is a whole interval away.
                if !routine {
                    health.reset();
                }
                continue;
            }
        };
        let mut announced = ListChanges::default();
        if !note(&event, &mut announced, upstream, hooks) {
            continue;
        }
        let refresh = async {
            tokio::time::sleep(DEBOUNCE).await;
            while let Ok(event) = events.try_recv() {
                note(&event, &mut announced, upstream, hooks);
            }
            match rediscover(upstream, connection).await {
                Ok(()) => hooks.changed(announced),
                Err(error) => tracing::warn!(
                    upstream = %upstream.name(), %error,
                    "rediscovery after a list change failed; keeping the previous lists"
                ),
            }
            None
        };
        if let Some(ended) = interruptible(pin!(refresh)).await {
            return ended;
        }
    }
}

/// What woke a supervisor watching a ready upstream.
enum Wake {
    Event(UpstreamEvent),
    /// A health check is due: `routine` at its interval, else out of turn (a request saw the
    /// transport fail, or calls in flight stopped finishing).
    Check {
        routine: bool,
    },
}

/// Passes a resource update on at once, or records an announced list change; true for the
/// latter (a rediscovery is due).
fn note(
    event: &UpstreamEvent,
    announced: &mut ListChanges,
    upstream: &Upstream,
    hooks: &Hooks,
) -> bool {
    match event {
        UpstreamEvent::ResourceUpdated(uri, scope) => {
            hooks.resource_updated(upstream, scope.as_ref(), uri);
            return false;
        }
        UpstreamEvent::ToolsChanged(Some(principal))
        | UpstreamEvent::PromptsChanged(Some(principal))
        | UpstreamEvent::ResourcesChanged(Some(principal))
            if upstream.discovers_per_user() =>
        {
            // That user's own lists changed: theirs alone are found again.
            hooks.personal_changed(upstream, principal);
            return false;
        }
        UpstreamEvent::ToolsChanged(_) => announced.tools = true,
        UpstreamEvent::PromptsChanged(_) => announced.prompts = true,
        UpstreamEvent::ResourcesChanged(_) => announced.resources = true,
    }
    true
}

/// Whether the upstream still answers (`None`): any answer will do, an error included. A
/// transport that has closed is the connection ending (however the check raced the closing
/// signal); any other failure, or no answer within the upstream's `health_timeout`, makes it
/// unhealthy.
async fn check(upstream: &Upstream, connection: &Connection) -> Option<Ended> {
    let peer = connection.peer();
    let probe = async {
        match connection.era() {
            Era::Legacy => peer
                .send_request(ClientRequest::PingRequest(PingRequest::default()))
                .await
                .map(drop),
            Era::Modern => peer.discover(RequestMetaObject::default()).await.map(drop),
        }
    };
    let timeout = upstream.config().policy.health_timeout;
    match tokio::time::timeout(timeout, probe).await {
        Ok(Ok(())) | Ok(Err(rmcp::ServiceError::McpError(_))) => {
            upstream.load().mark_progress();
            None
        }
        Ok(Err(rmcp::ServiceError::TransportClosed)) => Some(Ended::Closed),
        Ok(Err(error)) => Some(Ended::Unhealthy(format!(
            "it stopped answering: {}",
            crate::error::service_failure(&error)
        ))),
        Err(_) => Some(Ended::Unhealthy(format!(
            "it did not answer a health check within {}s",
            timeout.as_secs_f64()
        ))),
    }
}

/// The least time between two attempts to connect that requests hurry.
const EAGER_RETRY: Duration = Duration::from_millis(50);

/// Failed attempts to connect, logged once every ten seconds per upstream and error.
static RETRIES: std::sync::LazyLock<crate::error::Repeats> =
    std::sync::LazyLock::new(|| crate::error::Repeats::new(Duration::from_secs(10)));

/// The wait before the next attempt, after `failures` failed ones in a row (none: the
/// connection was lost): `delay`, doubling per failure, up to `max_delay`.
fn backoff(restart: &RestartPolicy, failures: u32) -> Duration {
    let exponent = failures.saturating_sub(1).min(20);
    restart
        .delay
        .saturating_mul(1 << exponent)
        .min(restart.max_delay)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_a_cap() {
        let restart = RestartPolicy {
            max_attempts: None,
            delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(5),
        };
        let waits: Vec<u128> = (0..8).map(|f| backoff(&restart, f).as_millis()).collect();
        assert_eq!(waits, [500, 500, 1000, 2000, 4000, 5000, 5000, 5000]);
        assert_eq!(backoff(&restart, u32::MAX), restart.max_delay);
    }
}
