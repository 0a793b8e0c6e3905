//! The `switchyard` command: run the gateway, check a configuration, serve the demo server, or
//! load-test an MCP endpoint (`bench`, with its baseline proxy `bare-hop`).

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    process::ExitCode,
};

use anyhow::Context;
use clap::{Parser, Subcommand};

use switchyard::{
    Gateway, admin, auth::AdminToken, config, demo, front::Front, gateway::Written, handover,
    metrics::Metrics, passthrough, reload,
};
use switchyard_bench as bench;
use tokio_util::sync::CancellationToken;

/// mimalloc, without transparent huge pages: measured in one run against glibc's allocator,
/// 10-12 % more calls per second through the MCP endpoint and the pass-through routes at
/// 32 concurrent, at 1-2 MiB more RSS. With huge pages it was 3 % faster still but held
/// 10 MiB more from the start.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The configuration loaded when `-c` is not given.
const DEFAULT_CONFIG: &str = "conf/switchyard.toml";
/// How long shutdown waits for upstream sessions to end (processes to exit, HTTP sessions to be
/// deleted upstream), once calls in flight are done.
const CLOSE_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

#[derive(Parser)]
#[command(
    name = "switchyard",
    version,
    about = "An MCP gateway: many MCP servers behind one endpoint"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    run: RunArgs,
    /// Log lines as text (the default) or as JSON objects, one per line.
    #[arg(long, value_name = "FORMAT", default_value = "text", global = true)]
    log_format: LogFormat,
    /// Threads that serve requests (default: one per core, or `TOKIO_WORKER_THREADS`). On a
    /// machine the gateway shares with its upstreams and clients, fewer threads than cores hand
    /// fewer requests from thread to thread (measure it with `switchyard bench --pid`).
    #[arg(long, value_name = "N", global = true, value_parser = clap::value_parser!(u16).range(1..=1024))]
    worker_threads: Option<u16>,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(clap::Args, Clone)]
struct RunArgs {
    /// Configuration file: Switchyard TOML, or an MCP client's `mcpServers` JSON.
    #[arg(short, long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Address to listen on, overriding the configuration (e.g. 127.0.0.1:8080).
    #[arg(long, value_name = "ADDR")]
    listen: Option<SocketAddr>,
    /// Address of the admin listener (API, status page, /metrics), overriding `[admin] listen`.
    #[arg(long, value_name = "ADDR")]
    admin_listen: Option<SocketAddr>,
    /// Address of the pass-through routes (`/servers/{name}/mcp`), overriding
    /// `[server] passthrough_listen`.
    #[arg(long, value_name = "ADDR")]
    passthrough_listen: Option<SocketAddr>,
    /// Take the listening sockets over from the running Switchyard (zero-downtime upgrade):
    /// wait at `[server] upgrade_socket` until it is sent SIGQUIT and hands them over.
    #[arg(long)]
    upgrade: bool,
}

impl RunArgs {
    /// These arguments, with those not given taken from `other`.
    fn or(self, other: RunArgs) -> RunArgs {
        RunArgs {
            config: self.config.or(other.config),
            listen: self.listen.or(other.listen),
            admin_listen: self.admin_listen.or(other.admin_listen),
            passthrough_listen: self.passthrough_listen.or(other.passthrough_listen),
            upgrade: self.upgrade || other.upgrade,
        }
    }
}

#[derive(Subcommand)]
enum Command {
    /// Run the gateway (the default).
    Run(RunArgs),
    /// Validate a configuration and exit: 0 if it is valid, 1 with every problem if not.
    Check {
        #[arg(short, long, value_name = "FILE")]
        config: PathBuf,
    },
    /// The configuration file's format: `switchyard config schema` prints its JSON Schema.
    Config(config::command::ConfigArgs),
    /// Find the MCP servers of the clients on this machine (Claude Desktop, Claude Code,
    /// Cursor, VS Code, Windsurf, Zed) and write one Switchyard configuration with each once;
    /// optionally point a client at the gateway instead (--connect, --undo).
    Import(switchyard::import::ImportArgs),
    /// The audit log (`[audit]`).
    Audit {
        #[command(subcommand)]
        command: AuditCommand,
    },
    /// Print the `sha256 = "…"` line of `[auth.api_keys.NAME]` for an API key read from
    /// standard input (one line; keep the key itself out of the configuration).
    HashKey,
    /// Serve the demo MCP server on stdin/stdout, or over streamable HTTP with --http.
    DemoServer {
        /// Serve streamable HTTP at `http://ADDR/mcp` instead (port 0 picks a free one; the URL
        /// is printed on stdout).
        #[arg(long, value_name = "ADDR")]
        http: Option<SocketAddr>,
        /// With --http: serve this many servers, at `/mcp`, `/mcp/1`, … (for the benches).
        #[arg(long, value_name = "N", default_value_t = 1, requires = "http")]
        servers: usize,
        /// With --http: list this many more tools on each server, `tool_0`, `tool_1`, …, each
        /// sending back its text (for the benches).
        #[arg(long, value_name = "N", default_value_t = 0, requires = "http")]
        extra_tools: usize,
    },
    /// Load-test a streamable-HTTP MCP endpoint (and baselines, in turns), or soak its
    /// sessions; exits 1 if it cannot run or if any request fails.
    Bench(Box<bench::BenchArgs>),
    /// A bench helper: a bare HTTP/1.1 reverse proxy to one upstream, the baseline a gateway's
    /// overhead is compared with; given several, a round-robin balancer over them.
    BareHop {
        /// Address to listen on; port 0 picks a free one (the URL is printed on stdout).
        #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
        listen: SocketAddr,
        /// The upstream's URL (http://HOST:PORT/PATH); requests keep their own path. Repeat it
        /// to balance requests over several, in turn.
        #[arg(long, value_name = "URL", required = true)]
        upstream: Vec<String>,
    },
}

#[derive(Subcommand)]
enum AuditCommand {
    /// Check audit files, oldest first (`audit.log.2 audit.log.1 audit.log`): every record
    /// unaltered (its hash), none missing or moved between the first and the last (each names
    /// the one before it and its number), the first record the start of the chain (or the one
    /// --from names), and the last record the head the gateway kept outside the log (in its
    /// state directory), so that records cut from the end or a replaced last record show too.
    /// Exits 1 naming the first problem. Without a kept head (none found, or stdout logs), cuts
    /// at the end cannot be seen, and it says so.
    Verify {
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
        /// The number of the first record the files hold, when older files were deleted.
        #[arg(long, value_name = "SEQ")]
        from: Option<u64>,
        /// The kept head to compare the last file with [default: the one kept for it in the
        /// state directory of --config, or of the default configuration].
        #[arg(long, value_name = "FILE")]
        head: Option<PathBuf>,
        /// The gateway's configuration, for its state directory.
        #[arg(short, long, value_name = "FILE")]
        config: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // A gateway's configuration is read before logging starts: its `[telemetry]` adds the
    // exporter of traces to the logs' subscriber.
    let run_args = match &cli.command {
        None => Some(cli.run.clone()),
        Some(Command::Run(args)) => Some(args.clone().or(cli.run.clone())),
        Some(_) => None,
    };
    let loaded = match run_args.map(Loaded::read).transpose() {
        Ok(loaded) => loaded,
        Err(error) => {
            let _ = init_logging(cli.log_format, None);
            return exit_code(Err(error));
        }
    };
    let exporter = match init_logging(
        cli.log_format,
        loaded.as_ref().map(|loaded| &loaded.config.telemetry),
    ) {
        Ok(exporter) => exporter,
        Err(error) => return exit_code(Err(error)),
    };
    let code = run_command(cli, loaded);
    if let Some(exporter) = exporter {
        exporter.shutdown();
    }
    code
}

fn run_command(cli: Cli, loaded: Option<Loaded>) -> ExitCode {
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    runtime.enable_all();
    if let Some(threads) = cli.worker_threads {
        runtime.worker_threads(usize::from(threads));
    }
    let runtime = match runtime.build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("switchyard: cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async {
        let result = match (cli.command, loaded) {
            // `switchyard -c FILE run` and `switchyard run -c FILE` mean the same.
            (None | Some(Command::Run(_)), Some(loaded)) => run(loaded, cli.log_format).await,
            (None | Some(Command::Run(_)), None) => {
                unreachable!("a gateway's config is read first")
            }
            (Some(Command::Check { config }), _) => check(config),
            (Some(Command::HashKey), _) => hash_key(),
            (Some(Command::Config(args)), _) => config::command::run(&args).map_err(Into::into),
            (
                Some(Command::Audit {
                    command:
                        AuditCommand::Verify {
                            files,
                            from,
                            head,
                            config,
                        },
                }),
                _,
            ) => verify_audit(&files, from, head.as_deref(), config.as_deref()),
            (Some(Command::Import(args)), _) => switchyard::import::run(&args),
            (Some(Command::DemoServer { http: None, .. }), _) => {
                demo::serve_stdio().await.map_err(|e| anyhow::anyhow!(e))
            }
            (
                Some(Command::DemoServer {
                    http: Some(listen),
                    servers,
                    extra_tools,
                }),
                _,
            ) => {
                let fleet = demo::Fleet {
                    servers,
                    extra_tools,
                };
                serve_demo_http(listen, fleet).await
            }
            (Some(Command::Bench(args)), _) => return bench::main(&args).await,
            (Some(Command::BareHop { listen, upstream }), _) => bare_hop(listen, &upstream).await,
        };
        exit_code(result)
    })
}

/// `switchyard audit verify FILE…`.
fn verify_audit(
    files: &[PathBuf],
    from: Option<u64>,
    head: Option<&Path>,
    config: Option<&Path>,
) -> anyhow::Result<()> {
    use switchyard::audit::head as kept;
    let last = files.last().context("no file to verify")?;
    let head_at = match (head, config) {
        (Some(head), _) => head.to_path_buf(),
        (None, Some(config)) => kept::path_for(&config::load(config)?.oauth.state_dir, last),
        (None, None) => {
            let here = std::env::current_dir().unwrap_or_default();
            let state = config::default_state_dir(&config::ProcessVars, &here);
            kept::path_for(&state, last)
        }
    };
    let found = kept::read(&head_at)
        .with_context(|| format!("the kept head {} cannot be read", head_at.display()))?;
    let checks = switchyard::audit::Checks {
        from,
        head: found.filter(|found| found.names(last) || head.is_some()),
    };
    let files: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    let verified =
        switchyard::audit::verify(&files, &checks).map_err(|reason| anyhow::anyhow!(reason))?;
    println!("{}", verified.report(&head_at));
    Ok(())
}

fn exit_code(result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("switchyard: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Logs (and, with `[telemetry]`, traces) as `format` says.
fn init_logging(
    format: LogFormat,
    telemetry: Option<&config::TelemetrySettings>,
) -> anyhow::Result<Option<switchyard::telemetry::Exporter>> {
    switchyard::telemetry::logs::install(matches!(format, LogFormat::Json), telemetry)
}

fn hash_key() -> anyhow::Result<()> {
    let mut key = String::new();
    std::io::stdin()
        .read_line(&mut key)
        .context("cannot read the key from standard input")?;
    let key = key.trim_end_matches(['\r', '\n']);
    if key.len() < 16 {
        anyhow::bail!(
            "an API key needs at least 16 characters (give a random one, e.g. 32 bytes in hex)"
        );
    }
    println!("{}", switchyard::auth::api_key_line(key));
    Ok(())
}

/// A gateway's configuration, read as the command line says.
struct Loaded {
    args: RunArgs,
    path: PathBuf,
    overrides: config::Overrides,
    config: config::Config,
}

impl Loaded {
    fn read(args: RunArgs) -> anyhow::Result<Self> {
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

async fn run(loaded: Loaded, log_format: LogFormat) -> anyhow::Result<()> {
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
    let listener = inherited
        .listener("main", listen)
        .await
        .with_context(|| format!("cannot listen on {listen} (server.listen)"))?;
    let admin_listener = match config.admin.listen {
        Some(addr) => Some(
            inherited
                .listener("admin", addr)
                .await
                .with_context(|| format!("cannot listen on {addr} (admin.listen)"))?,
        ),
        None => None,
    };
    let passthrough_listener = match config.server.passthrough_listen {
        Some(addr) => Some(
            inherited
                .listener("passthrough", addr)
                .await
                .with_context(|| format!("cannot listen on {addr} (server.passthrough_listen)"))?,
        ),
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
    switchyard::audit::Audit::check(&config.audit).context("cannot open the audit log")?;
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
        switchyard::startup::tell_admin_token(&origin, &admin_token, address);
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
        tokio::spawn(switchyard::startup::announce(
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

/// Serves the demo server over streamable HTTP, announcing its URL on stdout.
async fn serve_demo_http(listen: SocketAddr, fleet: demo::Fleet) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    println!(
        "demo server listening on http://{}/mcp",
        listener.local_addr()?
    );
    demo::serve_http(listener, fleet).await?;
    Ok(())
}

/// Serves the bare hop, announcing its URL (with the upstream's path) on stdout.
async fn bare_hop(listen: SocketAddr, upstreams: &[String]) -> anyhow::Result<()> {
    let upstreams = upstreams
        .iter()
        .map(|url| bench::bare_hop::Upstream::parse(url))
        .collect::<Result<Vec<_>, _>>()?;
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    println!(
        "bare hop listening on {}",
        upstreams[0].url_through(listener.local_addr()?)
    );
    bench::bare_hop::serve(listener, upstreams, shutdown_signal()).await?;
    Ok(())
}

fn check(path: PathBuf) -> anyhow::Result<()> {
    let config = config::load(&path)?;
    for warning in config.warnings() {
        let warning = switchyard::text::printable(&warning);
        eprintln!("{}: warning: {warning}", path.display());
    }
    println!(
        "{}: valid; {} upstream{} ({})",
        path.display(),
        config.upstreams.len(),
        if config.upstreams.len() == 1 { "" } else { "s" },
        config
            .upstreams
            .iter()
            .map(|u| u.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(())
}

/// Resolves on Ctrl-C or SIGTERM.
async fn shutdown_signal() {
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
