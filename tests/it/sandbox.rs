//! Sandboxed stdio servers (`[upstreams.NAME.sandbox]`): the same server, on the official
//! Python SDK, run twice behind the gateway — free, and sandboxed — is asked to read and write
//! outside what it was given, open a socket, fork a hundred processes, read the gateway's
//! environment, and take too much memory and too many files. The free one can; the sandboxed
//! one is stopped each time, while its real work (`add`, and the paths it was given) goes on.
//! `/api/status` says what the kernel enforces. A published Node server, sandboxed with
//! `required = true`, serves as it does free.

use std::time::Duration;

use serde_json::{Value, json};

use crate::{
    deps,
    harness::{GatewayBuilder, TestGateway, call, text},
};

/// A gateway serving the same server twice, both ready: `free`, and `boxed` with `sandbox`.
async fn free_and_boxed(program: &str, sandbox: &str) -> TestGateway {
    let gw = GatewayBuilder::new()
        .upstream("free", program)
        .upstream("boxed", &format!("{program}\n{sandbox}"))
        .start()
        .await;
    for name in ["boxed", "free"] {
        gw.wait_state(name, "ready", Duration::from_secs(30)).await;
    }
    gw
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandboxed_server_is_stopped_outside_what_it_was_given_and_its_work_goes_on() {
    let (python, client) = deps::python();
    let server = client.with_file_name("sandboxed_server.py");
    let venv = python.parent().unwrap().parent().unwrap();
    // The interpreter the virtualenv was made from, wherever it is installed.
    let base = std::process::Command::new(python)
        .args(["-c", "import sys; print(sys.base_prefix)"])
        .output()
        .unwrap();
    let base = String::from_utf8(base.stdout).unwrap().trim().to_owned();
    let files = tempfile::tempdir().unwrap();
    let (given, outside) = (files.path().join("given"), files.path().join("outside"));
    std::fs::create_dir_all(&given).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    let secret = outside.join("secret.txt");
    std::fs::write(&secret, "the operator's secret").unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            drop(socket);
        }
    });

    let program =
        format!("command = {python:?}\nargs = [{server:?}]\nconnect_timeout_seconds = 30\n");
    let sandbox = format!(
        "[upstreams.boxed.sandbox]\nread = [{venv:?}, {base:?}, {dir:?}]\nwrite = [{given:?}]\n\
         network = false\nprocesses = 24\nmemory_mb = 256\nopen_files = 64\n",
        dir = server.parent().unwrap(),
    );
    let gw = free_and_boxed(&program, &sandbox).await;
    let client = gw.client().await;
    let ask = |tool: &str, arguments: Value| {
        let client = &client;
        let tool = tool.to_owned();
        async move {
            let free = call(client, &format!("free__{tool}"), arguments.clone()).await;
            let boxed = call(client, &format!("boxed__{tool}"), arguments).await;
            let (free, boxed) = (free.unwrap(), boxed.unwrap());
            (text(&free).to_owned(), text(&boxed).to_owned())
        }
    };

    let (free, boxed) = ask("read", json!({"path": secret})).await;
    assert_eq!(free, "ok: the operator's secret");
    assert!(boxed.starts_with("refused: PermissionError"), "{boxed}");

    let (free, boxed) = ask(
        "write",
        json!({"path": outside.join("dropped"), "text": "x"}),
    )
    .await;
    assert_eq!(free, "ok: 1");
    assert!(boxed.starts_with("refused: PermissionError"), "{boxed}");
    let (_, boxed) = ask(
        "write",
        json!({"path": given.join("notes"), "text": "kept"}),
    )
    .await;
    assert_eq!(boxed, "ok: 4", "a path it was given stays writable");
    assert_eq!(
        std::fs::read_to_string(given.join("notes")).unwrap(),
        "kept"
    );
    let (_, boxed) = ask("read", json!({"path": given.join("notes")})).await;
    assert_eq!(boxed, "ok: kept");

    let (free, boxed) = ask("connect", json!({"port": port})).await;
    assert_eq!(free, "ok: connected");
    assert!(boxed.starts_with("refused: PermissionError"), "{boxed}");

    let (free, boxed) = ask("spawn", json!({"count": 100})).await;
    assert_eq!(free, "ok: 100");
    let started: usize = (boxed.strip_prefix("refused: after "))
        .and_then(|rest| rest.split(':').next()?.parse().ok())
        .unwrap_or_else(|| panic!("{boxed}"));
    assert!((1..24).contains(&started), "{boxed}");

    // The gateway's own environment (this process's), which a server of the same user could
    // read in /proc.
    let (free, boxed) = ask("environ", json!({"pid": std::process::id()})).await;
    assert!(free.starts_with("ok: "), "{free}");
    assert!(boxed.starts_with("refused: PermissionError"), "{boxed}");

    let (free, boxed) = ask("allocate", json!({"mb": 512})).await;
    assert_eq!(free, "ok: 536870912");
    assert!(boxed.starts_with("refused: MemoryError"), "{boxed}");
    let (free, boxed) = ask("hold_open", json!({"count": 100})).await;
    assert_eq!(free, "ok: 100");
    assert!(boxed.starts_with("refused: OSError: [Errno 24]"), "{boxed}");

    // Its real work goes on, after all of it.
    let (free, boxed) = ask("add", json!({"a": 2, "b": 3})).await;
    assert_eq!((free.as_str(), boxed.as_str()), ("5", "5"));

    let status = gw.admin_json("/api/status").await;
    let servers = status["servers"].as_array().unwrap();
    let boxed = servers.iter().find(|s| s["name"] == "boxed").unwrap();
    let enforced = boxed["sandbox"]["enforced"].as_array().unwrap();
    for feature in [
        "paths (Landlock)",
        "system call filter (seccomp)",
        "network namespace",
    ] {
        assert!(enforced.contains(&json!(feature)), "{boxed}");
    }
    assert_eq!(boxed["sandbox"]["missing"], json!([]), "{boxed}");
    let free = servers.iter().find(|s| s["name"] == "free").unwrap();
    assert!(free.get("sandbox").is_none(), "{free}");
    client.cancel().await.unwrap();
}

/// The official filesystem server (npm), sandboxed with `required = true` and given only its
/// Node, its package and the directory it serves, answers as it does free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_published_server_runs_sandboxed_as_it_runs_free() {
    let packages = deps::node_packages();
    let server =
        packages.join("node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
    let files = tempfile::tempdir().unwrap();
    std::fs::write(files.path().join("note.txt"), "sandboxed\n").unwrap();
    let program = format!(
        "command = {node:?}\nargs = [{server:?}, {files:?}]\nconnect_timeout_seconds = 30\n",
        node = deps::node22(),
        files = files.path(),
    );
    let sandbox = format!(
        "[upstreams.boxed.sandbox]\nread = [{packages:?}]\nwrite = [{files:?}]\n\
         network = false\nmemory_mb = 1024\nprocesses = 64\nopen_files = 256\nrequired = true\n",
        files = files.path(),
    );
    let gw = free_and_boxed(&program, &sandbox).await;
    let client = gw.client().await;
    let tools = client.list_all_tools().await.unwrap();
    let named = |prefix: &str| {
        let mut names: Vec<String> = (tools.iter())
            .filter_map(|t| t.name.strip_prefix(prefix).map(str::to_owned))
            .collect();
        names.sort();
        names
    };
    assert!(!named("boxed__").is_empty());
    assert_eq!(named("boxed__"), named("free__"));
    let note = files.path().join("note.txt");
    for upstream in ["free", "boxed"] {
        let read = call(
            &client,
            &format!("{upstream}__read_text_file"),
            json!({"path": note}),
        )
        .await
        .unwrap();
        assert_eq!(text(&read), "sandboxed\n", "{upstream}");
        let written = call(
            &client,
            &format!("{upstream}__write_file"),
            json!({"path": files.path().join(format!("{upstream}.txt")), "content": "kept"}),
        )
        .await
        .unwrap();
        assert_ne!(written.is_error, Some(true), "{upstream}: {written:?}");
    }
    let status = gw.admin_json("/api/status").await;
    let boxed = (status["servers"].as_array().unwrap().iter())
        .find(|s| s["name"] == "boxed")
        .unwrap()
        .clone();
    assert_eq!(boxed["sandbox"]["missing"], json!([]), "{boxed}");
    client.cancel().await.unwrap();
}
