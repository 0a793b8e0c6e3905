//! `[upstreams.NAME.sandbox]`: paths resolved against the file's directory, limits in their
//! units, and mistakes located.

use std::path::PathBuf;

use super::{load, problems};
use crate::config::TransportConfig;

#[test]
fn a_sandbox_is_read_with_its_paths_resolved_and_its_limits_in_bytes() {
    let config = load(
        "/etc/switchyard/s.toml",
        r#"
        [upstreams.files]
        command = "files-server"
        sandbox = { read = ["data", "${env:HOME}/docs"], write = ["/tmp/out"], network = false, memory_mb = 512, processes = 8, open_files = 64, required = true }

        [upstreams.free]
        command = "other"
        "#,
    )
    .unwrap();
    let stdio = |name: &str| match &(config.upstreams.iter())
        .find(|u| u.name.as_str() == name)
        .unwrap()
        .transport
    {
        TransportConfig::Stdio(stdio) => stdio.clone(),
        TransportConfig::Http(_) => panic!("{name} is stdio"),
    };
    let sandbox = stdio("files").sandbox.unwrap();
    assert_eq!(
        sandbox.read,
        [
            PathBuf::from("/etc/switchyard/data"),
            PathBuf::from("/home/u/docs")
        ]
    );
    assert_eq!(sandbox.write, [PathBuf::from("/tmp/out")]);
    assert!(!sandbox.network && sandbox.required);
    assert_eq!(sandbox.memory_bytes, Some(512 << 20));
    assert_eq!((sandbox.processes, sandbox.open_files), (Some(8), Some(64)));
    assert_eq!(stdio("free").sandbox, None);
}

#[test]
fn sandbox_mistakes_are_located() {
    let found = problems(
        "s.toml",
        r#"
        [upstreams.a]
        command = "x"
        sandbox = { read = [""], memory_mb = 1, processes = 0, open_files = 2, writable = ["/"] }

        [upstreams.b]
        url = "https://b.example.com/mcp"
        sandbox = { network = false }
        "#,
    );
    for expected in [
        "upstreams.a.sandbox.read[0]: is empty",
        "upstreams.a.sandbox.memory_mb: must be at least 16",
        "upstreams.a.sandbox.processes: must be at least 1",
        "upstreams.a.sandbox.open_files: must be at least 16",
        "upstreams.a.sandbox.writable: unknown key",
        "upstreams.b.sandbox: does not apply to transport",
    ] {
        assert!(
            found.iter().any(|p| p.starts_with(expected)),
            "missing {expected:?} in {found:#?}"
        );
    }
}
