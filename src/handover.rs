//! Zero-downtime upgrades by handing the listening sockets over: a new Switchyard started
//! with `--upgrade` waits at `[server] upgrade_socket` for the sockets of the running one; the
//! running one, sent SIGQUIT, hands them over there, stops accepting and finishes what it is
//! serving. The sockets never close in between: a connection waits in their queue for
//! whichever process accepts it, so none is refused.
//!
//! The transfer is one message on a Unix socket: the sockets' roles, separated by spaces, with
//! the descriptors in the same order as `SCM_RIGHTS` (the format earlier releases used, so an
//! upgrade from one of them works too).

use std::{
    collections::HashMap,
    io::{IoSlice, IoSliceMut},
    mem::MaybeUninit,
    net::SocketAddr,
    os::fd::{AsFd, OwnedFd},
    path::Path,
    time::Duration,
};

use anyhow::Context;
use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags,
};
use tokio::{
    io::Interest,
    net::{TcpListener, UnixListener, UnixStream},
};

/// How long each side waits for the other: the new process for the running one to connect,
/// the running one for the new one to listen.
const WAIT: Duration = Duration::from_secs(10);
/// The most sockets one transfer carries, and the longest list of their roles.
const MOST_SOCKETS: usize = 8;
const MOST_ROLES: usize = 1024;

/// The listening sockets taken over from the Switchyard being replaced (none without
/// `--upgrade`).
pub struct Inherited {
    by_role: HashMap<String, OwnedFd>,
}

impl Inherited {
    pub fn none() -> Self {
        Self {
            by_role: HashMap::new(),
        }
    }

    /// Waits at `path` for the running Switchyard to hand its listening sockets over (it
    /// does when sent SIGQUIT), for `WAIT`.
    pub async fn receive(path: &Path) -> anyhow::Result<Self> {
        let _ = std::fs::remove_file(path);
        let listener = UnixListener::bind(path).with_context(|| {
            format!("server.upgrade_socket: cannot listen at {}", path.display())
        })?;
        let accepted = tokio::time::timeout(WAIT, listener.accept()).await;
        let _ = std::fs::remove_file(path);
        let (stream, _) = accepted
            .map_err(|_| {
                anyhow::anyhow!(
                    "no listening sockets were handed over within {} s",
                    WAIT.as_secs()
                )
            })?
            .context("no listening sockets were handed over")?;
        let by_role = tokio::time::timeout(WAIT, receive_sockets(&stream))
            .await
            .map_err(|_| anyhow::anyhow!("the running Switchyard connected but sent nothing"))?
            .context("no listening sockets were handed over")?;
        Ok(Self { by_role })
    }

    /// The listener for `role` at `addr`: the one taken over, if it listens there (a
    /// configured port 0 takes the port in use), else a new one.
    pub async fn listener(&mut self, role: &str, addr: SocketAddr) -> std::io::Result<TcpListener> {
        if let Some(fd) = self.by_role.remove(role) {
            let listener = std::net::TcpListener::from(fd);
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
        self.by_role.clear();
    }
}

/// Reads the one message of a transfer: the sockets by role.
async fn receive_sockets(stream: &UnixStream) -> std::io::Result<HashMap<String, OwnedFd>> {
    let mut roles = [0u8; MOST_ROLES];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MOST_SOCKETS))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let received = loop {
        stream.readable().await?;
        let read = stream.try_io(Interest::READABLE, || {
            let mut slices = [IoSliceMut::new(&mut roles)];
            rustix::net::recvmsg(stream, &mut slices, &mut control, RecvFlags::CMSG_CLOEXEC)
                .map_err(std::io::Error::from)
        });
        match read {
            Ok(received) => break received,
            Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(error) => return Err(error),
        }
    };
    let mut fds = Vec::new();
    for message in control.drain() {
        if let RecvAncillaryMessage::ScmRights(rights) = message {
            fds.extend(rights);
        }
    }
    let invalid =
        |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_owned());
    let roles = std::str::from_utf8(&roles[..received.bytes.min(MOST_ROLES)])
        .map_err(|_| invalid("the sockets' roles are not UTF-8"))?;
    let roles: Vec<&str> = roles.split_ascii_whitespace().collect();
    if roles.len() != fds.len() {
        return Err(invalid(&format!(
            "{} roles came with {} sockets",
            roles.len(),
            fds.len()
        )));
    }
    Ok(roles.into_iter().map(str::to_owned).zip(fds).collect())
}

/// Hands `listeners` (by role) to the new Switchyard waiting at `path`.
pub async fn hand_over(path: &Path, listeners: &[(&'static str, OwnedFd)]) -> anyhow::Result<()> {
    let roles = listeners
        .iter()
        .map(|(role, _)| *role)
        .collect::<Vec<_>>()
        .join(" ");
    let fds: Vec<_> = listeners.iter().map(|(_, fd)| fd.as_fd()).collect();
    let stream = tokio::time::timeout(WAIT, connect(path))
        .await
        .map_err(|_| anyhow::anyhow!("no new Switchyard waits at {}", path.display()))?;
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MOST_SOCKETS))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    anyhow::ensure!(
        control.push(SendAncillaryMessage::ScmRights(&fds)),
        "more than {MOST_SOCKETS} listening sockets"
    );
    loop {
        stream.writable().await?;
        let sent = stream.try_io(Interest::WRITABLE, || {
            let slices = [IoSlice::new(roles.as_bytes())];
            rustix::net::sendmsg(&stream, &slices, &mut control, SendFlags::empty())
                .map_err(std::io::Error::from)
        });
        match sent {
            Ok(_) => return Ok(()),
            Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(error) => {
                return Err(error).context("the listening sockets could not be sent");
            }
        }
    }
}

/// Connects to the new Switchyard at `path`, trying again until it listens there.
async fn connect(path: &Path) -> UnixStream {
    loop {
        match UnixStream::connect(path).await {
            Ok(stream) => return stream,
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// A descriptor of `listener` to hand over: the same socket, kept open for the transfer
/// whatever becomes of `listener`.
pub fn shareable(listener: &TcpListener) -> std::io::Result<OwnedFd> {
    listener.as_fd().try_clone_to_owned()
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
    listeners: Vec<(&'static str, OwnedFd)>,
    store: std::sync::Arc<crate::store::Store>,
    stopping: tokio_util::sync::CancellationToken,
) {
    while upgrade_signal().await.is_some() {
        // The embedded store's file goes first, for the new Switchyard to open as it starts;
        // if the handover fails, it is opened again here at its next use.
        store.release_file(false).await;
        match hand_over(&socket, &listeners).await {
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
