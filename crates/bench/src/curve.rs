//! `--curve KIND`: how the gateway's costs grow with what it holds. The bench starts its own
//! fixtures, from the binary it runs in: the demo server over streamable HTTP (`demo-server
//! --http`, several servers and many tools on one address) and a gateway in front of it
//! (`-c FILE`, a configuration written for the step). At each step it measures a load of
//! `tools/call echo` (and, for the catalog, of `tools/list`'s first page): the gateway's CPU per
//! call, p50 and p99, and its RSS.
//!
//! - `sessions`: idle client sessions held open beside the load, 1,000 → 100,000; one upstream.
//! - `upstreams`: 1 → 200 upstreams of 50 tools each.
//! - `catalog`: 1,000 → 50,000 tools, over 10 upstreams.

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    sync::Arc,
    time::Duration,
};

use http_body_util::BodyExt;
use serde::Serialize;
use tokio::{
    io::{AsyncBufReadExt, BufReader},
    process::{Child, Command},
};

use super::{
    BenchArgs, BenchError, churn,
    load::{self, Target},
    mix::Mix,
    procfs,
    progress::Progress,
    report::{self, RoundReport},
    setup,
    wire::Endpoint,
};

/// Tools of the demo server itself (echo, add, text_stats, now, increment, slow_task).
const DEMO_TOOLS: usize = 6;
/// How long the fixtures may take to come up.
const READY_WITHIN: Duration = Duration::from_secs(120);
/// Idle sessions opened at once.
const OPENING: usize = 64;

/// What grows along a curve.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CurveKind {
    /// Idle client sessions held open.
    Sessions,
    /// Upstreams, of 50 tools each.
    Upstreams,
    /// Tools in the catalog, over 10 upstreams.
    Catalog,
}

impl CurveKind {
    /// The steps, and what they count.
    fn steps(self) -> (&'static [u64], &'static str) {
        match self {
            CurveKind::Sessions => (&[1_000, 3_000, 10_000, 30_000, 100_000], "idle sessions"),
            CurveKind::Upstreams => (&[1, 10, 50, 100, 200], "upstreams (50 tools each)"),
            CurveKind::Catalog => (
                &[1_000, 5_000, 10_000, 25_000, 50_000],
                "tools (over 10 upstreams)",
            ),
        }
    }
}

/// A curve: one point per step.
#[derive(Serialize, Debug)]
pub struct CurveReport {
    pub kind: CurveKind,
    /// What `x` counts.
    pub x: &'static str,
    pub points: Vec<CurvePoint>,
}

#[derive(Serialize, Debug)]
pub struct CurvePoint {
    pub x: u64,
    /// `tools/call echo`.
    pub call: Measured,
    /// `tools/list`, its first page (the catalog curve only).
    pub list: Option<Measured>,
    /// The gateway's RSS after the step's load.
    pub rss_kib: u64,
}

/// One load of one step.
#[derive(Serialize, Debug, Clone, Copy)]
pub struct Measured {
    pub rps: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub cpu_ms_per_request: Option<f64>,
    pub failed: u64,
}

/// Runs the curve `kind` with the load settings of `args` (concurrency, duration, sessions).
pub async fn run(
    kind: CurveKind,
    args: &BenchArgs,
    progress: &Progress,
) -> Result<CurveReport, BenchError> {
    let binary = std::env::current_exe().map_err(|error| fixture("find this binary", error))?;
    let dir = tempfile::tempdir().map_err(|error| fixture("make a directory", error))?;
    let (steps, x) = kind.steps();
    let mut points = Vec::with_capacity(steps.len());
    match kind {
        CurveKind::Sessions => {
            let demo = Fixture::demo(&binary, 1, 0).await?;
            let gateway = Fixture::gateway(&binary, dir.path(), &demo.urls(1)).await?;
            let endpoint = Arc::new(Endpoint::resolve(&gateway.url, &[]).await?);
            let mut held = Vec::new();
            for &step in steps {
                let wanted = usize::try_from(step).unwrap_or(usize::MAX);
                progress.note(&format!("opening idle sessions up to {step}"));
                let opened =
                    churn::open_many(&endpoint, wanted - held.len(), OPENING, load_timeout(args))
                        .await;
                if let Some(failure) = opened.failures.first() {
                    return Err(BenchError::Fixture(format!(
                        "{} idle sessions did not open, the first: {}",
                        opened.failures.len(),
                        failure.detail
                    )));
                }
                held.extend(opened.contexts);
                points.push(measure(args, &gateway, step, "u0__echo", false, progress).await?);
            }
        }
        CurveKind::Upstreams => {
            let most = steps.iter().copied().max().unwrap_or(1) as usize;
            let demo = Fixture::demo(&binary, most, 50 - DEMO_TOOLS).await?;
            for &step in steps {
                let urls = demo.urls(step as usize);
                let gateway = Fixture::gateway(&binary, dir.path(), &urls).await?;
                points.push(measure(args, &gateway, step, "u0__echo", false, progress).await?);
            }
        }
        CurveKind::Catalog => {
            const UPSTREAMS: usize = 10;
            for &step in steps {
                let each = (step as usize / UPSTREAMS).saturating_sub(DEMO_TOOLS);
                let demo = Fixture::demo(&binary, UPSTREAMS, each).await?;
                let gateway = Fixture::gateway(&binary, dir.path(), &demo.urls(UPSTREAMS)).await?;
                points.push(measure(args, &gateway, step, "u0__echo", true, progress).await?);
            }
        }
    }
    Ok(CurveReport { kind, x, points })
}

/// The loads of one step against `gateway`: calls of `tool`, and with `lists`, the first page
/// of `tools/list`.
async fn measure(
    args: &BenchArgs,
    gateway: &Fixture,
    x: u64,
    tool: &str,
    lists: bool,
    progress: &Progress,
) -> Result<CurvePoint, BenchError> {
    let call = load_once(args, gateway, tool, Mix::CALLS, x, progress).await?;
    let list = match lists {
        true => Some(load_once(args, gateway, tool, Mix::LISTS, x, progress).await?),
        false => None,
    };
    let rss_kib = procfs::rss_kib(gateway.pid).map_err(|source| BenchError::Process {
        pid: gateway.pid,
        source,
    })?;
    Ok(CurvePoint {
        x,
        call,
        list,
        rss_kib,
    })
}

/// A load with the settings of `args` against `gateway`: `--rounds` phases (default 3), their
/// medians.
async fn load_once(
    args: &BenchArgs,
    gateway: &Fixture,
    tool: &str,
    mix: Mix,
    x: u64,
    progress: &Progress,
) -> Result<Measured, BenchError> {
    let mut step = args.clone();
    step.url = Some(format!("gateway={}", gateway.url));
    step.pids = vec![gateway.pid.to_string()];
    step.compare.clear();
    step.rounds = Some(args.rounds.unwrap_or(3));
    step.mix = mix;
    step.tool = tool.to_owned();
    step.curve = None;
    step.plot = None;
    let plan = step.plan()?;
    let target: Target = setup::prepare(&plan, &plan.targets[0], progress).await?;
    let kind = if mix == Mix::LISTS { "lists" } else { "calls" };
    let mut rounds = Vec::new();
    for round in 1..=plan.rounds {
        let title = format!("{x}: {kind}, round {round}");
        let phase = load::run_phase(&plan, &target, &title, progress).await?;
        rounds.push(RoundReport::of(round, &phase));
    }
    let median = report::summarize(&rounds);
    Ok(Measured {
        rps: median.rps,
        p50_ms: median.latency_ms.p50,
        p99_ms: median.latency_ms.p99,
        cpu_ms_per_request: median.target_cpu_ms_per_request,
        failed: median.failed,
    })
}

fn load_timeout(args: &BenchArgs) -> Duration {
    Duration::from_millis(args.timeout_ms)
}

/// A process the bench started; killed when dropped.
struct Fixture {
    child: Child,
    pid: u32,
    /// Where it serves MCP.
    url: String,
    /// Where its errors go.
    log: PathBuf,
}

impl Fixture {
    /// The demo server with `servers` servers of `extra` more tools each.
    async fn demo(binary: &Path, servers: usize, extra: usize) -> Result<Self, BenchError> {
        let mut command = Command::new(binary);
        command.args(["demo-server", "--http", "127.0.0.1:0"]);
        command.args(["--servers", &servers.to_string()]);
        command.args(["--extra-tools", &extra.to_string()]);
        let mut child = spawn(command, Stdio::piped())?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| no_output("demo server"))?;
        let (mut line, mut stdout) = (String::new(), BufReader::new(stdout));
        let read = stdout.read_line(&mut line);
        tokio::time::timeout(READY_WITHIN, read)
            .await
            .map_err(|_| no_output("demo server"))?
            .map_err(|error| fixture("read the demo server's address", error))?;
        let url = line
            .trim()
            .rsplit(' ')
            .next()
            .filter(|url| url.starts_with("http://"))
            .ok_or_else(|| no_output("demo server"))?
            .to_owned();
        let pid = child.id().unwrap_or_default();
        Ok(Self {
            child,
            pid,
            url,
            log: PathBuf::from("(the bench's standard error)"),
        })
    }

    /// The URLs of the first `count` servers of a demo fixture.
    fn urls(&self, count: usize) -> Vec<String> {
        (0..count.max(1))
            .map(|i| match i {
                0 => self.url.clone(),
                i => format!("{}/{i}", self.url),
            })
            .collect()
    }

    /// A gateway in front of `upstreams` (named `u0`, `u1`, …), once
    /// every upstream is ready and its catalog built.
    async fn gateway(binary: &Path, dir: &Path, upstreams: &[String]) -> Result<Self, BenchError> {
        let port = free_port().await?;
        let config = gateway_config(port, dir, upstreams);
        let path = dir.join("gateway.toml");
        std::fs::write(&path, config).map_err(|error| fixture("write the configuration", error))?;
        let mut command = Command::new(binary);
        command.arg("-c").arg(&path).env("RUST_LOG", "warn");
        let log = std::fs::File::create(dir.join("gateway.log"))
            .map_err(|error| fixture("write the gateway's log", error))?;
        command.stderr(log);
        let child = spawn(command, Stdio::null())?;
        let pid = child.id().unwrap_or_default();
        let gateway = Self {
            child,
            pid,
            url: format!("http://127.0.0.1:{port}/mcp"),
            log: dir.join("gateway.log"),
        };
        gateway.ready(port).await?;
        Ok(gateway)
    }

    /// Waits for `/healthz` to say every upstream is ready with the same number of tools twice
    /// in a row.
    async fn ready(&self, port: u16) -> Result<(), BenchError> {
        let client: HealthClient =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build_http();
        let started = tokio::time::Instant::now();
        let mut last = None;
        while started.elapsed() < READY_WITHIN {
            tokio::time::sleep(Duration::from_millis(200)).await;
            let Some(health) = health(&client, port).await else {
                continue;
            };
            let ok = health.get("status").and_then(|s| s.as_str()) == Some("ok");
            let tools = health.get("tools").and_then(|t| t.as_u64());
            if ok && tools.is_some() && tools == last {
                return Ok(());
            }
            last = if ok { tools } else { None };
        }
        Err(BenchError::Fixture(format!(
            "the gateway at {} did not get ready within {}s (its log: {})",
            self.url,
            READY_WITHIN.as_secs(),
            self.log.display()
        )))
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

/// Starts `command`, its output to `stdout` (its errors where the command says, else to the
/// bench's).
fn spawn(mut command: Command, stdout: Stdio) -> Result<Child, BenchError> {
    command
        .stdin(Stdio::null())
        .stdout(stdout)
        .kill_on_drop(true)
        .spawn()
        .map_err(|error| fixture("start a fixture", error))
}

/// The gateway's configuration: its listener on `port`, no admin listener, sessions in memory,
/// every name prefixed with its upstream's.
fn gateway_config(port: u16, dir: &Path, upstreams: &[String]) -> String {
    let state: PathBuf = dir.join("state");
    let mut config = format!(
        "[server]\nlisten = \"127.0.0.1:{port}\"\n\n[admin]\nenabled = false\n\n\
         [store]\nkind = \"memory\"\n\n[oauth]\nstate_dir = {state:?}\n\n\
         [catalog]\nprefix_mode = \"always\"\n"
    );
    for (i, url) in upstreams.iter().enumerate() {
        config.push_str(&format!(
            "\n[upstreams.u{i}]\ntransport = \"streamable_http\"\nurl = {url:?}\n"
        ));
    }
    config
}

/// A port free on 127.0.0.1 now.
async fn free_port() -> Result<u16, BenchError> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|error| fixture("find a free port", error))?;
    let port = listener
        .local_addr()
        .map_err(|error| fixture("find a free port", error))?
        .port();
    Ok(port)
}

/// The gateway's `/healthz`, if it answers.
async fn health(client: &HealthClient, port: u16) -> Option<serde_json::Value> {
    let uri = format!("http://127.0.0.1:{port}/healthz").parse().ok()?;
    let response = client.get(uri).await.ok()?;
    let body = response.into_body().collect().await.ok()?.to_bytes();
    serde_json::from_slice(&body).ok()
}

/// What asks a gateway fixture's `/healthz`.
type HealthClient = hyper_util::client::legacy::Client<
    hyper_util::client::legacy::connect::HttpConnector,
    http_body_util::Empty<bytes::Bytes>,
>;

fn fixture(what: &str, error: std::io::Error) -> BenchError {
    BenchError::Fixture(format!("cannot {what}: {error}"))
}

fn no_output(what: &str) -> BenchError {
    BenchError::Fixture(format!("the {what} did not say where it listens"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn measured(cpu: f64) -> Measured {
        Measured {
            rps: 1000.0,
            p50_ms: 1.0,
            p99_ms: 2.0,
            cpu_ms_per_request: Some(cpu),
            failed: 0,
        }
    }

    #[test]
    fn the_gateway_config_names_every_upstream_and_no_admin_listener() {
        let dir = tempfile::tempdir().unwrap();
        let urls = [
            "http://127.0.0.1:1/mcp".to_owned(),
            "http://127.0.0.1:1/mcp/1".to_owned(),
        ];
        let config = gateway_config(4242, dir.path(), &urls);
        assert!(config.contains("listen = \"127.0.0.1:4242\""), "{config}");
        assert!(config.contains("[admin]\nenabled = false"), "{config}");
        assert!(config.contains("prefix_mode = \"always\""), "{config}");
        assert!(config.contains(
            "[upstreams.u0]\ntransport = \"streamable_http\"\nurl = \"http://127.0.0.1:1/mcp\""
        ));
        assert!(config.contains(
            "[upstreams.u1]\ntransport = \"streamable_http\"\nurl = \"http://127.0.0.1:1/mcp/1\""
        ));
    }

    #[test]
    fn a_curve_is_drawn_with_its_three_panels() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("curve.svg");
        let points = [1_000, 10_000, 50_000]
            .into_iter()
            .map(|x| CurvePoint {
                x,
                call: measured(0.03),
                list: Some(measured(0.5)),
                rss_kib: 30_000 + x,
            })
            .collect();
        let curve = CurveReport {
            kind: CurveKind::Catalog,
            x: "tools (over 10 upstreams)",
            points,
        };
        super::super::plot::draw_curve(&path, &curve).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..80.min(svg.len())]);
        for text in [
            "gateway CPU per request",
            "p99 latency (ms)",
            "gateway RSS (MiB)",
            "tools/list",
            "10k",
        ] {
            assert!(svg.contains(text), "{text} in the plot");
        }
    }
}
