//! Zero-downtime upgrades, with pingora's transfer of listening sockets: a new Switchyard
//! started with `--upgrade` waits at `[server] upgrade_socket` for the sockets of the running
//! one; the running one, sent SIGQUIT, hands them over there, stops accepting and finishes
//! what it is serving. The sockets never close in between: a connection waits in their queue
//! for whichever process accepts it, so none is refused.

use std::{
    collections::HashSet,
    net::SocketAddr,
    os::fd::{AsRawFd, FromRawFd, RawFd},
    path::Path,
};

use anyhow::Context;
use pingora::server::Fds;
use tokio::net::TcpListener;

/// The listening sockets taken over from the Switchyard being replaced (none without
/// `--upgrade`).
pub struct Inherited {
    fds: Fds,
    taken: HashSet<String>,
}

impl Inherited {
    pub fn none() -> Self {
        Self {
            fds: Fds::new(),
            taken: HashSet::new(),
        }
    }

    /// Waits at `path` for the running Switchyard to hand its listening sockets over (it
    /// does when sent SIGQUIT), for as long as pingora's transfer waits.
    pub async fn receive(path: &Path) -> anyhow::Result<Self> {
        let path = socket_path(path)?;
        let fds = tokio::task::spawn_blocking(move || {
            let mut fds = Fds::new();
            fds.get_from_sock(path.as_str()).map(|()| fds)
        })
        .await
        .context("the upgrade's transfer stopped")?
        .map_err(|error| anyhow::anyhow!("no listening sockets were handed over: {error}"))?;
        Ok(Self {
            fds,
            taken: HashSet::new(),
        })
    }

    /// The listener for `role` at `addr`: the one taken over, if it listens there (a
    /// configured port 0 takes the port in use), else a new one.
    pub async fn listener(&mut self, role: &str, addr: SocketAddr) -> std::io::Result<TcpListener> {
        if let Some(fd) = self.fds.get(role).copied() {
            // SAFETY: the descriptor was just received for this role and nothing else owns it.
            let listener = unsafe { std::net::TcpListener::from_raw_fd(fd) };
            self.taken.insert(role.to_owned());
            let local = listener.local_addr()?;
            if local.ip() == addr.ip() && (addr.port() == 0 || addr.port() == local.port()) {
                listener.set_nonblocking(true)?;
                tracing::info!(role, %local, "took over a listening socket");
                return TcpListener::from_std(listener);
            }
            tracing::info!(role, %local, %addr, "the socket taken over listens elsewhere; it closes");
        }
        TcpListener::bind(addr).await
    }

    /// Closes the sockets taken over that no listener claimed.
    pub fn close_unclaimed(&mut self) {
        let taken = std::mem::take(&mut self.taken);
        self.fds.close_unclaimed(&taken);
    }
}

/// Hands `listeners` (by role) to the new Switchyard waiting at `path`.
pub async fn hand_over(path: &Path, listeners: Vec<(&'static str, RawFd)>) -> anyhow::Result<()> {
    let path = socket_path(path)?;
    let mut fds = Fds::new();
    for (role, fd) in listeners {
        fds.add(role.to_owned(), fd);
    }
    tokio::task::spawn_blocking(move || fds.send_to_sock(path.as_str()))
        .await
        .context("the upgrade's transfer stopped")?
        .map_err(|error| anyhow::anyhow!("no new Switchyard took the sockets: {error}"))?;
    Ok(())
}

/// The raw descriptor of `listener`, for `hand_over`.
pub fn raw(listener: &TcpListener) -> RawFd {
    listener.as_raw_fd()
}

fn socket_path(path: &Path) -> anyhow::Result<String> {
    path.to_str()
        .map(str::to_owned)
        .with_context(|| format!("server.upgrade_socket: {} is not UTF-8", path.display()))
}

/// Resolves at each SIGQUIT: the signal that asks for the sockets to be handed over.
pub async fn upgrade_signal() -> Option<()> {
    let mut quit = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::quit()).ok()?;
    quit.recv().await
}

/// At SIGQUIT, hands the listening sockets to the new Switchyard waiting for them, then
/// stops (finishing what is in flight). If none takes them, goes on serving.
pub async fn on_sigquit(
    socket: std::path::PathBuf,
    listeners: Vec<(&'static str, std::os::fd::RawFd)>,
    store: std::sync::Arc<crate::store::Store>,
    stopping: tokio_util::sync::CancellationToken,
) {
    while upgrade_signal().await.is_some() {
        // The embedded store's file goes first, for the new Switchyard to open as it starts;
        // if the handover fails, it is opened again here at its next use.
        store.release_file(false).await;
        match hand_over(&socket, listeners.clone()).await {
            Ok(()) => {
                store.release_file(true).await;
                tracing::info!(
                    "handed the listening sockets to the new Switchyard; finishing what is in flight"
                );
                stopping.cancel();
                return;
            }
            Err(error) => {
                tracing::error!(%error, "SIGQUIT: the listening sockets were not handed over; still serving")
            }
        }
    }
}
