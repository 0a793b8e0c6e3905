//! `[store]`: embedded (in a file) by default, in memory if asked, Redis for replicas (with the keys they share), and the
//! mistakes it is refused for.

use super::{assert_has, load, problems};
use crate::config::{StoreKind, StoreSettings};

const KEY: &str = "KioqKioqKioqKioqKioqKioqKioqKioqKioqKioqKio=";

#[test]
fn embedded_by_default_and_redis_as_written() {
    let config = load("s.toml", "").unwrap();
    assert_eq!(config.store, StoreSettings::default());
    assert!(!config.store.is_shared());

    let config = load(
        "s.toml",
        &format!(
            "[store]\nkind = \"redis\"\nurl = \"redis://127.0.0.1:6379/2\"\nprefix = \"sy-eu\"\n\
             session_keys = [\"{KEY}\", \"${{SESSION_KEY_OLD}}\"]\n"
        ),
    );
    let config = config.unwrap_err().to_string();
    assert!(config.contains("SESSION_KEY_OLD"), "{config}");

    let config = load(
        "s.toml",
        &format!(
            "[store]\nkind = \"redis\"\nurl = \"redis://127.0.0.1:6379/2\"\nprefix = \"sy-eu\"\n\
             session_keys = [\"{KEY}\"]\n"
        ),
    )
    .unwrap();
    assert!(config.store.is_shared());
    assert_eq!(
        config.store.kind,
        StoreKind::Redis {
            url: "redis://127.0.0.1:6379/2".into(),
            prefix: "sy-eu".into()
        }
    );
    assert_eq!(config.store.session_keys, vec![[42u8; 32]]);
    // The URL (it may hold a password) is not in the debug form.
    assert!(!format!("{:?}", config.store).contains("6379"));
}

#[test]
fn store_problems_are_located() {
    let found = problems("s.toml", "[store]\nkind = \"redis\"\n");
    assert_has(&found, "store.session_keys: replicas must share the key");
    assert_has(&found, "store.url: is required with kind = \"redis\"");

    let found = problems(
        "s.toml",
        &format!(
            "[store]\nkind = \"redis\"\nurl = \"http://cache:6379\"\nprefix = \"a b\"\n\
             session_keys = [\"short\", \"{KEY}\", \"{KEY}\"]\n"
        ),
    );
    assert_has(&found, "store.url: is not a Redis URL");
    assert_has(
        &found,
        "store.prefix: must be a non-empty name without spaces",
    );
    assert_has(&found, "store.session_keys[0]: must be 32 bytes in base64");
    assert_has(&found, "store.session_keys[2]: repeats an earlier key");

    let found = problems("s.toml", "[store]\nkind = \"memcached\"\nurl = \"x\"\n");
    assert_has(
        &found,
        "store.kind: must be \"embedded\", \"memory\" or \"redis\"",
    );
    let found = problems("s.toml", "[store]\nurl = \"redis://h\"\n");
    assert_has(&found, "store.url: applies to kind = \"redis\" only");
    let found = problems("s.toml", "[store]\nkind = \"memory\"\npath = \"s.redb\"\n");
    assert_has(&found, "store.path: applies to kind = \"embedded\" only");
}

#[test]
fn the_embedded_file_is_in_the_state_directory_unless_named() {
    let config = load("/etc/sy/s.toml", "[oauth]\nstate_dir = \"/var/lib/sy\"\n").unwrap();
    assert_eq!(
        config.store.file(&config.oauth.state_dir),
        Some("/var/lib/sy/sessions.redb".into())
    );
    let config = load("/etc/sy/s.toml", "[store]\npath = \"data/s.redb\"\n").unwrap();
    assert_eq!(
        config.store.kind,
        StoreKind::Embedded {
            path: Some("/etc/sy/data/s.redb".into())
        }
    );
    let config = load("/etc/sy/s.toml", "[store]\nkind = \"memory\"\n").unwrap();
    assert_eq!(config.store.kind, StoreKind::Memory);
    assert_eq!(config.store.file(std::path::Path::new("/x")), None);
}
