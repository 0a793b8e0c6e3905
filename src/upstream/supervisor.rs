//! The supervisor: one task per upstream that connects it, discovers it, keeps its lists current
//! when it announces changes, and reconnects it with backoff when it fails or goes away.
//!
//! The supervisor is the only writer of the upstream's shared connection, catalog and status.
//! After every change that affects what the gateway serves it calls `on_change`.

use std::{sync::Arc, time::Duration};

use tokio::{sync::mpsc, task::JoinHandle};

use crate::catalog::ListChanges;
use tokio_util::sync::CancellationToken;

use super::{
    Connection, Era, Upstream, UpstreamError, UpstreamEvent, UpstreamState, UpstreamStatus,
    discovery::discover,
};

/// First wait after a failure; doubles per failure up to `MAX_BACKOFF`.
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// A burst of list-change notifications within this window causes one rediscovery.
const DEBOUNCE: Duration = Duration::from_millis(100);

/// What supervisors report to the gateway.
pub trait SupervisorHooks: Send + Sync + 'static {
    /// An upstream's state or lists changed (`announced`: those it said had changed): the
    /// catalog must be rebuilt.
    fn changed(&self, announced: ListChanges);
    /// An upstream is ready on a new shared session.
    fn ready(&self, upstream: &Arc<Upstream>);
    /// A resource the gateway subscribed to changed (its URI as the upstream knows it).
    fn resource_updated(&self, upstream: &Upstream, uri: &str);
}

pub type Hooks = Arc<dyn SupervisorHooks>;

/// Starts supervising `upstream` until `shutdown` is cancelled.
pub fn spawn_supervisor(
    upstream: Arc<Upstream>,
    mut events: mpsc::UnboundedReceiver<UpstreamEvent>,
    hooks: Hooks,
    shutdown: CancellationToken,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut failures: u32 = 0;
        loop {
            let attempt = tokio::select! {
                attempt = connect(&upstream) => attempt,
                _ = shutdown.cancelled() => return,
            };
            match attempt {
                Ok(connection) => {
                    failures = 0;
                    let connection = Arc::new(connection);
                    upstream.shared.store(Some(connection.clone()));
                    mark_ready(&upstream);
                    upstream.mark_settled();
                    hooks.ready(&upstream);
                    hooks.changed(ListChanges::default());
                    let ended = watch(&upstream, &connection, &mut events, &hooks, &shutdown).await;
                    upstream.shared.store(None);
                    if ended == Ended::Shutdown {
                        return;
                    }
                    record_failure(&upstream, "the connection closed".into(), 0);
                }
                Err(error) => {
                    failures = failures.saturating_add(1);
                    record_failure(&upstream, error.to_string(), failures);
                }
            }
            upstream.mark_settled();
            hooks.changed(ListChanges::default());
            let delay = backoff(failures);
            tracing::warn!(
                upstream = %upstream.name(),
                error = upstream.status().last_error.as_deref().unwrap_or(""),
                retry_in_seconds = delay.as_secs_f64(),
                "upstream unavailable"
            );
            tokio::select! {
                _ = tokio::time::sleep(delay) => {}
                _ = shutdown.cancelled() => return,
            }
        }
    })
}

/// Opens the shared connection and discovers the upstream's lists.
async fn connect(upstream: &Upstream) -> Result<Connection, UpstreamError> {
    upstream.set_status(upstream.status().moved_to(UpstreamState::Connecting));
    let connection = upstream.open_shared(Era::Legacy).await?;
    upstream.set_status(upstream.status().moved_to(UpstreamState::Discovering));
    rediscover(upstream, &connection).await?;
    Ok(connection)
}

/// Lists everything again and stores it, within the discovery timeout.
async fn rediscover(upstream: &Upstream, connection: &Connection) -> Result<(), UpstreamError> {
    let timeout = upstream.config.discovery_timeout;
    let catalog = tokio::time::timeout(timeout, discover(connection.peer(), connection.server()))
        .await
        .map_err(|_| UpstreamError::DiscoveryTimeout {
            what: "tools, prompts and resources",
            timeout,
        })??;
    upstream.catalog.store(Some(Arc::new(catalog)));
    Ok(())
}

fn mark_ready(upstream: &Upstream) {
    let mut status = upstream.status().moved_to(UpstreamState::Ready);
    status.retries = 0;
    upstream.set_status(status);
    let catalog = upstream.catalog.load();
    let count = |f: fn(&crate::catalog::UpstreamCatalog) -> usize| catalog.as_deref().map_or(0, f);
    tracing::info!(
        upstream = %upstream.name(),
        tools = count(|c| c.tools.len()),
        prompts = count(|c| c.prompts.len()),
        resources = count(|c| c.resources.len()),
        templates = count(|c| c.templates.len()),
        "upstream ready"
    );
}

fn record_failure(upstream: &Upstream, error: String, retries: u32) {
    let status = UpstreamStatus {
        state: UpstreamState::Failed,
        since: std::time::SystemTime::now(),
        last_error: Some(error),
        retries,
    };
    upstream.set_status(status);
}

#[derive(Debug, PartialEq, Eq)]
enum Ended {
    Closed,
    Shutdown,
}

/// Serves a ready upstream until its connection ends: passes resource updates on, and
/// rediscovers once per burst of list changes.
async fn watch(
    upstream: &Upstream,
    connection: &Connection,
    events: &mut mpsc::UnboundedReceiver<UpstreamEvent>,
    hooks: &Hooks,
    shutdown: &CancellationToken,
) -> Ended {
    loop {
        let event = tokio::select! {
            _ = connection.closed() => return Ended::Closed,
            _ = shutdown.cancelled() => return Ended::Shutdown,
            Some(event) = events.recv() => event,
        };
        let mut announced = ListChanges::default();
        if !note(&event, &mut announced, upstream, hooks) {
            continue;
        }
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
    }
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
        UpstreamEvent::ResourceUpdated(uri) => {
            hooks.resource_updated(upstream, uri);
            return false;
        }
        UpstreamEvent::ToolsChanged => announced.tools = true,
        UpstreamEvent::PromptsChanged => announced.prompts = true,
        UpstreamEvent::ResourcesChanged => announced.resources = true,
    }
    true
}

fn backoff(failures: u32) -> Duration {
    let exponent = failures.saturating_sub(1).min(16);
    FIRST_BACKOFF.saturating_mul(1 << exponent).min(MAX_BACKOFF)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_a_cap() {
        let waits: Vec<u64> = (0..8).map(|f| backoff(f).as_secs()).collect();
        assert_eq!(waits, [1, 1, 2, 4, 8, 16, 30, 30]);
        assert_eq!(backoff(u32::MAX), MAX_BACKOFF);
    }
}
