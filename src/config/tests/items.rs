//! `[catalog]`'s search and pinning, the item rules of an upstream (argument checks, pins,
//! caching, audited arguments) and `[audit]`: read, and their mistakes named.

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
