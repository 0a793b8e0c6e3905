//! The stdio upstream transport: a child process speaking newline-delimited JSON-RPC on its
//! stdin/stdout (rmcp's `TokioChildProcess`), with its stderr forwarded to the log under the
//! upstream's name. The process is killed when its connection is dropped.

use std::process::Stdio;

use rmcp::transport::TokioChildProcess;
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::{config::StdioConfig, names::UpstreamName};

/// Longest stderr line logged whole; longer lines are cut (a misbehaving server must not flood).
const MAX_LOGGED_LINE: usize = 4096;

/// Starts the server process of `upstream`.
pub fn spawn(upstream: &UpstreamName, config: &StdioConfig) -> std::io::Result<TokioChildProcess> {
    let mut command = tokio::process::Command::new(&config.command);
    command.args(&config.args).envs(config.env.iter().cloned());
    if let Some(cwd) = &config.cwd {
        command.current_dir(cwd);
    }
    let (transport, stderr) = TokioChildProcess::builder(command)
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            std::io::Error::new(e.kind(), format!("cannot start `{}`: {e}", config.command))
        })?;
    if let Some(stderr) = stderr {
        let upstream = upstream.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(mut line)) = lines.next_line().await {
                if line.len() > MAX_LOGGED_LINE {
                    let cut = line.floor_char_boundary(MAX_LOGGED_LINE);
                    line.truncate(cut);
                    line.push('…');
                }
                tracing::info!(target: "switchyard::upstream::stderr", upstream = %upstream, "{line}");
            }
        });
    }
    Ok(transport)
}
