//! The `switchyard` command: run the gateway, check a configuration, serve the demo server, or
//! load-test an MCP endpoint (`bench`, with its baseline proxy `bare-hop`). The binary only
//! calls `main`: everything the command does is compiled once, here in the library.

mod commands;
mod gateway;

use std::{net::SocketAddr, path::PathBuf, process::ExitCode};

use clap::{Parser, Subcommand};
use switchyard_bench as bench;

use crate::{config, demo};

use commands::{bare_hop, check, hash_key, serve_demo_http, verify_audit};
use gateway::{Loaded, run};

/// The configuration loaded when `-c` is not given.
const DEFAULT_CONFIG: &str = "conf/switchyard.toml";

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
    Import(crate::import::ImportArgs),
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

/// The `switchyard` command, as the command line says.
pub fn main() -> ExitCode {
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
            (Some(Command::Import(args)), _) => crate::import::run(&args),
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
) -> anyhow::Result<Option<crate::telemetry::Exporter>> {
    crate::telemetry::logs::install(matches!(format, LogFormat::Json), telemetry)
}
