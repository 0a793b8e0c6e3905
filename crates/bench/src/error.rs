//! The errors that stop a bench run before or instead of a report: bad options, an endpoint
//! that is not a usable MCP server (quoted), a process that cannot be watched, a plot that
//! cannot be written. Failed requests during a run are not errors: the report counts them.

/// Why `switchyard bench` (or `bare-hop`) could not run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A fixture of `--curve` (the demo server, a gateway) could not be started or used.
    #[error("curve: {0}")]
    Fixture(String),
    /// An option's value is malformed or contradicts another option.
    #[error("{option}: {reason}")]
    Usage { option: String, reason: String },
    /// A target URL the tool cannot use.
    #[error("{url}: {reason}")]
    BadUrl { url: String, reason: String },
    /// The target's host did not resolve or refused the connection.
    #[error("{url}: cannot connect: {reason}")]
    Connect { url: String, reason: String },
    /// A setup request (initialize, tools/list, …) got no complete answer in time.
    #[error("{url}: {step} got no answer within {timeout_ms} ms")]
    Timeout {
        url: String,
        step: &'static str,
        timeout_ms: u64,
    },
    /// A setup request was answered, but not as an MCP server answers; `detail` quotes it.
    #[error("{url}: {step} failed: {detail}")]
    Setup {
        url: String,
        step: &'static str,
        detail: String,
    },
    /// The tool to call is not in the target's `tools/list`, or more than one tool matches.
    #[error("{url}: {reason}")]
    Tool { url: String, reason: String },
    /// `--mix` reads resources, none was given and `resources/list` is empty.
    #[error(
        "{url}: the mix reads a resource, but resources/list is empty (give one with --resource URI)"
    )]
    NoResource { url: String },
    /// A watched process's `/proc` files cannot be read.
    #[error("process {pid}: cannot read /proc/{pid}: {source}")]
    Process {
        pid: u32,
        #[source]
        source: std::io::Error,
    },
    /// The `--plot` file cannot be drawn or written.
    #[error("cannot write the plot {path}: {reason}")]
    Plot { path: String, reason: String },
}

impl BenchError {
    pub(crate) fn usage(option: &str, reason: impl Into<String>) -> Self {
        Self::Usage {
            option: option.to_owned(),
            reason: reason.into(),
        }
    }
}
