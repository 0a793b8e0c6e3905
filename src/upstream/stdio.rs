//! The stdio upstream transport: a child process speaking newline-delimited JSON-RPC on its
//! stdin/stdout (carried to rmcp and the raw path by `lines`), with its stderr forwarded to
//! the log under the upstream's name. The process is asked to exit (its stdin closed) when its
//! connection closes, and killed if it does not, or when the gateway exits.
//!
//! The child starts with a clean environment: its configured `env`, the variables every
//! program expects (`BASE_ENV`), and those its `inherit_env` names. The gateway's own
//! secrets (store keys, tokens, cloud credentials) never reach it unless given on purpose.
//! With a `sandbox`, it is confined before its program runs (`sandbox`).

use std::{
    path::{Path, PathBuf},
    process::Stdio,
};

use tokio::{
    io::{AsyncBufRead, AsyncBufReadExt, BufReader},
    process::Child,
};

use crate::{config::StdioConfig, names::UpstreamName};

/// What every child gets of the gateway's environment (as the official SDKs' stdio clients
/// pass on): where programs are, whose home it is, the terminal and the locale.
pub const BASE_ENV: [&str; 11] = [
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "LC_ALL", "LC_CTYPE", "TZ",
    "TMPDIR",
];

/// Longest stderr line logged whole; longer lines are cut (a misbehaving server must not flood).
const MAX_LOGGED_LINE: usize = 4096;

/// Starts the server process of `upstream`, its stdin and stdout piped.
pub fn spawn(upstream: &UpstreamName, config: &StdioConfig) -> std::io::Result<Child> {
    let mut command = tokio::process::Command::new(&config.command);
    command
        .args(&config.args)
        .env_clear()
        .envs(inherited(&config.inherit_env, std::env::vars()))
        .envs(config.env.iter().cloned());
    if let Some(cwd) = &config.cwd {
        command.current_dir(cwd);
    }
    if let Some(sandbox) = &config.sandbox {
        let program = program(config);
        let own = (program.as_deref(), config.cwd.as_deref());
        super::sandbox::confine(&mut command, upstream.as_str(), sandbox, own).map_err(|e| {
            std::io::Error::new(e.kind(), format!("cannot start `{}`: {e}", config.command))
        })?;
    }
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| {
            std::io::Error::new(e.kind(), format!("cannot start `{}`: {e}", config.command))
        })?;
    if let Some(stderr) = child.stderr.take() {
        let upstream = upstream.clone();
        tokio::spawn(async move {
            let mut stderr = BufReader::new(stderr);
            let mut line = Vec::new();
            // Read to the end whatever it writes, so the process never blocks on a full pipe.
            while let Ok(Some(cut)) = read_line_capped(&mut stderr, &mut line).await {
                let text = String::from_utf8_lossy(&line);
                let text = text.trim_end_matches(['\n', '\r']);
                let more = if cut { "…" } else { "" };
                tracing::info!(target: "switchyard::upstream::stderr", upstream = %upstream, "{text}{more}");
            }
        });
    }
    Ok(child)
}

/// The file `config.command` names, as the child's `PATH` finds it (if it does).
fn program(config: &StdioConfig) -> Option<PathBuf> {
    let command = Path::new(&config.command);
    if config.command.contains('/') {
        let base = config
            .cwd
            .clone()
            .or_else(|| std::env::current_dir().ok())?;
        return Some(base.join(command));
    }
    let path = (config.env.iter().rev())
        .find(|(name, _)| name == "PATH")
        .map(|(_, value)| value.clone())
        .or_else(|| std::env::var("PATH").ok())?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(command))
        .find(|candidate| candidate.is_file())
}

/// The variables of `environment` a child inherits: `BASE_ENV`, and those `inherit` names
/// (`PREFIX*` names every variable starting so).
fn inherited(
    inherit: &[String],
    environment: impl Iterator<Item = (String, String)>,
) -> Vec<(String, String)> {
    let wanted = |name: &str| {
        BASE_ENV.contains(&name)
            || inherit.iter().any(|given| match given.strip_suffix('*') {
                Some(prefix) => name.starts_with(prefix),
                None => given == name,
            })
    };
    environment.filter(|(name, _)| wanted(name)).collect()
}

/// Reads one line into `line` (replacing its contents), keeping at most `MAX_LOGGED_LINE` bytes
/// of it and skipping the rest. `Some(true)` if the line was cut, `None` at the end of input.
async fn read_line_capped<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    line: &mut Vec<u8>,
) -> std::io::Result<Option<bool>> {
    line.clear();
    let mut cut = false;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok((!line.is_empty() || cut).then_some(cut));
        }
        let (chunk, end) = match available.iter().position(|&b| b == b'\n') {
            Some(at) => (&available[..=at], true),
            None => (available, false),
        };
        let room = MAX_LOGGED_LINE.saturating_sub(line.len());
        line.extend_from_slice(&chunk[..chunk.len().min(room)]);
        cut |= chunk.len() > room;
        let used = chunk.len();
        reader.consume(used);
        if end {
            return Ok(Some(cut));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_inherits_only_what_it_is_given() {
        let environment = [
            ("PATH", "/bin"),
            ("HOME", "/home/x"),
            ("AWS_SECRET_ACCESS_KEY", "s3cret"),
            ("SWITCHYARD_STORE_KEY", "k"),
            ("NODE_EXTRA_CA_CERTS", "/ca.pem"),
            ("LC_MESSAGES", "C"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()));
        let names = |inherit: &[&str]| -> Vec<String> {
            let inherit: Vec<String> = inherit.iter().map(|s| s.to_string()).collect();
            inherited(&inherit, environment.clone().into_iter())
                .into_iter()
                .map(|(name, _)| name)
                .collect()
        };
        assert_eq!(names(&[]), ["PATH", "HOME"]);
        assert_eq!(
            names(&["NODE_EXTRA_CA_CERTS", "LC_*"]),
            ["PATH", "HOME", "NODE_EXTRA_CA_CERTS", "LC_MESSAGES"]
        );
    }

    #[tokio::test]
    async fn lines_are_cut_and_invalid_utf8_does_not_stop_reading() {
        let long = vec![b'x'; MAX_LOGGED_LINE + 10];
        let mut input = Vec::new();
        input.extend_from_slice(b"first\n\xff\xfe bad\n");
        input.extend_from_slice(&long);
        input.extend_from_slice(b"\nlast");
        let mut reader = BufReader::with_capacity(16, input.as_slice());
        let mut line = Vec::new();
        let mut lines = Vec::new();
        while let Some(cut) = read_line_capped(&mut reader, &mut line).await.unwrap() {
            lines.push((String::from_utf8_lossy(&line).into_owned(), cut));
        }
        assert_eq!(lines.len(), 4);
        assert_eq!(lines[0], ("first\n".to_owned(), false));
        assert!(lines[1].0.ends_with(" bad\n") && !lines[1].1);
        assert_eq!(lines[2].0.len(), MAX_LOGGED_LINE);
        assert!(lines[2].1);
        assert_eq!(lines[3], ("last".to_owned(), false));
    }
}
