//! The gateway binary as its own process: for tests that signal, kill or replicate it.

use std::{net::SocketAddr, path::Path, time::Duration};

use super::SWITCHYARD;

/// The gateway binary, run on a configuration file with both listeners on free loopback
/// ports (read back from its log). Killed when dropped. Its state directory, unless the
/// configuration names one, is a temporary one of its own (`XDG_STATE_HOME`).
pub struct GatewayProcess {
    pub child: std::process::Child,
    pub addr: SocketAddr,
    pub admin: SocketAddr,
    /// The pass-through listener, if it has one.
    pub passthrough: Option<SocketAddr>,
    state: tempfile::TempDir,
    /// Every line it logged so far.
    logs: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl GatewayProcess {
    pub fn start(config: &Path) -> Self {
        Self::start_with(config, &[])
    }

    /// `start`, with `args` added to the command line.
    pub fn start_with(config: &Path, args: &[&str]) -> Self {
        Self::start_with_env(config, args, &[])
    }

    /// `start_with`, with `env` added to its environment.
    pub fn start_with_env(config: &Path, args: &[&str], env: &[(&str, &str)]) -> Self {
        use std::io::BufRead;
        let state = tempfile::tempdir().unwrap();
        let mut child = std::process::Command::new(SWITCHYARD)
            .args(["run", "-c"])
            .arg(config)
            .args(["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"])
            .args(args)
            .env("XDG_STATE_HOME", state.path())
            .envs(env.iter().copied())
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let logs = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let kept = logs.clone();
        std::thread::spawn(move || {
            let address = |line: &str, after: &str| {
                let at = line.find(after)? + after.len();
                let rest = line[at..].trim_start_matches("http://");
                rest.split(['/', ' ']).next()?.parse::<SocketAddr>().ok()
            };
            let (mut main, mut admin, mut passthrough) = (None, None, None);
            for line in std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
            {
                if std::env::var_os("GATEWAY_LOG").is_some() {
                    eprintln!("{line}");
                }
                kept.lock().unwrap().push(line.clone());
                main = main.or_else(|| address(&line, "serving MCP on "));
                admin = admin.or_else(|| address(&line, "metrics on "));
                passthrough = passthrough.or_else(|| address(&line, "pass-through routes on "));
                if let (Some(found), Some(admin)) = (main, admin) {
                    let _ = tx.send((found, admin, passthrough));
                    main = None;
                }
            }
        });
        let (addr, admin, passthrough) = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the gateway starts");
        Self {
            child,
            addr,
            admin,
            passthrough,
            state,
            logs,
        }
    }

    /// Every line it logged so far.
    pub fn logs(&self) -> Vec<String> {
        self.logs.lock().unwrap().clone()
    }

    /// The admin token it made at start (where its configuration names no state directory).
    pub fn admin_token(&self) -> String {
        let path = self.state.path().join("switchyard/admin.token");
        std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
            .trim()
            .to_owned()
    }

    /// `http://ADDR/mcp`.
    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Its `/metrics` (on the admin listener), as text.
    pub async fn metrics_text(&self) -> String {
        reqwest::get(format!("http://{}/metrics", self.admin))
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    /// A counter or gauge of its `/metrics` without labels.
    pub async fn metric(&self, name: &str) -> f64 {
        self.metrics_text()
            .await
            .lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
            .and_then(|value| value.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {name} in /metrics"))
    }

    /// Waits for the process to exit by itself (blocking).
    pub fn wait(mut self) -> std::process::ExitStatus {
        self.child.wait().unwrap()
    }

    /// Waits (blocking) up to `within` for the process to exit by itself: its status, or
    /// `None` if it had not (it is killed then).
    pub fn exit_within(mut self, within: Duration) -> Option<std::process::ExitStatus> {
        let deadline = std::time::Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            if std::time::Instant::now() > deadline {
                self.kill();
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Sends it signal `name` (`TERM`, `HUP`, `QUIT`).
    pub fn signal(&self, name: &str) {
        let status = std::process::Command::new("kill")
            .args([&format!("-{name}"), &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "kill -{name}");
    }

    /// Starts a new binary on `config` with `--upgrade` and `args`, and returns once it waits
    /// at `socket` for a running one's sockets (see `Upgrading::take_over`).
    pub async fn upgrading(config: &Path, args: &[&str], socket: &Path) -> Upgrading {
        let (config, args) = (
            config.to_owned(),
            args.iter().map(|a| a.to_string()).collect(),
        );
        let starting = std::thread::spawn(move || {
            let mut args: Vec<String> = args;
            args.push("--upgrade".into());
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            GatewayProcess::start_with(&config, &args)
        });
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while !socket.exists() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the new binary never waited"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Upgrading(starting)
    }
}

/// A new binary waiting to take a running one's sockets over.
pub struct Upgrading(std::thread::JoinHandle<GatewayProcess>);

impl Upgrading {
    /// Sends `running` SIGQUIT, so that it hands its sockets over: the new binary, serving.
    pub async fn take_over(self, running: &GatewayProcess) -> GatewayProcess {
        running.signal("QUIT");
        tokio::task::spawn_blocking(move || self.0.join().unwrap())
            .await
            .unwrap()
    }
}

impl Drop for GatewayProcess {
    fn drop(&mut self) {
        self.kill();
    }
}
