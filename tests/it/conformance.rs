//! The official conformance suite (`@modelcontextprotocol/conformance`), run against Switchyard's
//! conformance fixture directly and against Switchyard fronting it unprefixed: the scored
//! scenarios pass both ways, and every check that passes directly passes through the gateway.
//!
//! A check passes when its status is SUCCESS, INFO or SKIPPED; FAILURE and WARNING fail it.
//! (Through the gateway one check turns from SUCCESS to INFO: Switchyard answers simple 2026-07-28
//! requests with JSON instead of an SSE stream, which the suite reports as a valid choice.)
//! Besides the frozen requirement sets, `--suite all` runs every scenario the suite has,
//! extensions (the tasks extension among them) and pending ones included.

use std::{collections::BTreeMap, path::Path, time::Duration};

use crate::{deps, harness::GatewayBuilder};

/// A run of the suite: which package, and its arguments after `--url`.
struct Suite {
    package: &'static str,
    args: &'static [&'static str],
}

const ACTIVE_0_1: Suite = Suite {
    package: "conformance-0.1",
    args: &[],
};
const REQUIREMENTS_2025: Suite = Suite {
    package: "conformance-0.2",
    args: &["--requirements", "2025-11-25"],
};
const REQUIREMENTS_2026: Suite = Suite {
    package: "conformance-0.2",
    args: &["--requirements", "2026-07-28"],
};

const ALL_0_2: Suite = Suite {
    package: "conformance-0.2",
    args: &["--suite", "all"],
};

/// (scenario, check id) → passed.
type Checks = BTreeMap<(String, String), (bool, String)>;

/// Runs `suite` against `url`; returns whether it passed and its checks.
async fn run(suite: &Suite, url: &str, out: &Path) -> (bool, Checks, String) {
    let script =
        deps::node_packages().join(format!("node_modules/{}/dist/index.js", suite.package));
    let output = tokio::time::timeout(
        Duration::from_secs(300),
        tokio::process::Command::new(deps::node22())
            .arg(script)
            .args(["server", "--url", url])
            .args(suite.args)
            .arg("-o")
            .arg(out)
            .output(),
    )
    .await
    .expect("the suite finishes in time")
    .expect("the suite runs");
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let summary = text
        .find("=== SUMMARY")
        .map_or(text.as_str(), |at| &text[at..])
        .to_owned();
    (output.status.success(), read_checks(out), summary)
}

fn read_checks(out: &Path) -> Checks {
    let mut checks = Checks::new();
    for entry in std::fs::read_dir(out).expect("the suite wrote results") {
        let dir = entry.unwrap().path();
        let Ok(text) = std::fs::read_to_string(dir.join("checks.json")) else {
            continue;
        };
        let scenario = scenario_name(&dir);
        let results: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap();
        for check in results {
            let status = check["status"].as_str().unwrap_or_default().to_owned();
            let passed = matches!(status.as_str(), "SUCCESS" | "INFO" | "SKIPPED");
            let id = check["id"].as_str().unwrap_or_default().to_owned();
            let message = check["errorMessage"].as_str().unwrap_or(&status).to_owned();
            checks.insert((scenario.clone(), id), (passed, message));
        }
    }
    checks
}

/// `server-<scenario>-<timestamp>` → `<scenario>`.
fn scenario_name(dir: &Path) -> String {
    let name = dir.file_name().unwrap().to_string_lossy();
    let name = name.strip_prefix("server-").unwrap_or(&name);
    match name.find("-20") {
        Some(at) => name[..at].to_owned(),
        None => name.to_owned(),
    }
}

async fn start_fixture() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(switchyard_conformance::serve(listener));
    url
}

async fn compare(suite: Suite) {
    let fixture = start_fixture().await;
    let gw = GatewayBuilder::new()
        .section("[catalog]\nprefix_mode = \"never\"")
        .http("fixture", &fixture)
        .start()
        .await;
    let out = tempfile::tempdir().unwrap();
    let (direct_ok, direct, direct_summary) =
        run(&suite, &fixture, &out.path().join("direct")).await;
    let (through_ok, through, through_summary) =
        run(&suite, &gw.url(), &out.path().join("gateway")).await;
    assert!(
        direct_ok,
        "the fixture fails scored scenarios:\n{direct_summary}"
    );
    assert!(!direct.is_empty(), "no checks were recorded");
    let lost: Vec<String> = direct
        .iter()
        .filter(|(_, (passed, _))| *passed)
        .filter(|(key, _)| !through.get(*key).is_some_and(|(passed, _)| *passed))
        .map(|((scenario, id), _)| {
            let why = through
                .get(&(scenario.clone(), id.clone()))
                .map_or("missing", |c| &c.1);
            format!("{scenario} / {id}: {why}")
        })
        .collect();
    // The lost checks come last, where a log that keeps only the end of a message has them.
    assert!(
        lost.is_empty(),
        "{through_summary}\nchecks that pass directly but not through Switchyard:\n{}",
        lost.join("\n")
    );
    assert!(
        through_ok,
        "Switchyard fails scored scenarios:\n{through_summary}"
    );
    let passed = through.values().filter(|(passed, _)| *passed).count();
    eprintln!(
        "{passed} of {} checks pass through Switchyard",
        through.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suite_0_1_active_passes_through_the_gateway() {
    compare(ACTIVE_0_1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suite_0_2_requirements_2025_11_25_pass_through_the_gateway() {
    compare(REQUIREMENTS_2025).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suite_0_2_requirements_2026_07_28_pass_through_the_gateway() {
    compare(REQUIREMENTS_2026).await;
}

/// Every scenario of the suite, the tasks extension's included (the fixture runs tasks on
/// rmcp's task manager; through Switchyard their ids are its sealed handles).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suite_0_2_all_scenarios_pass_through_the_gateway() {
    compare(ALL_0_2).await;
}

/// The suite's authorization scenarios, with Switchyard's OAuth client as the client under test
/// (`switchyard-conformance client`, a gateway fronting the suite's mock server): every
/// scenario of `--suite auth` passes in both versions, as do the 2025-03-26 back-compat ones
/// and the client credentials grants (client secret and `private_key_jwt`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_authorization_scenarios_pass_with_switchyard_as_the_client() {
    let command = format!("{} client", conformance_binary().display());
    let runs: [(&str, &[&str]); 5] = [
        ("conformance-0.1", &["--suite", "auth"]),
        ("conformance-0.2", &["--suite", "auth"]),
        ("conformance-0.2", &["--suite", "backcompat"]),
        (
            "conformance-0.2",
            &["--scenario", "auth/client-credentials-basic"],
        ),
        (
            "conformance-0.2",
            &["--scenario", "auth/client-credentials-jwt"],
        ),
    ];
    for (package, selection) in runs {
        let script = deps::node_packages().join(format!("node_modules/{package}/dist/index.js"));
        let output = tokio::time::timeout(
            Duration::from_secs(300),
            tokio::process::Command::new(deps::node22())
                .arg(script)
                .args(["client", "--command", &command])
                .args(selection)
                .output(),
        )
        .await
        .expect("the suite finishes in time")
        .expect("the suite runs");
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned()
            + &String::from_utf8_lossy(&output.stderr);
        let summary = stdout
            .lines()
            .filter(|l| {
                l.starts_with('✓')
                    || l.starts_with('✗')
                    || l.contains("Total")
                    || l.contains("Passed:")
            })
            .collect::<Vec<_>>()
            .join("\n");
        assert!(
            output.status.success() && !stdout.contains('✗'),
            "{package} {selection:?} failed:\n{summary}\n{stdout}"
        );
        assert!(
            stdout.contains(" 0 failed, 0 warnings") || stdout.contains("OVERALL: PASSED"),
            "{package} {selection:?}:\n{stdout}"
        );
    }
}

/// The `switchyard-conformance` binary, which `cargo test` builds beside `switchyard` (its
/// crate has a test of its own).
fn conformance_binary() -> std::path::PathBuf {
    let binary = std::path::Path::new(crate::harness::SWITCHYARD).with_file_name(format!(
        "switchyard-conformance{}",
        std::env::consts::EXE_SUFFIX
    ));
    assert!(
        binary.exists(),
        "{} is missing: build it with `cargo build -p switchyard-conformance` (cargo test builds it)",
        binary.display()
    );
    binary
}
