//! `[catalog]`'s search and pinning, the item rules of an upstream (argument checks, pins,
//! caching, audited arguments, inlined resources), `[audit]`, and the endpoint's JSON mode and
//! CORS: read, and their mistakes named.

use std::time::Duration;

use super::{assert_has, load, problems};

#[test]
fn search_pinning_checks_and_caching_are_read_and_their_mistakes_named() {
    let config = load(
        "s.toml",
        r#"
[catalog]
tool_search = "auto"
tool_search_threshold = 40
pin = true
pin_new = "hold"
pin_changed = "hide"

[endpoints.small]
tool_search = "off"

[upstreams.docs]
url = "https://docs.example.com/mcp"
validate_arguments = false
pin = false
cache = { seconds = 60 }

[upstreams.docs.tool_cache]
rates = { seconds = 5, shared = true }
"#,
    )
    .unwrap();
    let catalog = &config.catalog;
    assert_eq!(catalog.tool_search, crate::policy::ToolSearch::Above(40));
    assert!(catalog.pin);
    assert_eq!(catalog.pin_new, super::super::PinNew::Hold);
    assert_eq!(catalog.pin_changed, super::super::PinChanged::Hide);
    assert_eq!(
        config.endpoints[0].tool_search,
        Some(crate::policy::ToolSearch::Off)
    );
    let items = &config.upstreams[0].items;
    assert!(!items.validate_arguments);
    assert_eq!(items.pin, Some(false));
    assert_eq!(
        items.tool_cache("search").unwrap().ttl,
        Duration::from_secs(60)
    );
    let rates = items.tool_cache("rates").unwrap();
    assert_eq!((rates.ttl, rates.shared), (Duration::from_secs(5), true));

    let found = problems(
        "bad.toml",
        r#"
[catalog]
tool_search = "sometimes"
pin_new = "ask"
pin_changed = "keep"

[upstreams.docs]
url = "https://docs.example.com/mcp"
cache = { seconds = -1 }

[upstreams.docs.tool_cache]
rates = { shared = true }
"#,
    );
    assert_has(
        &found,
        "catalog.tool_search: `sometimes` is not one of `off`, `on`, `auto`",
    );
    assert_has(
        &found,
        "catalog.pin_new: `ask` is not one of `approve`, `hold`",
    );
    assert_has(
        &found,
        "catalog.pin_changed: `keep` is not one of `serve_approved`, `hide`",
    );
    assert_has(
        &found,
        "upstreams.docs.cache.seconds: must be a number of seconds above 0",
    );
    assert_has(
        &found,
        "upstreams.docs.tool_cache.rates.seconds: is required",
    );
}

#[test]
fn a_search_model_that_cannot_be_loaded_is_named_with_its_file() {
    let found = problems(
        "/nonexistent/sy/s.toml",
        "[catalog]\ntool_search = \"on\"\nsearch_model = \"models/minilm\"\n",
    );
    assert_has(
        &found,
        "catalog.search_model: /nonexistent/sy/models/minilm/config.json: No such file",
    );
    // A directory with the files, but not a model in them.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("config.json"),
        r#"{"hidden_size": 8, "num_attention_heads": 2, "num_hidden_layers": 1,
            "intermediate_size": 16, "max_position_embeddings": 16, "vocab_size": 8}"#,
    )
    .unwrap();
    std::fs::write(dir.path().join("vocab.txt"), "[PAD]\n[UNK]\n[CLS]\n[SEP]\n").unwrap();
    std::fs::write(dir.path().join("model.safetensors"), b"not a tensor file").unwrap();
    let text = format!(
        "[catalog]\nsearch_model = {:?}\n",
        dir.path().to_str().unwrap()
    );
    let found = problems("/nonexistent/sy/s.toml", &text);
    let broken = format!(
        "catalog.search_model: {}: ",
        dir.path().join("model.safetensors").display()
    );
    assert_has(&found, &broken);
}

#[test]
fn the_audit_log_is_read_and_its_mistakes_named() {
    let config = load(
        "/etc/sy/a.toml",
        r#"
[audit]
file = "logs/audit.log"
max_file_bytes = 65536
max_files = 3
arguments = "none"
fail_closed = true

[upstreams.docs]
url = "https://docs.example.com/mcp"
audit_arguments = "full"
"#,
    )
    .unwrap();
    assert_eq!(
        config.audit.output,
        Some(super::super::AuditOutput::File {
            path: "/etc/sy/logs/audit.log".into(),
            max_bytes: 65536,
            keep: 3,
        })
    );
    assert_eq!(config.audit.arguments, super::super::AuditArguments::None);
    assert!(config.audit.fail_closed);
    assert_eq!(
        config.upstreams[0].items.audit_arguments,
        Some(super::super::AuditArguments::Full)
    );
    assert!(load("off.toml", "").unwrap().audit.output.is_none());

    let found = problems(
        "bad.toml",
        r#"
[audit]
file = "a.log"
stdout = true
arguments = "some"

[upstreams.docs]
url = "https://docs.example.com/mcp"
audit_arguments = "maybe"
"#,
    );
    assert_has(
        &found,
        "audit.stdout: give `file` or `stdout = true`, not both",
    );
    assert_has(
        &found,
        "audit.arguments: `some` is not one of `none`, `sha256`, `full`",
    );
    assert_has(
        &found,
        "upstreams.docs.audit_arguments: `maybe` is not one of",
    );
    assert_has(
        &problems("none.toml", "[audit]\nqueue = 5\n"),
        "audit: names no output",
    );
}

#[test]
fn inlining_json_mode_and_cors_are_read_and_their_mistakes_named() {
    let config = load(
        "s.toml",
        r#"
[server]
json_response = true
allowed_origins = ["https://app.example.com", "https://other.example.com"]

[server.cors]
allowed_methods = ["post", "GET", "OPTIONS"]
allowed_headers = ["Content-Type", "Authorization"]
max_age_seconds = 30

[endpoints.narrow.cors]
allowed_origins = ["https://app.example.com"]

[endpoints.links]
inline_resources = true
inline_max_bytes = 2048

[upstreams.docs]
url = "https://docs.example.com/mcp"
inline_resources = true
"#,
    )
    .unwrap();
    assert!(config.server.json_response);
    assert_eq!(config.server.cors.methods, ["POST", "GET", "OPTIONS"]);
    assert_eq!(
        config.server.cors.headers.as_deref(),
        Some("Content-Type, Authorization")
    );
    assert_eq!(config.server.cors.max_age, "30");
    assert_eq!(config.endpoint_cors.len(), 1);
    assert_eq!(config.endpoint_cors[0].0, "narrow");
    assert!(config.endpoint_cors[0].1.origins.is_some());
    assert_eq!(config.endpoints[1].inline_resources, Some(2048));
    assert_eq!(
        config.upstreams[0].items.inline_resources,
        Some(crate::config::INLINE_BYTES)
    );

    let found = problems(
        "s.toml",
        r#"
[server.cors]
allowed_methods = ["GET", "PATCH"]
allowed_headers = ["bad header"]
max_age_seconds = 100000
allowed_origins = ["https://app.example.com"]

[endpoints.e.cors]
allowed_origins = ["app.example.com"]

[upstreams.docs]
url = "https://docs.example.com/mcp"
inline_max_bytes = 10

[upstreams.big]
url = "https://big.example.com/mcp"
inline_resources = true
inline_max_bytes = 0
"#,
    );
    for expected in [
        "server.cors.allowed_methods[1]: `PATCH` is not a method of the endpoint",
        "server.cors.allowed_methods: must hold POST",
        "server.cors.allowed_headers[0]: `bad header` is not a header name",
        "server.cors.max_age_seconds: must be at most 86400",
        "server.cors.allowed_origins: the main endpoint's origins are `[server] allowed_origins`",
        "endpoints.e.cors.allowed_origins[0]: `app.example.com` is not an origin",
        "upstreams.docs.inline_max_bytes: applies only with `inline_resources = true`",
        "upstreams.big.inline_max_bytes: must be above 0",
    ] {
        assert_has(&found, expected);
    }
    assert_eq!(found.len(), 8, "{found:#?}");
}
