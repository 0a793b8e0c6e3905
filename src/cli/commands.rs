//! The commands beside running the gateway: checking a configuration, hashing an API key,
//! verifying the audit log, and the demo server and bare hop the benches run.

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
};

use anyhow::Context;
use switchyard_bench as bench;

use super::gateway::shutdown_signal;

use crate::{config, demo};

/// `switchyard audit verify FILE…`.
pub(super) fn verify_audit(
    files: &[PathBuf],
    from: Option<u64>,
    head: Option<&Path>,
    config: Option<&Path>,
) -> anyhow::Result<()> {
    use crate::audit::head as kept;
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
    let checks = crate::audit::Checks {
        from,
        head: found.filter(|found| found.names(last) || head.is_some()),
    };
    let files: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    let verified =
        crate::audit::verify(&files, &checks).map_err(|reason| anyhow::anyhow!(reason))?;
    println!("{}", verified.report(&head_at));
    Ok(())
}

pub(super) fn hash_key() -> anyhow::Result<()> {
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
    println!("{}", crate::auth::api_key_line(key));
    Ok(())
}

/// Serves the demo server over streamable HTTP, announcing its URL on stdout.
pub(super) async fn serve_demo_http(listen: SocketAddr, fleet: demo::Fleet) -> anyhow::Result<()> {
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
pub(super) async fn bare_hop(listen: SocketAddr, upstreams: &[String]) -> anyhow::Result<()> {
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

pub(super) fn check(path: PathBuf) -> anyhow::Result<()> {
    let config = config::load(&path)?;
    for warning in config.warnings() {
        let warning = crate::text::printable(&warning);
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
