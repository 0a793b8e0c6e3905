//! What starts a reload: the configuration file or its overlay changing on disk (watched,
//! debounced) and `SIGHUP`. (The admin API starts one too.) Each reads the file again and hands the result
//! to `Gateway::reload`, which keeps the running state if the file is invalid.
//!
//! The file is watched by polling its metadata and content: that follows editors that write
//! a new file and rename it over the old one, and configuration mounted through symlinks that
//! are swapped (as Kubernetes does with ConfigMaps), where inotify on the path would not.

use std::{
    hash::{Hash, Hasher},
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use tokio_util::sync::CancellationToken;

use crate::gateway::{Gateway, Trigger};

/// How often the file is looked at.
const POLL: Duration = Duration::from_millis(500);
/// How long the file must stay the same before it is read (editors write in several steps).
const SETTLE: Duration = Duration::from_millis(300);

/// The hash of the file's content and its overlay's (which may not exist), if the file can be
/// read.
fn fingerprint(path: &Path, overlay: &Path) -> Option<u64> {
    let content = std::fs::read(path).ok()?;
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    content.hash(&mut hasher);
    std::fs::read(overlay).ok().hash(&mut hasher);
    Some(hasher.finish())
}

/// Reloads `gateway` whenever its configuration file changes, until `shutdown`.
pub fn spawn_watcher(gateway: Arc<Gateway>, shutdown: CancellationToken) {
    let path: PathBuf = gateway.live().config.source.clone();
    tokio::spawn(async move {
        let overlay = || gateway.live().config.overlay.path.clone();
        let mut seen = fingerprint(&path, &overlay());
        let mut ticks = tokio::time::interval(POLL);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = ticks.tick() => {}
                _ = shutdown.cancelled() => return,
            }
            // Turned off (`watch_config = false`): SIGHUP and the admin API still reload.
            if !gateway.live().config.server.watch_config {
                continue;
            }
            let now = fingerprint(&path, &overlay());
            // A file briefly missing (being replaced) is not a change yet.
            if now.is_none() || now == seen {
                seen = now.or(seen);
                continue;
            }
            // Changed: wait until it holds still, then reload once.
            let mut settled = now;
            loop {
                tokio::time::sleep(SETTLE).await;
                let again = fingerprint(&path, &overlay());
                if again == settled {
                    break;
                }
                settled = again;
            }
            seen = settled;
            tracing::info!(config = %path.display(), "the configuration file changed; reloading");
            gateway.reload_from_file(Trigger::File).await;
        }
    });
}

/// Reloads `gateway` on every `SIGHUP`, until `shutdown`.
#[cfg(unix)]
pub fn spawn_sighup(gateway: Arc<Gateway>, shutdown: CancellationToken) {
    use tokio::signal::unix::{SignalKind, signal};
    let mut hangups = match signal(SignalKind::hangup()) {
        Ok(hangups) => hangups,
        Err(error) => {
            tracing::warn!(%error, "cannot listen for SIGHUP; reload through the file or the admin API");
            return;
        }
    };
    tokio::spawn(async move {
        loop {
            tokio::select! {
                got = hangups.recv() => if got.is_none() { return },
                _ = shutdown.cancelled() => return,
            }
            tracing::info!("SIGHUP: reloading the configuration");
            gateway.reload_from_file(Trigger::Signal).await;
        }
    });
}

#[cfg(not(unix))]
pub fn spawn_sighup(_gateway: Arc<Gateway>, _shutdown: CancellationToken) {}
