//! Config loading: both formats, defaults, placeholders, and every problem reported at once.

mod access;
mod auth;
mod guardrail;
mod items;
mod keys;
mod mcp_json;
mod oauth;
mod page;
mod quota;
mod reference;
mod sandbox;
mod store;
mod telemetry;

use std::{collections::HashMap, path::Path, time::Duration};

use super::{
    AllowedOrigins, ConfigError, FailureMode, HttpProtocol, PrefixMode, RestartPolicy, SessionMode,
    TransportConfig, expand::tests::MapVars, parse_str,
};

fn vars() -> MapVars {
    MapVars(HashMap::from([
        ("GH_TOKEN", "ghp_123"),
        ("HOME", "/home/u"),
    ]))
}

pub(super) fn load(name: &str, text: &str) -> Result<super::Config, ConfigError> {
    parse_str(Path::new(name), text, &vars())
}

/// The problems of a failed load, as `key: message` lines.
pub(super) fn problems(name: &str, text: &str) -> Vec<String> {
    match load(name, text) {
        Ok(_) => panic!("expected {name} to be rejected"),
        Err(ConfigError::Invalid { problems, .. }) => {
            problems.iter().map(ToString::to_string).collect()
        }
        Err(other) => panic!("unexpected error {other}"),
    }
}

pub(super) fn assert_has(problems: &[String], expected: &str) {
    assert!(
        problems.iter().any(|p| p.contains(expected)),
        "no problem contains {expected:?}; got:\n{}",
        problems.join("\n")
    );
}

#[test]
fn toml_with_every_option() {
    let config = load(
        "/etc/switchyard/switchyard.toml",
        r#"
        [server]
        listen = "0.0.0.0:9000"
        endpoint_path = "/gateway/mcp"
        allowed_hosts = ["mcp.example.com"]
        allowed_origins = ["https://app.example.com", "http://localhost:*"]
        session_idle_timeout_seconds = 60
        max_request_body_bytes = 65536

        [catalog]
        prefix_mode = "conditional"
        separator = "."
        page_size = 25

        [upstream_defaults]
        connect_timeout_seconds = 5
        discovery_timeout_seconds = 2.5
        default_tool_timeout_seconds = 60
        max_tool_timeout_seconds = 600
        failure_mode = "closed"
        restart = { max_attempts = 10, delay_ms = 200, max_delay_ms = 5000 }
        max_concurrent_requests = 32
        max_queued_requests = 8

        [auth]
        anonymous = true

        [upstreams.github]
        url = "https://api.example.com/mcp"
        headers = { Authorization = "Bearer ${env:GH_TOKEN}" }
        default_tool_timeout_seconds = 30
        tool_timeout_seconds = { create_pull_request = 300 }
        restart = { delay_ms = 1000 }

        [upstreams.files]
        transport = "stdio"
        command = "mcp-files"
        args = ["--root", "${env:HOME}/docs"]
        env = { LOG = "debug" }
        cwd = "data"
        session = "per_client"
        max_processes = 4
        connect_timeout_seconds = 1
        idle_timeout_seconds = 90
        health_interval_seconds = 3
        health_timeout_seconds = 0.5
        stream_idle_timeout_seconds = 45
        failure_mode = "open"
        max_concurrent_requests = 0

        [upstreams.off]
        command = "never-run"
        enabled = false
        "#,
    )
    .unwrap();

    assert_eq!(config.server.listen.to_string(), "0.0.0.0:9000");
    assert_eq!(config.server.endpoint_path, "/gateway/mcp");
    assert_eq!(config.server.allowed_hosts, ["mcp.example.com"]);
    assert_eq!(config.server.session_idle_timeout, Duration::from_secs(60));
    assert_eq!(config.server.max_request_body_bytes, 65536);
    assert_eq!(config.catalog.prefix_mode, PrefixMode::Conditional);
    assert_eq!(config.catalog.separator, ".");
    assert_eq!(config.catalog.page_size, 25);

    let names: Vec<_> = config.upstreams.iter().map(|u| u.name.as_str()).collect();
    assert_eq!(names, ["github", "files"], "file order, disabled left out");

    let github = &config.upstreams[0];
    assert_eq!(
        github.session,
        SessionMode::PerClient,
        "http defaults to per_client"
    );
    let policy = &github.policy;
    assert_eq!(policy.connect_timeout, Duration::from_secs(5));
    assert_eq!(policy.discovery_timeout, Duration::from_millis(2500));
    assert_eq!(policy.tool_timeout("list_issues"), Duration::from_secs(30));
    assert_eq!(
        policy.tool_timeout("create_pull_request"),
        Duration::from_secs(300)
    );
    assert_eq!(policy.max_tool_timeout, Duration::from_secs(600));
    assert_eq!(policy.failure_mode, FailureMode::Closed);
    assert_eq!(
        policy.restart,
        RestartPolicy {
            max_attempts: Some(10),
            delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(5),
        },
        "a partial restart table inherits the rest"
    );
    assert_eq!(policy.max_concurrent_requests, Some(32));
    assert_eq!(policy.max_queued_requests, 8);
    assert_eq!(policy.idle_timeout, None);
    let TransportConfig::Http(http) = &github.transport else {
        panic!("github should be http");
    };
    assert_eq!(http.protocol, HttpProtocol::Auto, "a bare url is probed");
    assert_eq!(http.url.as_str(), "https://api.example.com/mcp");
    assert_eq!(http.headers[0].0, "authorization");
    assert_eq!(http.headers[0].1, "Bearer ghp_123");
    assert!(http.headers[0].1.is_sensitive());

    let files = &config.upstreams[1];
    assert_eq!(files.session, SessionMode::PerClient);
    assert_eq!(files.policy.connect_timeout, Duration::from_secs(1));
    assert_eq!(files.policy.idle_timeout, Some(Duration::from_secs(90)));
    assert_eq!(files.policy.health_interval, Duration::from_secs(3));
    assert_eq!(files.policy.health_timeout, Duration::from_millis(500));
    assert_eq!(files.policy.stream_idle_timeout, Duration::from_secs(45));
    assert_eq!(
        config.upstreams[0].policy.health_timeout,
        Duration::from_secs(10),
        "the default"
    );
    assert_eq!(files.policy.failure_mode, FailureMode::Open);
    assert_eq!(
        files.policy.max_concurrent_requests, None,
        "0 lifts the inherited limit"
    );
    assert_eq!(files.policy.tool_timeout, Duration::from_secs(60));
    let TransportConfig::Stdio(stdio) = &files.transport else {
        panic!("files should be stdio");
    };
    assert_eq!(stdio.command, "mcp-files");
    assert_eq!(stdio.args, ["--root", "/home/u/docs"]);
    assert_eq!(stdio.env, [("LOG".to_owned(), "debug".to_owned())]);
    assert_eq!(
        stdio.cwd.as_deref(),
        Some(Path::new("/etc/switchyard/data"))
    );
    assert_eq!(stdio.max_processes, 4);
}

#[test]
fn defaults_for_an_almost_empty_file() {
    let config = load("s.toml", "[upstreams.demo]\ncommand = \"demo\"\n").unwrap();
    assert_eq!(config.server.listen.to_string(), "127.0.0.1:8080");
    assert_eq!(config.server.endpoint_path, "/mcp");
    assert_eq!(config.catalog.prefix_mode, PrefixMode::Always);
    assert_eq!(config.catalog.separator, "__");
    assert_eq!(
        config.upstreams[0].session,
        SessionMode::Shared,
        "stdio is shared"
    );
    let policy = &config.upstreams[0].policy;
    assert_eq!(policy.connect_timeout, Duration::from_secs(30));
    assert_eq!(policy.discovery_timeout, Duration::from_secs(30));
    assert_eq!(policy.tool_timeout, Duration::from_secs(120));
    assert_eq!(policy.max_tool_timeout, Duration::from_secs(1800));
    assert_eq!(policy.failure_mode, FailureMode::Open);
    assert_eq!(policy.restart.max_attempts, None);
    assert_eq!(policy.max_concurrent_requests, None);
}

#[test]
fn transports_by_name() {
    let config = load(
        "s.toml",
        r#"
        [upstreams.a]
        transport = "sse"
        url = "http://127.0.0.1:1/sse"
        [upstreams.b]
        transport = "streamable_http"
        url = "http://127.0.0.1:1/mcp"
        [upstreams.c]
        transport = "auto"
        url = "http://127.0.0.1:1/mcp"
        "#,
    )
    .unwrap();
    let protocols: Vec<_> = config
        .upstreams
        .iter()
        .map(|u| match &u.transport {
            TransportConfig::Http(http) => http.protocol,
            TransportConfig::Stdio(_) => panic!("{} is not stdio", u.name),
        })
        .collect();
    assert_eq!(
        protocols,
        [
            HttpProtocol::Sse,
            HttpProtocol::StreamableHttp,
            HttpProtocol::Auto
        ]
    );
}

#[test]
fn policy_problems_are_located() {
    let found = problems(
        "s.toml",
        r#"
        [upstream_defaults]
        failure_mode = "maybe"
        default_tool_timeout_seconds = 100
        max_tool_timeout_seconds = 10

        [upstreams.a]
        command = "a"
        restart = { delay_ms = 0, max_attempts = 3, retries = 1 }
        tool_timeout_seconds = { slow = 0, long = 1e6 }
        idle_timeout_seconds = -5

        [upstreams.b]
        command = "b"
        restart = { delay_ms = 5000, max_delay_ms = 100 }
        "#,
    );
    for expected in [
        "upstream_defaults.failure_mode: `maybe` is not one of `open`, `closed`",
        "upstream_defaults.default_tool_timeout_seconds: 100s is longer than max_tool_timeout_seconds (10s)",
        "upstreams.a.restart.delay_ms: must be at least 1",
        "upstreams.a.restart.retries: unknown key",
        "upstreams.a.tool_timeout_seconds.slow: must be a positive number",
        "upstreams.a.tool_timeout_seconds.long: 1000000s is longer than max_tool_timeout_seconds (10s)",
        "upstreams.a.idle_timeout_seconds: must be a positive number",
        "upstreams.b.restart.max_delay_ms: must not be shorter than delay_ms",
    ] {
        assert_has(&found, expected);
    }
    assert_eq!(
        found.len(),
        8,
        "inherited values are not blamed again: {found:#?}"
    );
}

#[test]
fn every_problem_at_once_with_key_paths() {
    let found = problems(
        "bad.toml",
        r#"
        colour = "blue"

        [server]
        listen = "localhost"
        endpoint_path = "mcp"
        allowed_origins = ["app.example.com"]

        [catalog]
        prefix_mode = "sometimes"
        separator = "-"
        page_size = 0

        [upstreams.GitHub]
        url = "ftp://example.com"
        headers = { "Mcp-Session-Id" = "x", "Bad Header" = "y" }
        retries = 3

        [upstreams.files]
        command = "files"
        url = "http://example.com"

        [upstreams.secret]
        transport = "stdio"
        command = "${env:MISSING_SECRET}"
        url = "http://example.com"
        session = "sometimes"
        connect_timeout_seconds = -1

        [upstreams.neither]
        "#,
    );
    for expected in [
        "colour: unknown key",
        "upstreams.GitHub.retries: unknown key",
        "server.listen: `localhost` is not an address",
        "server.endpoint_path: `mcp` must start with `/`",
        "server.allowed_origins[0]: `app.example.com` is not an origin",
        "catalog.prefix_mode: `sometimes` is not one of",
        "catalog.separator: `-` must contain a character",
        "catalog.page_size: must be between 1 and 10000, not 0",
        "upstreams.GitHub: upstream name `GitHub` contains 'G'",
        "upstreams.GitHub.url: `ftp://example.com` must be an http:// or https:// URL",
        "upstreams.GitHub.headers.Mcp-Session-Id: is set by the MCP transport",
        "upstreams.GitHub.headers.\"Bad Header\": is not a valid HTTP header name",
        "upstreams.files: has both `command` and `url`",
        "upstreams.secret.command: environment variable `MISSING_SECRET` is not set",
        "upstreams.secret.url: does not apply to transport `stdio`",
        "upstreams.secret.session: `sometimes` is not one of",
        "upstreams.secret.connect_timeout_seconds: must be a positive number",
        "upstreams.neither: needs `command`",
    ] {
        assert_has(&found, expected);
    }
    assert_eq!(found.len(), 18, "{}", found.join("\n"));
}

#[test]
fn error_message_names_the_file() {
    let err = load("/srv/bad.toml", "[upstreams.x]\n").unwrap_err();
    let text = err.to_string();
    assert!(
        text.starts_with("/srv/bad.toml: 1 problem in the configuration:"),
        "{text}"
    );
    assert!(text.contains("upstreams.x: needs `command`"), "{text}");
}

#[test]
fn toml_syntax_and_type_errors_are_located() {
    assert_has(
        &problems("s.toml", "[server]\nlisten = \n"),
        "line 2, column 10: syntax error",
    );
    assert_has(
        &problems(
            "s.toml",
            "[upstreams.a]\nurl = \"http://x\"\n[upstreams.a]\n",
        ),
        "syntax error",
    );
    assert_has(
        &problems(
            "s.toml",
            "[upstreams.a]\ncommand = \"x\"\nargs = \"--flag\"\n",
        ),
        "upstreams.a.args: invalid type: string \"--flag\", expected a sequence",
    );
}

#[test]
fn the_endpoint_path_cannot_take_switchyards_own_paths() {
    for (path, expected) in [
        ("/healthz", "is taken by Switchyard's own endpoints"),
        ("/oauth/callback", "is taken by Switchyard's own endpoints"),
        ("/oauth", "is taken by Switchyard's own endpoints"),
        ("/mcp/{name}", "must be a plain path"),
    ] {
        let found = problems("p.toml", &format!("[server]\nendpoint_path = \"{path}\"\n"));
        assert_has(&found, "server.endpoint_path: ");
        assert_has(&found, expected);
    }
    for path in ["/oauthx", "/mcp", "/gateway/oauth"] {
        let loaded = load("p.toml", &format!("[server]\nendpoint_path = \"{path}\"\n"));
        assert_eq!(loaded.unwrap().server.endpoint_path, path);
    }
}

#[test]
fn origins_default_to_pages_of_the_allowed_hosts() {
    let origins = |text: &str| load("o.toml", text).unwrap().server.allowed_origins;
    assert_eq!(
        origins(""),
        AllowedOrigins::Only(
            [
                "http://localhost:*",
                "https://localhost:*",
                "http://127.0.0.1:*",
                "https://127.0.0.1:*",
                "http://[::1]:*",
                "https://[::1]:*",
            ]
            .map(String::from)
            .to_vec()
        )
    );
    assert_eq!(
        origins("[server]\nallowed_hosts = [\"mcp.example.com:8443\", \"[::1]:8080\"]"),
        AllowedOrigins::Only(
            [
                "http://mcp.example.com:8443",
                "https://mcp.example.com:8443",
                "http://[::1]:8080",
                "https://[::1]:8080",
            ]
            .map(String::from)
            .to_vec()
        )
    );
    // Any host is for gateways whose users authenticate (DNS rebinding gains a page nothing
    // there); without [auth] it is refused.
    let any_host = format!(
        "[server]\nallowed_hosts = []\n[auth.api_keys.ci]\nsha256 = {:?}\n",
        crate::config::hash_api_key("ci-key-0123456789abcdef")
    );
    assert_eq!(origins(&any_host), AllowedOrigins::Any);
    let refused = load("o.toml", "[server]\nallowed_hosts = []").unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("server.allowed_hosts: an empty list"),
        "{refused}"
    );
    assert_eq!(
        origins("[server]\nallowed_origins = [\"*\"]"),
        AllowedOrigins::Any
    );
    assert_eq!(
        origins("[server]\nallowed_origins = []"),
        AllowedOrigins::Only(vec![])
    );
    assert_has(
        &problems("o.toml", "[server]\nallowed_origins = [\"*\", \"null\"]"),
        "server.allowed_origins: `*` (any origin) cannot be combined",
    );
}

/// The overlay's problems are its own, reported with its path; a name of the file's cannot be
/// added again unless the file's is removed; `admin.overlay_file` moves it.
#[test]
fn overlay_is_checked_like_the_file_and_reported_as_itself() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("gw.toml");
    std::fs::write(&file, "[upstreams.a]\ncommand = \"a\"\n").unwrap();
    let overlay_at = dir.path().join("gw.overlay.toml");
    let mut overlay = super::Overlay::default();
    let entry = |text: &str| -> toml::Table { text.parse().unwrap() };
    overlay.add("a", entry("command = \"other\""));
    overlay.add("b", entry("url = \"nope\""));
    match super::load_overlaid(&file, Some(&overlay), &vars()) {
        Err(ConfigError::Invalid { path, problems }) => {
            assert_eq!(path, overlay_at);
            let lines: Vec<_> = problems.iter().map(ToString::to_string).collect();
            assert_has(&lines, "upstreams.a: is also defined in");
            assert_has(&lines, "upstreams.b.url");
        }
        other => panic!("expected the overlay to be rejected, got {other:?}"),
    }
    let names = |overlay: &super::Overlay| -> Vec<String> {
        overlay.write(&overlay_at).unwrap();
        let config = super::load_with(&file, &vars()).unwrap();
        config
            .upstreams
            .iter()
            .map(|u| u.name.to_string())
            .collect()
    };
    overlay.remove("a");
    overlay.remove("b");
    assert_eq!(
        names(&overlay),
        ["a"],
        "the overlay's own went; the file's is back"
    );
    overlay.remove("a");
    assert!(names(&overlay).is_empty(), "the file's is removed");
    let config = super::load_with(&file, &vars()).unwrap();
    assert_eq!(config.overlay.removed, ["a"]);
    assert!(config.overlay.added.is_empty());

    std::fs::write(&file, "[admin]\noverlay_file = \"state/extra.toml\"\n").unwrap();
    let config = super::load_with(&file, &vars()).unwrap();
    assert_eq!(config.overlay.path, dir.path().join("state/extra.toml"));
}

#[test]
fn users_get_default_limits_and_zero_lifts_one() {
    let users = format!(
        "[auth.api_keys.ci]\nsha256 = {:?}\n",
        crate::config::hash_api_key("ci-key-0123456789abcdef")
    );
    let limits = |text: &str| load("l.toml", text).unwrap().limits;
    let defaults = limits(&users);
    assert_eq!(defaults.max_sessions_per_principal, Some(64));
    let rate = defaults.rate_per_principal.unwrap();
    assert_eq!((rate.per_second, rate.burst), (100.0, 200));
    assert_eq!(defaults.max_concurrent_per_principal, None);

    let lifted = limits(&format!(
        "{users}[limits]\nmax_sessions_per_principal = 0\nrequests_per_second_per_principal = 0\n"
    ));
    assert_eq!(lifted.max_sessions_per_principal, None);
    assert_eq!(lifted.rate_per_principal, None);
    let burst = limits(&format!("{users}[limits]\nburst_per_principal = 500\n"));
    assert_eq!(burst.rate_per_principal.unwrap().burst, 500);

    // Without [auth], the one anonymous user is the operator: no default limits them.
    let open = limits("");
    assert_eq!(open.max_sessions_per_principal, None);
    assert_eq!(open.rate_per_principal, None);
}

#[test]
fn roots_are_uris_or_absolute_paths() {
    let config = load(
        "s.toml",
        "[upstreams.a]\ncommand = \"x\"\nroots = [\"/home/u/project\", \"file:///srv/data\"]\n",
    )
    .unwrap();
    assert_eq!(
        config.upstreams[0].roots,
        ["file:///home/u/project", "file:///srv/data"]
    );
    let found = problems(
        "s.toml",
        "[upstreams.a]\ncommand = \"x\"\nroots = [\"relative/dir\"]\n",
    );
    assert_has(&found, "upstreams.a.roots[0]: is not a URI");
}

#[test]
fn how_long_a_2026_call_waits_for_its_answers_is_bounded() {
    let config = load("wait.toml", "[limits]\ninput_wait_seconds = 60\n").unwrap();
    assert_eq!(config.limits.input_wait, Duration::from_secs(60));
    let config = load("default.toml", "").unwrap();
    assert_eq!(config.limits.input_wait, Duration::from_secs(300));
    for (value, expected) in [
        ("0", "limits.input_wait_seconds: must be at least 1"),
        ("3601", "limits.input_wait_seconds: must be at most 3600"),
    ] {
        let found = problems(
            "wait.toml",
            &format!("[limits]\ninput_wait_seconds = {value}\n"),
        );
        assert_has(&found, expected);
    }
}

#[test]
fn finding_what_tools_need_of_clients_can_be_turned_off() {
    let config = load(
        "probe.toml",
        "[upstreams.a]\ncommand = \"a\"\n[upstreams.b]\ncommand = \"b\"\nprobe_client_features = false\n",
    )
    .unwrap();
    let probes: Vec<bool> = (config.upstreams.iter())
        .map(|upstream| upstream.probe_client_features)
        .collect();
    assert_eq!(probes, [true, false]);
}
