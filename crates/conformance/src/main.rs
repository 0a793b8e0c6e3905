//! `switchyard-conformance`: the conformance suite's fixture server (`server`), and the client
//! the suite runs for its authorization scenarios (`client`).

use std::{net::SocketAddr, process::ExitCode};

use anyhow::Context;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    version,
    about = "The MCP conformance suite's fixture and client, for Switchyard's tests"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the conformance-suite fixture over streamable HTTP (a test upstream).
    Server {
        /// Address to listen on; port 0 picks a free one (the URL is printed on stdout).
        #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
        listen: SocketAddr,
    },
    /// Act as the client of one of the suite's authorization scenarios (the suite runs it,
    /// with the scenario in its environment).
    Client {
        /// The suite's MCP server.
        url: String,
    },
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let result = match cli.command {
        Command::Server { listen } => serve(listen).await,
        Command::Client { url } => switchyard_conformance::auth_client::run(&url).await,
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("switchyard-conformance: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Serves the fixture, announcing its URL on stdout for scripts to read.
async fn serve(listen: SocketAddr) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    println!(
        "conformance fixture listening on http://{}/mcp",
        listener.local_addr()?
    );
    switchyard_conformance::serve(listener).await?;
    Ok(())
}
