//! `switchyard bench`, `bare-hop` and `demo-server --http` as a user runs them: the built binary
//! against the demo server over HTTP, a gateway in front of it, and the bare hop; endpoints that
//! are not MCP servers, or never answer, fail the run quickly with the answer quoted; the soak
//! reports per-round memory.

use std::{process::Stdio, time::Duration};

use serde_json::Value;
use tokio::{
    io::{AsyncBufReadExt, BufReader},
    net::TcpListener,
    process::{Child, Command},
};

use crate::harness::{GatewayBuilder, SWITCHYARD};

/// No bench run in these tests may take longer than this.
const RUN_LIMIT: Duration = Duration::from_secs(90);

/// The demo server over streamable HTTP, in this process.
pub async fn demo_http() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(switchyard::demo::serve_http(listener, Default::default()));
    url
}

/// What a finished `switchyard bench` run left.
pub struct Run {
    success: bool,
    stdout: String,
    stderr: String,
}

impl Run {
    pub fn json(&self) -> Value {
        assert!(
            self.success,
            "bench failed:\n{}\n{}",
            self.stderr, self.stdout
        );
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}", self.stdout))
    }
}

/// Runs `switchyard bench ARGS` (whitespace-separated) to its end.
pub async fn bench(args: &str) -> Run {
    let child = Command::new(SWITCHYARD)
        .arg("bench")
        .args(args.split_whitespace())
        .arg("--no-progress")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let output = tokio::time::timeout(RUN_LIMIT, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("bench {args} did not stop by itself"))
        .unwrap();
    Run {
        success: output.status.success(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// Starts `switchyard ARGS` and returns it with the URL it prints on its first line.
pub async fn spawn_server(args: &[&str]) -> (Child, String) {
    let mut child = Command::new(SWITCHYARD)
        .args(args)
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .expect("the server starts")
        .unwrap()
        .expect("a line with the URL");
    let url = line.split_whitespace().last().unwrap().to_owned();
    assert!(url.starts_with("http://127.0.0.1:"), "{line}");
    (child, url)
}

/// Checks one target of a report: it ran, with no failure, and called `tool`.
fn assert_clean(target: &Value, label: &str, tool: &str) {
    assert_eq!(target["label"], label, "{target:#}");
    assert_eq!(target["tool"], tool, "{target:#}");
    let median = &target["median"];
    assert!(median["requests"].as_u64().unwrap() > 0, "{target:#}");
    assert_eq!(median["failed"], 0, "{target:#}");
    assert_eq!(target["errors"], Value::Array(vec![]), "{target:#}");
    let latency = &median["latency_ms"];
    let p50 = latency["p50"].as_f64().unwrap();
    for (lower, higher) in [
        ("p50", "p90"),
        ("p90", "p99"),
        ("p99", "p999"),
        ("p999", "max"),
    ] {
        assert!(
            latency[lower].as_f64() <= latency[higher].as_f64(),
            "{latency}"
        );
    }
    assert!(p50 > 0.0, "{latency}");
    let round = &target["rounds"][0];
    for method in ["tools/call", "tools/list", "resources/read"] {
        assert!(
            round["by_method"][method].as_u64().unwrap() > 0,
            "{round:#}"
        );
    }
    assert!(
        round["bench_cpu_ms_per_request"].as_f64().is_some(),
        "{round:#}"
    );
    assert!(round["machine_cores"].as_f64().unwrap() > 0.0, "{round:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_compares_a_gateway_with_its_upstream_in_both_eras() {
    let demo = demo_http().await;
    let gw = GatewayBuilder::new().http("demo", &demo).start().await;
    let direct = format!("direct={demo}");
    for era in ["session", "stateless"] {
        let resource = match era {
            // Resolved per target: `demo+demo://about` through the gateway.
            "stateless" => "--resource demo://about",
            _ => "",
        };
        let report = bench(&format!(
            "{} --duration 1 --warmup 0 --sessions 2 --concurrency 4 --json --compare {direct} \
             --rounds 1 --mix call=8,list=1,read=1 --era {era} {resource}",
            gw.url()
        ))
        .await
        .json();
        assert_eq!(report["settings"]["era"], era);
        let targets = report["targets"].as_array().unwrap();
        assert_eq!(targets.len(), 2, "{report:#}");
        assert_clean(&targets[0], "target", "demo__echo");
        assert_clean(&targets[1], "direct", "echo");
        assert_eq!(targets[0]["resource"], "demo+demo://about");
        assert_eq!(targets[1]["resource"], "demo://about");
        let ratio = &report["ratios"][0];
        assert_eq!(
            (&ratio["target"], &ratio["baseline"]),
            (&"target".into(), &"direct".into())
        );
        assert!(ratio["throughput_pct"].as_f64().unwrap() > 0.0, "{ratio}");
        assert!(
            ratio["added_p50_ms"].is_f64() && ratio["added_p99_ms"].is_f64(),
            "{ratio}"
        );
        if era == "session" {
            assert_eq!(targets[0]["rounds"][0]["sessions_not_deleted"], 0);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bare_hop_forwards_a_whole_bench_run() {
    let (_demo, demo_url) = spawn_server(&["demo-server", "--http", "127.0.0.1:0"]).await;
    let (hop, hop_url) = spawn_server(&[
        "bare-hop",
        "--listen",
        "127.0.0.1:0",
        "--upstream",
        &demo_url,
    ])
    .await;
    let pid = hop.id().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let plot = dir.path().join("latency.svg");
    let report = bench(&format!(
        "hop={hop_url} --duration 1 --warmup 0 --sessions 2 --concurrency 4 --json \
         --mix call=8,list=1,read=1 --pid {pid} --plot {}",
        plot.display()
    ))
    .await
    .json();
    let target = &report["targets"][0];
    assert_clean(target, "hop", "echo");
    let round = &target["rounds"][0];
    assert!(
        round["target_cpu_ms_per_request"].as_f64().is_some(),
        "{round:#}"
    );
    let rss = &round["target_rss_kib"];
    assert!(
        rss["peak"].as_u64().unwrap() >= rss["start"].as_u64().unwrap(),
        "{rss}"
    );
    let svg = std::fs::read_to_string(&plot).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("hop"), "{svg:.200}");
}

#[tokio::test]
async fn a_server_that_is_not_mcp_fails_the_run_quoting_its_answer() {
    let addr =
        crate::harness::answering(404, "text/plain; charset=utf-8", "nothing to see here").await;
    let url = format!("http://{addr}/mcp");
    let run = bench(&format!("{url} --duration 1 --warmup 0")).await;
    assert!(!run.success);
    assert!(
        run.stderr
            .contains(&format!("{url}: initialize failed: HTTP 404 Not Found"))
            && run.stderr.contains("nothing to see here"),
        "{}",
        run.stderr
    );

    let https = bench("https://127.0.0.1:1/mcp").await;
    assert!(!https.success);
    assert!(
        https.stderr.contains("plain http:// only"),
        "{}",
        https.stderr
    );
}

#[tokio::test]
async fn a_server_that_never_answers_fails_by_the_timeout() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    // Accepts connections and holds them, reading nothing and answering nothing.
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    let started = std::time::Instant::now();
    let run = bench(&format!("{url} --timeout-ms 300 --duration 1")).await;
    assert!(!run.success);
    assert!(
        run.stderr
            .contains("initialize got no answer within 300 ms"),
        "{}",
        run.stderr
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_soak_reports_memory_per_round() {
    let demo = demo_http().await;
    let gw = GatewayBuilder::new().http("demo", &demo).start().await;
    let pid = std::process::id().to_string();
    let report = bench(&format!(
        "{} --soak --sessions 50 --rounds 2 --concurrency 8 --pid {pid} --settle-ms 50 --json",
        gw.url()
    ))
    .await
    .json();
    assert_eq!(report["mode"], "soak");
    let soak = &report["soak"];
    assert!(soak["idle_rss_kib"].as_u64().unwrap() > 0, "{soak:#}");
    let rounds = soak["rounds"].as_array().unwrap();
    assert_eq!(rounds.len(), 2, "{soak:#}");
    for round in rounds {
        assert_eq!(round["opened"], 50, "{round}");
        assert_eq!(
            (&round["open_failures"], &round["close_failures"]),
            (&0.into(), &0.into())
        );
        assert!(round["kib_per_session"].is_f64(), "{round}");
        assert!(
            round["rss_after_close_kib"].as_u64().unwrap() > 0,
            "{round}"
        );
    }
    assert!(soak["growth_pct"].is_f64(), "{soak:#}");
    assert_eq!(soak["errors"], Value::Array(vec![]));
    // The gateway's sessions are all gone.
    assert_eq!(gw.health().await["sessions"], 0, "{}", gw.health().await);
}

/// The gateway configurations the bench README starts.
#[test]
fn the_bench_gateway_configurations_load() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("benches");
    let config = switchyard::config::load(&dir.join("gateway.toml")).unwrap();
    let names: Vec<_> = config.upstreams.iter().map(|u| u.name.as_str()).collect();
    assert_eq!(names, ["demo"]);
    assert!(config.upstreams[0].items.validate_arguments);
    let unchecked = switchyard::config::load(&dir.join("gateway-unchecked.toml")).unwrap();
    assert!(!unchecked.upstreams[0].items.validate_arguments);
    let audited = switchyard::config::load(&dir.join("gateway-audited.toml")).unwrap();
    assert!(audited.audit.output.is_some());
}
