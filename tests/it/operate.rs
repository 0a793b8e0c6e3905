//! Operating the gateway: hot reload under load, `/metrics` and the Grafana dashboard that
//! reads it, and the admin API's answers and refusals.

use std::{collections::BTreeSet, path::PathBuf, time::Duration};

use serde_json::Value;
use switchyard::{
    config,
    gateway::{ReloadOutcome, Trigger},
};

use crate::{
    bench::{bench, demo_http},
    harness::{Recorder, SWITCHYARD, TestGateway, call, connect_client, eventually, tool_names},
};

/// A gateway configuration with upstream `demo` at `url`, and `extra` TOML after it.
fn config_text(url: &str, extra: &str) -> String {
    // The store's file beside the configuration: each test's own, the same at every reload.
    format!(
        "[server]\nshutdown_grace_seconds = 5\n\n[store]\npath = \"sessions.redb\"\n\n\
         [upstreams.demo]\ntransport = \"streamable_http\"\nurl = {url:?}\n\n{extra}"
    )
}

/// The stdio demo server as upstream `second`, with `env` in its environment.
fn second(env: &str) -> String {
    format!(
        "[upstreams.second]\ncommand = {SWITCHYARD:?}\nargs = [\"demo-server\"]\n\
         env = {{ MARK = {env:?} }}\n"
    )
}

/// A gateway started from a configuration file (so that it can reload it): the demo server
/// over HTTP as `demo`, then `extra`.
struct OnFile {
    gw: TestGateway,
    /// The demo server's URL.
    url: String,
    path: PathBuf,
    _dir: tempfile::TempDir,
}

async fn on_file(extra: &str) -> OnFile {
    let url = demo_http().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("switchyard.toml");
    std::fs::write(&path, config_text(&url, extra)).unwrap();
    let config = config::load(&path).expect("the test configuration is valid");
    OnFile {
        gw: TestGateway::start(config).await,
        url,
        path,
        _dir: dir,
    }
}

fn has_tool(gw: &TestGateway, name: &str) -> bool {
    gw.gateway
        .live()
        .catalog
        .tools()
        .iter()
        .any(|tool| tool.name == name)
}

/// Calls on an unchanged upstream run through reloads that add, change and remove another
/// one, and one that is refused, without a single failure; the catalog follows each reload.
#[tokio::test]
async fn reloads_under_load_lose_no_request() {
    let OnFile {
        gw,
        url,
        path,
        _dir,
    } = on_file("").await;
    let args = format!(
        "{} --sessions 4 --concurrency 8 --duration 6 --warmup 0.5 --json",
        gw.url()
    );
    let load = tokio::spawn(async move { bench(&args).await });
    let soon = Duration::from_secs(20);
    tokio::time::sleep(Duration::from_millis(800)).await;

    std::fs::write(&path, config_text(&url, &second("one"))).unwrap();
    let added = gw.gateway.reload_from_file(Trigger::Admin).await;
    assert_eq!(added.outcome, ReloadOutcome::Applied, "{added:?}");
    assert_eq!(added.summary, "added second");
    assert!(eventually(soon, || has_tool(&gw, "second__echo")).await);

    std::fs::write(&path, config_text(&url, &second("two"))).unwrap();
    let changed = gw.gateway.reload_from_file(Trigger::Admin).await;
    assert_eq!(changed.summary, "changed second", "{changed:?}");
    assert!(eventually(soon, || has_tool(&gw, "second__echo")).await);

    std::fs::write(&path, config_text(&url, "[upstreams.broken]\nurl = 7\n")).unwrap();
    let refused = gw.gateway.reload_from_file(Trigger::Admin).await;
    assert_eq!(refused.outcome, ReloadOutcome::Rejected, "{refused:?}");
    let problem = refused.errors.join("\n");
    assert!(problem.contains("switchyard.toml"), "{problem}");
    assert!(problem.contains("upstreams.broken.url"), "{problem}");
    assert!(has_tool(&gw, "second__echo"), "the running state is kept");

    std::fs::write(&path, config_text(&url, "")).unwrap();
    let removed = gw.gateway.reload_from_file(Trigger::Admin).await;
    assert_eq!(removed.summary, "removed second", "{removed:?}");
    assert!(!has_tool(&gw, "second__echo"));

    let report = load.await.unwrap().json();
    let target = &report["targets"][0];
    assert!(
        target["median"]["requests"].as_u64().unwrap() > 100,
        "{target:#}"
    );
    assert_eq!(target["median"]["failed"], 0, "{target:#}");
    assert_eq!(target["errors"], Value::Array(vec![]), "{target:#}");
    let reloads = gw.gateway.journal().reloads();
    assert_eq!(reloads.len(), 4);
    assert_eq!(reloads[0].summary, "removed second");
}

/// A reload that changes the catalog's naming renames everything at once, and a change of
/// the listen address is reported as needing a restart rather than applied.
#[tokio::test]
async fn settings_change_live_and_fixed_ones_are_reported() {
    let OnFile {
        gw,
        url,
        path,
        _dir,
    } = on_file("").await;
    assert!(has_tool(&gw, "demo__echo"));
    let text = config_text(&url, "").replace("[server]\n", "[server]\nlisten = \"127.0.0.1:1\"\n")
        + "[catalog]\nprefix_mode = \"never\"\n";
    std::fs::write(&path, text).unwrap();
    let entry = gw.gateway.reload_from_file(Trigger::Signal).await;
    assert_eq!(entry.outcome, ReloadOutcome::Applied, "{entry:?}");
    assert_eq!(entry.needs_restart, vec!["server.listen".to_owned()]);
    assert!(has_tool(&gw, "echo"));
    assert_eq!(gw.gateway.live().config.server.listen, gw.addr);
    let again = gw.gateway.reload_from_file(Trigger::Signal).await;
    assert_eq!(again.outcome, ReloadOutcome::Unchanged, "{again:?}");
}

/// A reload that changes `[[policy]]` or `[endpoints]` applies to open sessions at once (they
/// are told the lists changed) and serves a new endpoint path without a restart.
#[tokio::test]
async fn policy_and_endpoints_reload_live() {
    let OnFile {
        gw,
        url,
        path,
        _dir,
    } = on_file("").await;
    let client = Recorder::capable("watcher").connect(&gw.url()).await;
    assert!(tool_names(&client).await.contains(&"demo__echo".to_owned()));
    let policy = "[[policy]]\ndeny.tools = [\"demo:echo\"]\n\n[endpoints.adding]\n\
                  allow.tools = [\"demo:add\"]\n";
    std::fs::write(&path, config_text(&url, policy)).unwrap();
    let entry = gw.gateway.reload_from_file(Trigger::Admin).await;
    assert_eq!(entry.outcome, ReloadOutcome::Applied, "{entry:?}");
    assert_eq!(entry.summary, "applied policy, endpoints");
    assert!(
        eventually(Duration::from_secs(5), || client
            .service()
            .seen()
            .tools_changed
            > 0)
        .await
    );
    let names = tool_names(&client).await;
    assert!(!names.contains(&"demo__echo".to_owned()), "{names:?}");
    assert!(names.contains(&"demo__add".to_owned()), "{names:?}");
    let adding = connect_client(&gw.url_at("/profiles/adding/mcp"), "adding").await;
    assert_eq!(tool_names(&adding).await, ["demo__add"]);

    // Endpoints follow `[catalog]` too, with the policy itself unchanged.
    let separated = format!("{policy}\n[catalog]\nseparator = \".\"\n");
    std::fs::write(&path, config_text(&url, &separated)).unwrap();
    let entry = gw.gateway.reload_from_file(Trigger::Admin).await;
    assert_eq!(entry.outcome, ReloadOutcome::Applied, "{entry:?}");
    assert_eq!(tool_names(&adding).await, ["demo.add"]);
}

/// The metric names in every query of the Grafana dashboard.
/// Asserts that `scrape` exposes every series of the dashboard whose name starts with `prefix`
/// (families that have series only once something happened, checked where it does).
pub fn assert_dashboard_series(scrape: &str, prefix: &str) {
    for name in dashboard_metrics() {
        if name.starts_with(prefix) {
            assert!(
                scrape.contains(&format!("# TYPE {name} ")),
                "the dashboard's {name}"
            );
        }
    }
}

pub fn dashboard_metrics() -> BTreeSet<String> {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/grafana/switchyard.json"
    ))
    .unwrap();
    let dashboard: Value = serde_json::from_str(&text).expect("the dashboard is JSON");
    let mut exprs = Vec::new();
    collect_exprs(&dashboard, &mut exprs);
    assert!(exprs.len() > 10, "the dashboard has queries");
    let mut names = BTreeSet::new();
    for expr in exprs {
        let mut rest = expr.as_str();
        while let Some(at) = rest.find("switchyard_") {
            let name: String = rest[at..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            rest = &rest[at + name.len()..];
            let base = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|suffix| name.strip_suffix(suffix))
                .unwrap_or(&name);
            names.insert(base.to_owned());
        }
    }
    names
}

fn collect_exprs(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, value) in map {
                match (key.as_str(), value) {
                    ("expr" | "query", Value::String(expr)) => out.push(expr.clone()),
                    ("query", Value::Object(query)) => {
                        if let Some(Value::String(expr)) = query.get("query") {
                            out.push(expr.clone());
                        }
                    }
                    _ => collect_exprs(value, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| collect_exprs(v, out)),
        _ => {}
    }
}

/// `/metrics` counts calls by upstream, tool and outcome, and has every series the Grafana
/// dashboard queries.
#[tokio::test]
async fn metrics_count_calls_and_feed_the_dashboard() {
    let OnFile { gw, _dir, .. } = on_file("").await;
    let client = gw.client().await;
    for _ in 0..3 {
        call(&client, "demo__echo", serde_json::json!({"text": "hi"}))
            .await
            .unwrap();
    }
    let unknown = call(&client, "demo__nonexistent", serde_json::json!({})).await;
    assert!(unknown.is_err());
    gw.gateway.reload_from_file(Trigger::Admin).await;
    let scrape = gw.metrics_text().await;
    let line = |prefix: &str| {
        scrape
            .lines()
            .find(|line| line.starts_with(prefix))
            .unwrap_or_else(|| panic!("no `{prefix}` in:\n{scrape}"))
            .to_owned()
    };
    let value = |prefix: &str| -> f64 { line(prefix).rsplit(' ').next().unwrap().parse().unwrap() };
    assert_eq!(
        value(r#"switchyard_tool_calls_total{outcome="success",tool="echo",upstream="demo"}"#),
        3.0
    );
    assert_eq!(
        value(r#"switchyard_tool_call_duration_seconds_count{tool="echo",upstream="demo"}"#),
        3.0
    );
    assert!(value(r#"switchyard_requests_total{method="tools/call",outcome="ok"}"#) >= 3.0);
    assert_eq!(
        value(r#"switchyard_requests_total{method="tools/call",outcome="error"}"#),
        1.0
    );
    assert_eq!(value(r#"switchyard_upstream_up{upstream="demo"}"#), 1.0);
    assert_eq!(value("switchyard_sessions_active"), 1.0);
    assert_eq!(
        value(r#"switchyard_config_reloads_total{outcome="unchanged"}"#),
        1.0
    );
    let exposed: BTreeSet<&str> = scrape
        .lines()
        .filter_map(|line| line.strip_prefix("# TYPE "))
        .filter_map(|rest| rest.split(' ').next())
        .collect();
    // The pass-through's series are checked where it serves (tests/it/passthrough.rs), the
    // cache's where calls are cached (tests/it/definitions.rs), the audit log's where it
    // writes (tests/it/audit.rs), the quotas' where they count (tests/it/quotas.rs).
    let missing: Vec<_> = dashboard_metrics()
        .into_iter()
        .filter(|name| !name.starts_with("switchyard_passthrough_"))
        .filter(|name| !name.starts_with("switchyard_cache_"))
        .filter(|name| !name.starts_with("switchyard_audit_"))
        .filter(|name| !name.starts_with("switchyard_quota_"))
        .filter(|name| !exposed.contains(name.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "the dashboard queries series that /metrics lacks: {missing:?}"
    );
    // No session id, argument or error text ever becomes a label.
    assert!(!scrape.contains("hi\""), "an argument leaked into a label");
}

/// The admin API answers JSON, refuses pages of other origins, and says what is wrong.
#[tokio::test]
async fn the_admin_api_reports_and_refuses_clearly() {
    let OnFile { gw, path, _dir, .. } = on_file("").await;
    let get = |path: &str| gw.admin_request(reqwest::Method::GET, path).send();

    let status: Value = get("/api/status").await.unwrap().json().await.unwrap();
    assert_eq!(status["servers"][0]["name"], "demo");
    assert_eq!(status["servers"][0]["state"], "ready");
    assert_eq!(status["servers"][0]["counts"]["tools"], 6);
    // The full picture of each server: what it said of itself, and its definitions whole.
    let servers: Value = get("/api/servers").await.unwrap().json().await.unwrap();
    let demo = &servers["servers"]["demo"];
    assert_eq!(demo["transport"], "streamable_http");
    assert_eq!(demo["state"], "ready");
    assert!(
        demo["server_url"].as_str().unwrap().ends_with("/mcp"),
        "{demo}"
    );
    assert_eq!(demo["server_info"]["name"], "switchyard-demo", "{demo}");
    assert!(demo["capabilities"]["tools"].is_object(), "{demo}");
    assert!(demo["instructions"].as_str().is_some_and(|i| !i.is_empty()));
    assert!(demo["protocol_version"].is_string());
    assert_eq!(demo["auth_url"], Value::Null);
    let echo = (servers["tools"].as_array().unwrap().iter())
        .find(|t| t["name"] == "echo")
        .expect("the demo's echo, by its own name");
    assert_eq!(echo["serverId"], "demo");
    assert_eq!(echo["inputSchema"]["type"], "object", "with its schema");
    for list in ["prompts", "resources", "resource_templates"] {
        let items = servers[list].as_array().unwrap();
        assert!(!items.is_empty(), "{list}");
        assert!(
            items.iter().all(|item| item["serverId"] == "demo"),
            "{list}"
        );
    }
    let catalog: Value = get("/api/catalog").await.unwrap().json().await.unwrap();
    assert!(
        catalog["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "demo__echo")
    );
    let _client = gw.client().await;
    let sessions: Value = get("/api/sessions").await.unwrap().json().await.unwrap();
    assert_eq!(sessions["count"], 1);
    assert_eq!(
        sessions["sessions"][0]["id_hash"].as_str().unwrap().len(),
        8
    );

    let page = get("/").await.unwrap();
    assert_eq!(page.status(), 200);
    assert!(page.text().await.unwrap().contains("page.js"));

    let cross = gw
        .admin_request(reqwest::Method::POST, "/api/reload")
        .header("origin", "http://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(cross.status(), 403);
    let body: Value = cross.json().await.unwrap();
    assert!(body["error"].as_str().unwrap().contains("cross-origin"));

    std::fs::write(&path, "[server]\nlisten = 8080\n").unwrap();
    let refused = gw
        .admin_request(reqwest::Method::POST, "/api/reload")
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 422);
    let entry: Value = refused.json().await.unwrap();
    assert_eq!(entry["outcome"], "rejected");
    assert!(
        entry["errors"][0]
            .as_str()
            .unwrap()
            .contains("server.listen"),
        "{entry}"
    );
    assert!(has_tool(&gw, "demo__echo"), "the running state is kept");

    let unknown = gw
        .admin_request(reqwest::Method::POST, "/api/upstreams/nobody/authorize")
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), 404);
    let missing = get("/api/nothing").await.unwrap();
    assert_eq!(missing.status(), 404);
    let status: Value = get("/api/status").await.unwrap().json().await.unwrap();
    assert_eq!(status["reloads"][0]["outcome"], "rejected");
    assert!(!status["recent_errors"].as_array().unwrap().is_empty());
}

/// With a token configured, the API wants it; the page itself loads without (it asks).
#[tokio::test]
async fn the_admin_token_is_required_when_set() {
    let token = "s3cret-admin-token-0123";
    let OnFile { gw, .. } = on_file(&format!("[admin]\ntoken = {token:?}\n")).await;
    let http = reqwest::Client::new();
    let without = http.get(gw.admin_url("/api/status")).send().await.unwrap();
    assert_eq!(without.status(), 401);
    assert!(without.headers().contains_key("www-authenticate"));
    let wrong = http
        .get(gw.admin_url("/metrics"))
        .bearer_auth("s3cret-admin-token-0124")
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    let with = http
        .get(gw.admin_url("/api/status"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(with.status(), 200);
    let page = http.get(gw.admin_url("/")).send().await.unwrap();
    assert_eq!(page.status(), 200);
}

/// Upstreams added and removed through the admin API are checked like the file, applied at
/// once, and kept in the overlay file, so that a restart (a fresh load) finds them.
#[tokio::test]
async fn upstreams_added_through_the_admin_api_survive_a_restart() {
    let OnFile {
        gw,
        path,
        url,
        _dir,
    } = on_file("[admin]\nallow_commands = true\n").await;
    let post = |body: Value| {
        gw.admin_request(reqwest::Method::POST, "/api/upstreams?wait_seconds=30")
            .json(&body)
            .send()
    };
    let second = serde_json::json!({
        "name": "second",
        "command": SWITCHYARD,
        "args": ["demo-server"],
        "env": { "MARK": "added" },
    });

    let created = post(second.clone()).await.unwrap();
    assert_eq!(created.status(), 201);
    let created: Value = created.json().await.unwrap();
    assert_eq!(created["reload"]["summary"], "added second", "{created}");
    let server = &created["server"];
    assert_eq!(server["name"], "second", "{created}");
    assert_eq!(
        server["state"], "ready",
        "after its first connection: {created}"
    );
    assert_eq!(server["counts"]["tools"], 6, "{created}");
    let added = eventually(Duration::from_secs(20), || has_tool(&gw, "second__echo")).await;
    assert!(added, "the added upstream's tools appear");
    let servers: Value = gw
        .admin_request(reqwest::Method::GET, "/api/servers")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(servers["servers"]["second"]["defined_in"], "overlay");
    assert_eq!(servers["servers"]["demo"]["defined_in"], "file");

    // Refusals, each naming the problem; nothing changes.
    let taken = post(second.clone()).await.unwrap();
    assert_eq!(taken.status(), 409);
    // Not a number, or one out of range (too large to be a duration at all, once, which
    // panicked the handler): 400 with a JSON error.
    for wait in ["soon", "99999999999999999999", "31", "-1", "NaN"] {
        let bad_wait = gw
            .admin_request(
                reqwest::Method::POST,
                &format!("/api/upstreams?wait_seconds={wait}"),
            )
            .json(&second)
            .send()
            .await
            .unwrap();
        assert_eq!(bad_wait.status(), 400, "{wait}");
        let body: Value = bad_wait.json().await.unwrap();
        assert!(
            body["error"].as_str().unwrap().contains("wait_seconds"),
            "{body}"
        );
    }
    let not_json = gw
        .admin_request(reqwest::Method::POST, "/api/upstreams")
        .body("upstream please")
        .send()
        .await
        .unwrap();
    assert_eq!(not_json.status(), 400);
    assert!(
        not_json.text().await.unwrap().contains("JSON object"),
        "the refusal says what the body must be"
    );
    let invalid = post(serde_json::json!({
        "name": "third", "transport": "streamable_http", "url": "not a url", "colour": "red",
    }))
    .await
    .unwrap();
    assert_eq!(invalid.status(), 422);
    let invalid: Value = invalid.json().await.unwrap();
    let problems = invalid["problems"].to_string();
    assert!(
        problems.contains("switchyard.overlay.toml: upstreams.third.url"),
        "{problems}"
    );
    assert!(
        problems.contains("upstreams.third.colour: unknown key"),
        "{problems}"
    );
    let overlay_path = path.with_file_name("switchyard.overlay.toml");
    let overlay = std::fs::read_to_string(&overlay_path).unwrap();
    assert!(overlay.contains("[upstreams.second]") && !overlay.contains("third"));

    // A restart loads the file and the overlay together.
    let restarted = config::load(&path).unwrap();
    let names: Vec<_> = restarted
        .upstreams
        .iter()
        .map(|u| u.name.as_str())
        .collect();
    assert_eq!(names, ["demo", "second"]);

    // Removing an upstream of the file lists it in the overlay; one of the overlay goes from it.
    let remove = |name: &str| {
        gw.admin_request(reqwest::Method::DELETE, &format!("/api/upstreams/{name}"))
            .send()
    };
    let removed = remove("demo").await.unwrap();
    assert_eq!(removed.status(), 200);
    assert!(!has_tool(&gw, "demo__echo"));
    assert!(has_tool(&gw, "second__echo"));
    assert_eq!(remove("nobody").await.unwrap().status(), 404);
    let names = |config: config::Config| -> Vec<String> {
        config
            .upstreams
            .iter()
            .map(|u| u.name.to_string())
            .collect()
    };
    assert_eq!(names(config::load(&path).unwrap()), ["second"]);
    assert_eq!(remove("second").await.unwrap().status(), 200);
    assert!(names(config::load(&path).unwrap()).is_empty());
    let overlay = std::fs::read_to_string(&overlay_path).unwrap();
    assert!(overlay.contains("removed = [\"demo\"]"), "{overlay}");
    assert!(
        !overlay.lines().any(|l| l.starts_with("[upstreams")),
        "{overlay}"
    );

    // An upstream of the file's name may be added again: it takes the removed one's place.
    let back = post(serde_json::json!({
        "name": "demo", "transport": "streamable_http", "url": url,
    }))
    .await
    .unwrap();
    assert_eq!(back.status(), 201);
    let back = eventually(Duration::from_secs(20), || has_tool(&gw, "demo__echo")).await;
    assert!(back, "demo is back");
    let overlay = std::fs::read_to_string(&overlay_path).unwrap();
    assert!(overlay.contains("removed = [\"demo\"]") && overlay.contains("[upstreams.demo]"));
    assert_eq!(names(config::load(&path).unwrap()), ["demo"]);
}
