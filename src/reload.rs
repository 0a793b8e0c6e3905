//! What starts a reload: the configuration file changing on disk (watched, debounced) and
//! `SIGHUP`. (The admin API starts one too.) Each reads the file again and hands the result
//! to `Gateway::reload`, which keeps the running state if the file is invalid.
//!
//! The file is watched by polling its metadata and content: that follows editors that write
//! a new file and rename it over the old one, and configuration mounted through symlinks that
//! are swapped (as Kubernetes does with ConfigMaps), where inotify on the path would not.

use std::{
    hash::{Hash, Hasher},
    path::{Path, PathBuf},
    sync::Arc,
    time::{Duration, SystemTime},
};

use tokio_util::sync::CancellationToken;

use crate::gateway::{Gateway, Trigger};

/// How often the file is looked at.
const POLL: Duration = Duration::from_millis(500);
/// How long the file must stay the same before it is read (editors write in several steps).
const SETTLE: Duration = Duration::from_millis(300);

/// What identifies one version of the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Fingerprint {
    modified: Option<SystemTime>,
    len: u64,
    content: u64,
}

fn fingerprint(path: &Path) -> Option<Fingerprint> {
    let meta = std::fs::metadata(path).ok()?;
    let content = std::fs::read(path).ok()?;
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    content.hash(&mut hasher);
    Some(Fingerprint {
        modified: meta.modified().ok(),
        len: meta.len(),
        content: hasher.finish(),
    })
}

/// Reloads `gateway` whenever its configuration file changes, until `shutdown`.
pub fn spawn_watcher(gateway: Arc<Gateway>, shutdown: CancellationToken) {
    let path: PathBuf = gateway.config().source.clone();
    tokio::spawn(async move {
        let mut seen = fingerprint(&path);
        let mut ticks = tokio::time::interval(POLL);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = ticks.tick() => {}
                _ = shutdown.cancelled() => return,
            }
            let now = fingerprint(&path);
            // A file briefly missing (being replaced) is not a change yet.
            if now.is_none() || now.map(|f| f.content) == seen.map(|f| f.content) {
                seen = now.or(seen);
                continue;
            }
            // Changed: wait until it holds still, then reload once.
            let mut settled = now;
            loop {
                tokio::time::sleep(SETTLE).await;
                let again = fingerprint(&path);
                if again == settled {
                    break;
                }
                settled = again;
            }
            seen = settled;
            if !gateway.config().server.watch_config {
                continue;
            }
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
