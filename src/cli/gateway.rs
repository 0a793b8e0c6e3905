//! `switchyard run`: the gateway started on its configuration, its listeners (taken over from a
//! running Switchyard with `--upgrade`), and its orderly stop.

use std::path::PathBuf;

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use crate::{
    Gateway, admin, auth::AdminToken, config, front::Front, gateway::Written, handover,
    metrics::Metrics, passthrough, reload,
};

use super::{DEFAULT_CONFIG, LogFormat, RunArgs};

/// How long shutdown waits for upstream sessions to end (processes to exit, HTTP sessions to be
/// deleted upstream), once calls in flight are done.
const CLOSE_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// A gateway's configuration, read as the command line says.
pub(super) struct Loaded {
    args: RunArgs,
    path: PathBuf,
    overrides: config::Overrides,
    pub(super) config: config::Config,
}

impl Loaded {
    pub(super) fn read(args: RunArgs) -> anyhow::Result<Self> {
        let path = args
            .config
            .clone()
            .unwrap_or_else(|| PathBuf::from(DEFAULT_CONFIG));
        let overrides = config::Overrides {
            listen: args.listen,
            admin_listen: args.admin_listen,
            passthrough_listen: args.passthrough_listen,
        };
        let config = config::load_overridden(&path, &overrides)?;
        Ok(Self {
            args,
            path,
            overrides,
            config,
        })
    }
}

pub(super) async fn run(loaded: Loaded, log_format: LogFormat) -> anyhow::Result<()> {
    let Loaded {
        args,
        path,
        overrides,
        mut config,
    } = loaded;
    let written = Written::in_file(&path, &config, &overrides);
    let (admin_token, origin) = AdminToken::for_config(&config).context(
        "cannot read or make the admin token ([admin] token, or admin.token in [oauth] state_dir)",
    )?;
    let listen = config.server.listen;
    let endpoint = config.server.endpoint_path.clone();
    let upgrade_socket = config.server.upgrade_socket.clone();
    let mut inherited = if args.upgrade {
        tracing::info!(socket = %upgrade_socket.display(), "waiting for the running Switchyard's listening sockets (send it SIGQUIT)");
        handover::Inherited::receive(&upgrade_socket).await?
    } else {
        handover::Inherited::none()
    };
    let listener = listen_as(&mut inherited, "main", listen, "server.listen").await?;
    let admin_listener = match config.admin.listen {
        Some(addr) => Some(listen_as(&mut inherited, "admin", addr, "admin.listen").await?),
        None => None,
    };
    let passthrough_listener = match config.server.passthrough_listen {
        Some(addr) => {
            let key = "server.passthrough_listen";
            Some(listen_as(&mut inherited, "passthrough", addr, key).await?)
        }
        None => None,
    };
    inherited.close_unclaimed();
    // The addresses actually bound (port 0 picks one), for the OAuth redirect URI and reports.
    config.server.listen = listener.local_addr()?;
    if let Some(admin) = &admin_listener {
        config.admin.listen = Some(admin.local_addr()?);
    }
    if let Some(passthrough) = &passthrough_listener {
        config.server.passthrough_listen = Some(passthrough.local_addr()?);
    }
    // What a SIGQUIT hands over to a new Switchyard.
    let handed: Vec<(&'static str, std::os::fd::OwnedFd)> = [
        Some(("main", &listener)),
        admin_listener.as_ref().map(|l| ("admin", l)),
        passthrough_listener.as_ref().map(|l| ("passthrough", l)),
    ]
    .into_iter()
    .flatten()
    .map(|(role, listener)| handover::shareable(listener).map(|fd| (role, fd)))
    .collect::<Result<_, _>>()
    .context("cannot keep the listening sockets for an upgrade")?;
    let metrics = Metrics::new(prometheus::Registry::new())
        .map(std::sync::Arc::new)
        .context("cannot register the metrics")?;
    crate::audit::Audit::check(&config.audit).context("cannot open the audit log")?;
    let gateway = Gateway::start_with(config, metrics);
    open_store(&gateway, args.upgrade).await?;
    gateway.set_written(written).await;
    let stopping = CancellationToken::new();
    reload::spawn_watcher(gateway.clone(), stopping.clone());
    reload::spawn_sighup(gateway.clone(), stopping.clone());
    let front = Front::new(gateway.clone(), admin_token.clone());
    let admin_address = admin_listener
        .as_ref()
        .map(|l| l.local_addr())
        .transpose()?;
    if let Some(admin_listener) = admin_listener {
        let address = admin_listener.local_addr()?;
        tracing::info!("admin API, status page and metrics on http://{address}/");
        crate::startup::tell_admin_token(&origin, &admin_token, address);
        let admin_stop = stopping.clone();
        tokio::spawn(admin::serve(
            admin_listener,
            gateway.clone(),
            front.mcp.clone(),
            admin_token,
            async move { admin_stop.cancelled().await },
        ));
    }
    let mut passthrough = None;
    if let Some(passthrough_listener) = passthrough_listener {
        tracing::info!(
            "pass-through routes on http://{}/servers/{{name}}/mcp",
            passthrough_listener.local_addr()?
        );
        passthrough = Some(tokio::spawn(passthrough::serve(
            passthrough_listener,
            gateway.clone(),
            front.mcp.clone(),
            stopping.clone(),
        )));
    }
    tokio::spawn(handover::on_sigquit(
        upgrade_socket,
        handed,
        gateway.store().clone(),
        stopping.clone(),
    ));
    tracing::info!(
        config = %path.display(),
        "serving MCP on http://{}{endpoint}",
        listener.local_addr()?
    );
    if matches!(log_format, LogFormat::Text) {
        let mcp_url = format!("http://{}{endpoint}", listener.local_addr()?);
        let admin_url = admin_address.map(|address| format!("http://{address}/"));
        tokio::spawn(crate::startup::announce(
            gateway.clone(),
            mcp_url,
            admin_url,
        ));
    }
    let stop = stopping.clone();
    front
        .serve(listener, gateway.clone(), async move {
            tokio::select! {
                () = shutdown_signal() => {}
                () = stop.cancelled() => {}
            }
            stop.cancel();
        })
        .await?;
    if let Some(passthrough) = passthrough {
        let _ = passthrough.await;
    }
    gateway.close(CLOSE_GRACE).await;
    tracing::info!("stopped");
    Ok(())
}

/// The listening socket for `role` at `addr`, taken over from the process being upgraded or
/// bound anew; an error names the configuration `key` that set the address.
async fn listen_as(
    inherited: &mut handover::Inherited,
    role: &str,
    addr: std::net::SocketAddr,
    key: &str,
) -> anyhow::Result<tokio::net::TcpListener> {
    inherited
        .listener(role, addr)
        .await
        .with_context(|| format!("cannot listen on {addr} ({key})"))
}

/// Opens the store now, so that a file another Switchyard holds stops this one at start
/// rather than leaving its sessions unkept. Taking over (`--upgrade`), the running one lets
/// go of it as it hands over its sockets: waited for a little.
async fn open_store(gateway: &Gateway, upgrade: bool) -> anyhow::Result<()> {
    let store = gateway.store();
    let wait = std::time::Duration::from_secs(if upgrade { 10 } else { 0 });
    let deadline = std::time::Instant::now() + wait;
    loop {
        match store.check().await {
            Ok(()) => return Ok(()),
            Err(_) if std::time::Instant::now() < deadline => {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            Err(error) => {
                return Err(anyhow::anyhow!(
                    "{error} ([store]; kind = \"memory\" keeps sessions in this process alone)"
                ));
            }
        }
    }
}

/// Resolves on Ctrl-C or SIGTERM.
pub(super) async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(term) => term,
                Err(_) => return std::future::pending().await,
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
    tracing::info!("shutting down");
}
