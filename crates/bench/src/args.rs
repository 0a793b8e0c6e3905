//! The options of `switchyard bench`, and their validation into a `Plan`: every default filled
//! in, every bound set (a run always stops by itself), every label and PID matched to a target.

use std::{path::PathBuf, time::Duration};

use http::{HeaderName, HeaderValue};

use super::BenchError;
pub use super::curve::CurveKind;
pub use super::mix::{EchoCheck, Era, Kind, Mix};

/// How long a run given only `--requests` may last at most.
const REQUESTS_ONLY_CAP: Duration = Duration::from_secs(300);

/// `switchyard bench URL [options]`.
#[derive(clap::Args, Debug, Clone)]
pub struct BenchArgs {
    /// The streamable-HTTP MCP endpoint to load, optionally labelled: `[LABEL=]http://HOST:PORT/PATH`.
    #[arg(value_name = "[LABEL=]URL", required_unless_present = "curve")]
    pub url: Option<String>,
    /// Client sessions to open (session era); workers are spread over them. Default 8, or 10000
    /// with --soak.
    #[arg(long, value_name = "N")]
    pub sessions: Option<usize>,
    /// Concurrent workers, each with its own keep-alive connection and one request in flight.
    #[arg(long, value_name = "C", default_value_t = 32)]
    pub concurrency: usize,
    /// Seconds to measure (default 10; with --requests alone, at most 300).
    #[arg(long, value_name = "SECONDS")]
    pub duration: Option<f64>,
    /// Measured requests to send, then stop (each round, each target).
    #[arg(long, value_name = "N")]
    pub requests: Option<u64>,
    /// Seconds of load before measuring, not counted.
    #[arg(long, value_name = "SECONDS", default_value_t = 1.0)]
    pub warmup: f64,
    /// Timeout of every request, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 5000)]
    pub timeout_ms: u64,
    /// Protocol era: `session` (initialize, Mcp-Session-Id, 2025-11-25) or `stateless`
    /// (2026-07-28: per-request _meta and Mcp-Method/Mcp-Name headers).
    #[arg(long, value_enum, default_value_t = Era::Session)]
    pub era: Era,
    /// Workload mix by weight, of `call` (tools/call), `list` (tools/list) and `read`
    /// (resources/read), e.g. `call=8,list=1,read=1`.
    #[arg(long, default_value = "call=1")]
    pub mix: Mix,
    /// The tool to call: an exact name, else the one tool named `*__NAME` (a gateway's prefix).
    #[arg(long, default_value = "echo")]
    pub tool: String,
    /// Length of the text sent to the tool (as its `--argument`).
    #[arg(long, value_name = "BYTES", default_value_t = 16)]
    pub payload_bytes: usize,
    /// The argument the text goes in, `{"NAME": …}`: `text` for Switchyard's demo server,
    /// `message` for the echo tools of most other servers.
    #[arg(long, value_name = "NAME", default_value = "text")]
    pub argument: String,
    /// How the tool's answer is checked: its first text equals the text sent (`exact`), contains
    /// it (`contains`, for echo tools that decorate), or only `isError` is checked (`off`).
    #[arg(long, value_enum, default_value_t = EchoCheck::Exact)]
    pub echo_check: EchoCheck,
    /// The resource to read (default: the first of resources/list). Resolved per target like
    /// the tool: a gateway's `UPSTREAM+URI` is found for `URI`.
    #[arg(long, value_name = "URI")]
    pub resource: Option<String>,
    /// Send `Authorization: Bearer TOKEN`.
    #[arg(long, value_name = "TOKEN")]
    pub bearer: Option<String>,
    /// An extra header on every request, `'Name: value'` (repeatable).
    #[arg(long = "header", value_name = "'NAME: VALUE'")]
    pub headers: Vec<String>,
    /// A baseline measured with the same workload in the same run (repeatable),
    /// `[LABEL=]URL`, e.g. `direct=http://127.0.0.1:9001/mcp`.
    #[arg(long = "compare", value_name = "[LABEL=]URL")]
    pub compare: Vec<String>,
    /// A process to watch (CPU per request, RSS), `[LABEL=]PID`: a bare PID is the main
    /// target's; `LABEL=PID` a baseline's (repeatable).
    #[arg(long = "pid", value_name = "[LABEL=]PID")]
    pub pids: Vec<String>,
    /// Rounds; targets take turns within each round. Default 1, 3 with --compare, 10 with --soak.
    #[arg(long, value_name = "R")]
    pub rounds: Option<u32>,
    /// Print the report as JSON on stdout (field names in the `switchyard-bench` crate's docs).
    #[arg(long)]
    pub json: bool,
    /// Draw the latency distribution of every target into this SVG file.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// No progress bar (it is also hidden when stderr is not a terminal).
    #[arg(short, long, visible_alias = "no-progress")]
    pub quiet: bool,
    /// Session-churn memory soak instead of a load: open --sessions sessions, hold them, delete
    /// them, each round, sampling the --pid process's RSS.
    #[arg(long)]
    pub soak: bool,
    /// A cost curve instead of one load: the bench starts the demo server and a gateway in
    /// front of it (this binary), and measures calls (CPU per call, p50, p99) and the gateway's
    /// RSS as `sessions` (idle ones held open, 1k → 100k), `upstreams` (1 → 200, 50 tools
    /// each) or the `catalog` (1k → 50k tools, also `tools/list`) grow. No URL then; --plot
    /// draws it.
    #[arg(long, value_enum, conflicts_with_all = ["soak", "compare"])]
    pub curve: Option<CurveKind>,
    /// Soak: milliseconds to wait after opening or closing the sessions before sampling RSS.
    #[arg(long, value_name = "MS", default_value_t = 500)]
    pub settle_ms: u64,
}

// === Plan ===

/// A target as given: label, URL, and the process to watch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetSpec {
    pub label: String,
    pub url: String,
    pub pid: Option<u32>,
}

/// The validated run.
#[derive(Clone, Debug)]
pub struct Plan {
    pub era: Era,
    pub sessions: usize,
    pub concurrency: usize,
    pub warmup: Duration,
    pub duration: Duration,
    pub requests: Option<u64>,
    pub timeout: Duration,
    pub mix: Mix,
    pub tool: String,
    /// The argument `payload` is sent in.
    pub argument: String,
    pub payload: String,
    pub echo_check: EchoCheck,
    pub resource: Option<String>,
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// The main target first, then the baselines in the order given.
    pub targets: Vec<TargetSpec>,
    pub rounds: u32,
    pub soak: bool,
    pub settle: Duration,
    pub progress: bool,
}

impl BenchArgs {
    /// Checks every option and fills in the defaults.
    pub fn plan(&self) -> Result<Plan, BenchError> {
        let targets = self.targets()?;
        let seconds = |option: &str, value: f64| {
            Duration::try_from_secs_f64(value)
                .map_err(|_| BenchError::usage(option, format!("`{value}` is not a duration")))
        };
        let duration = match (self.duration, self.requests) {
            (Some(d), _) if d <= 0.0 => return Err(BenchError::usage("--duration", "must be > 0")),
            (Some(d), _) => seconds("--duration", d)?,
            (None, Some(_)) => REQUESTS_ONLY_CAP,
            (None, None) => Duration::from_secs(10),
        };
        if self.requests == Some(0) {
            return Err(BenchError::usage("--requests", "must be at least 1"));
        }
        if self.concurrency == 0 || self.concurrency > 10_000 {
            return Err(BenchError::usage("--concurrency", "must be 1 to 10000"));
        }
        if self.timeout_ms == 0 {
            return Err(BenchError::usage("--timeout-ms", "must be at least 1"));
        }
        let sessions = self.sessions.unwrap_or(if self.soak { 10_000 } else { 8 });
        if sessions == 0 {
            return Err(BenchError::usage("--sessions", "must be at least 1"));
        }
        let default_rounds = match (self.soak, targets.len()) {
            (true, _) => 10,
            (false, 1) => 1,
            (false, _) => 3,
        };
        let rounds = self.rounds.unwrap_or(default_rounds);
        if rounds == 0 || rounds > 1000 {
            return Err(BenchError::usage("--rounds", "must be 1 to 1000"));
        }
        if self.soak {
            self.check_soak(&targets)?;
        }
        Ok(Plan {
            era: self.era,
            sessions,
            concurrency: self.concurrency,
            warmup: seconds("--warmup", self.warmup)?,
            duration,
            requests: self.requests,
            timeout: Duration::from_millis(self.timeout_ms),
            mix: self.mix,
            tool: self.tool.clone(),
            argument: self.argument.clone(),
            payload: payload(self.payload_bytes),
            echo_check: self.echo_check,
            resource: self.resource.clone(),
            headers: self.header_list()?,
            targets,
            rounds,
            soak: self.soak,
            settle: Duration::from_millis(self.settle_ms),
            progress: !self.quiet && std::io::IsTerminal::is_terminal(&std::io::stderr()),
        })
    }

    fn check_soak(&self, targets: &[TargetSpec]) -> Result<(), BenchError> {
        if self.era != Era::Session {
            return Err(BenchError::usage(
                "--soak",
                "needs --era session (sessions to churn)",
            ));
        }
        if targets.len() > 1 {
            return Err(BenchError::usage(
                "--soak",
                "takes one target, not --compare",
            ));
        }
        if targets[0].pid.is_none() {
            return Err(BenchError::usage(
                "--soak",
                "needs --pid PID (whose memory to sample)",
            ));
        }
        Ok(())
    }

    /// The targets with their labels and PIDs.
    fn targets(&self) -> Result<Vec<TargetSpec>, BenchError> {
        let given = self
            .url
            .as_deref()
            .ok_or_else(|| BenchError::usage("URL", "is required (unless --curve)"))?;
        let (label, url) = split_label(given);
        let mut targets = vec![TargetSpec {
            label: label.unwrap_or("target").to_owned(),
            url: url.to_owned(),
            pid: None,
        }];
        for (i, spec) in self.compare.iter().enumerate() {
            let (label, url) = split_label(spec);
            let label = match label {
                Some(label) => label.to_owned(),
                None if self.compare.len() == 1 => "baseline".to_owned(),
                None => format!("baseline{}", i + 1),
            };
            if targets.iter().any(|t| t.label == label) {
                return Err(BenchError::usage(
                    "--compare",
                    format!("label `{label}` is used twice"),
                ));
            }
            targets.push(TargetSpec {
                label,
                url: url.to_owned(),
                pid: None,
            });
        }
        for spec in &self.pids {
            let (label, pid) = split_label(spec);
            let pid: u32 = pid
                .parse()
                .map_err(|_| BenchError::usage("--pid", format!("`{pid}` is not a process id")))?;
            let target = match label {
                None => &mut targets[0],
                Some(label) => targets
                    .iter_mut()
                    .find(|t| t.label == label)
                    .ok_or_else(|| {
                        BenchError::usage("--pid", format!("no target is labelled `{label}`"))
                    })?,
            };
            if target.pid.replace(pid).is_some() {
                return Err(BenchError::usage(
                    "--pid",
                    format!("`{}` is given two processes", target.label),
                ));
            }
        }
        Ok(targets)
    }

    fn header_list(&self) -> Result<Vec<(HeaderName, HeaderValue)>, BenchError> {
        let mut list = Vec::new();
        for line in &self.headers {
            let bad = || BenchError::usage("--header", format!("`{line}` is not `Name: value`"));
            let (name, value) = line.split_once(':').ok_or_else(bad)?;
            let name = HeaderName::from_bytes(name.trim().as_bytes()).map_err(|_| bad())?;
            let value = HeaderValue::from_str(value.trim()).map_err(|_| bad())?;
            list.push((name, value));
        }
        if let Some(token) = &self.bearer {
            let value = HeaderValue::from_str(&format!("Bearer {token}"))
                .map_err(|_| BenchError::usage("--bearer", "the token is not a header value"))?;
            list.push((http::header::AUTHORIZATION, value));
        }
        Ok(list)
    }
}

/// Splits `LABEL=rest` when what precedes the first `=` is a plain label (so a URL's query
/// string is never taken for one).
pub fn split_label(spec: &str) -> (Option<&str>, &str) {
    match spec.split_once('=') {
        Some((label, rest))
            if !label.is_empty()
                && label
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) =>
        {
            (Some(label), rest)
        }
        _ => (None, spec),
    }
}

/// `bytes` printable ASCII characters that JSON carries unescaped.
fn payload(bytes: usize) -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    (0..bytes)
        .map(|i| char::from(ALPHABET[i % ALPHABET.len()]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        bench: BenchArgs,
    }

    fn plan(args: &[&str]) -> Result<Plan, BenchError> {
        let argv = std::iter::once("bench").chain(args.iter().copied());
        Cli::try_parse_from(argv).expect("parses").bench.plan()
    }

    #[test]
    fn labels_never_swallow_a_query_string() {
        assert_eq!(
            split_label("direct=http://h/mcp"),
            (Some("direct"), "http://h/mcp")
        );
        assert_eq!(split_label("http://h/mcp?a=b"), (None, "http://h/mcp?a=b"));
        assert_eq!(split_label("1234"), (None, "1234"));
    }

    #[test]
    fn defaults_depend_on_the_mode() {
        let single = plan(&["http://h/mcp"]).unwrap();
        assert_eq!(
            (single.rounds, single.sessions, single.concurrency),
            (1, 8, 32)
        );
        assert_eq!(single.duration, Duration::from_secs(10));
        assert_eq!(single.payload.len(), 16);
        let compared = plan(&[
            "gw=http://a/mcp",
            "--compare",
            "http://b/mcp",
            "--pid",
            "7",
            "--pid",
            "baseline=8",
        ])
        .unwrap();
        assert_eq!(compared.rounds, 3);
        let labels: Vec<_> = compared
            .targets
            .iter()
            .map(|t| (t.label.as_str(), t.pid))
            .collect();
        assert_eq!(labels, [("gw", Some(7)), ("baseline", Some(8))]);
        let counted = plan(&["http://h/mcp", "--requests", "100"]).unwrap();
        assert_eq!(counted.duration, REQUESTS_ONLY_CAP);
        let soak = plan(&["http://h/mcp", "--soak", "--pid", "1"]).unwrap();
        assert_eq!((soak.rounds, soak.sessions), (10, 10_000));
    }

    #[test]
    fn contradictions_are_refused_with_the_option_named() {
        for (args, option) in [
            (&["http://h", "--pid", "nobody=1"][..], "--pid"),
            (&["http://h", "--soak"][..], "--soak"),
            (
                &["http://h", "--soak", "--pid", "1", "--era", "stateless"][..],
                "--soak",
            ),
            (&["a=http://h", "--compare", "a=http://i"][..], "--compare"),
            (&["http://h", "--header", "no colon"][..], "--header"),
            (&["http://h", "--concurrency", "0"][..], "--concurrency"),
        ] {
            let error = plan(args).unwrap_err().to_string();
            assert!(error.starts_with(option), "{args:?}: {error}");
        }
    }
}
