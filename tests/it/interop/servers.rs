//! Six real servers published on npm and PyPI, as a user installs them: server-everything,
//! filesystem, memory and sequential-thinking (npm), time and git (PyPI). Each runs over stdio,
//! or is served over streamable HTTP or legacy SSE (server-everything by itself, the others
//! through supergateway), with one call whose result depends neither on when nor by whom it is
//! made.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use tokio::process::Child;

use crate::{
    deps,
    fixtures::everything::{self, listening},
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Stdio,
    StreamableHttp,
    Sse,
}

impl Transport {
    pub const ALL: [Self; 3] = [Self::Stdio, Self::StreamableHttp, Self::Sse];

    /// As the client scripts name it.
    pub fn key(self) -> &'static str {
        match self {
            Self::Stdio => "stdio",
            Self::StreamableHttp => "http",
            Self::Sse => "sse",
        }
    }
}

/// One server: how it is started over stdio, and the call the suite makes.
pub struct Server {
    /// Its upstream name at the gateway.
    pub name: &'static str,
    command: PathBuf,
    args: Vec<String>,
    env: Vec<(String, String)>,
    /// The tool called, with its arguments.
    pub call: (&'static str, Value),
    /// Its calls change what the next call answers, where instances are shared.
    pub stateful: bool,
}

/// The six, with their files in `scratch`.
pub fn six(scratch: &Path) -> Vec<Server> {
    let node = deps::node22();
    let npm = |package: &str| {
        deps::node_packages()
            .join("node_modules/@modelcontextprotocol")
            .join(package)
            .join("dist/index.js")
            .display()
            .to_string()
    };
    let (python, _) = deps::python();
    let files = scratch.join("files");
    std::fs::create_dir_all(&files).unwrap();
    std::fs::write(files.join("note.txt"), "interop\n").unwrap();
    let repo = scratch.join("repo");
    git_repository(&repo);
    let dir = |path: &Path| path.display().to_string();
    vec![
        Server {
            name: "everything",
            command: node.clone(),
            args: vec![npm("server-everything"), "stdio".into()],
            env: Vec::new(),
            call: ("echo", json!({"message": "interop"})),
            stateful: false,
        },
        Server {
            name: "filesystem",
            command: node.clone(),
            args: vec![npm("server-filesystem"), dir(&files)],
            env: Vec::new(),
            call: ("list_directory", json!({"path": dir(&files)})),
            stateful: false,
        },
        Server {
            name: "memory",
            command: node.clone(),
            args: vec![npm("server-memory")],
            env: vec![(
                "MEMORY_FILE_PATH".into(),
                dir(&scratch.join("memory.jsonl")),
            )],
            call: ("read_graph", json!({})),
            stateful: false,
        },
        Server {
            name: "thinking",
            command: node,
            args: vec![npm("server-sequential-thinking")],
            env: Vec::new(),
            call: (
                "sequentialthinking",
                json!({"thought": "One step.", "thoughtNumber": 1, "totalThoughts": 1, "nextThoughtNeeded": false}),
            ),
            stateful: true,
        },
        Server {
            name: "time",
            command: python.clone(),
            args: ["-m", "mcp_server_time", "--local-timezone", "UTC"]
                .map(String::from)
                .into(),
            env: Vec::new(),
            call: (
                "convert_time",
                json!({"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}),
            ),
            stateful: false,
        },
        Server {
            name: "git",
            command: python.clone(),
            args: vec![
                "-m".into(),
                "mcp_server_git".into(),
                "--repository".into(),
                dir(&repo),
            ],
            env: Vec::new(),
            call: ("git_log", json!({"repo_path": dir(&repo), "max_count": 1})),
            stateful: false,
        },
    ]
}

/// A repository at `at` with one commit of fixed author and date.
fn git_repository(at: &Path) {
    std::fs::create_dir_all(at).unwrap();
    std::fs::write(at.join("README"), "interop\n").unwrap();
    let git = |args: &[&str]| {
        let status = std::process::Command::new("git")
            .args(args)
            .current_dir(at)
            .env("GIT_AUTHOR_DATE", "2026-01-01T00:00:00Z")
            .env("GIT_COMMITTER_DATE", "2026-01-01T00:00:00Z")
            .status()
            .expect("git runs");
        assert!(status.success(), "git {args:?}");
    };
    git(&["init", "-q", "-b", "main"]);
    git(&[
        "-c",
        "user.name=Interop",
        "-c",
        "user.email=i@example.com",
        "add",
        "README",
    ]);
    git(&[
        "-c",
        "user.name=Interop",
        "-c",
        "user.email=i@example.com",
        "commit",
        "-q",
        "-m",
        "First",
    ]);
}

/// One running instance of a server, reached over a transport; stopped when dropped.
pub struct Instance {
    /// What a client script is given to reach it (`transport`, and `command`, `args`, `env`
    /// or `url`).
    pub target: Value,
    /// The body of its `[upstreams.NAME]` table.
    pub upstream: String,
    _child: Option<Child>,
}

impl Server {
    /// Its environment for a stdio client: what every program expects, and its own.
    fn stdio_env(&self) -> Value {
        let mut env = serde_json::Map::new();
        for name in ["PATH", "HOME"] {
            if let Ok(value) = std::env::var(name) {
                env.insert(name.into(), value.into());
            }
        }
        for (name, value) in &self.env {
            env.insert(name.clone(), value.clone().into());
        }
        Value::Object(env)
    }

    /// Starts an instance reached over `transport` (over stdio, the client starts it).
    pub async fn start(&self, transport: Transport) -> Instance {
        let per_client = "session = \"per_client\"\nconnect_timeout_seconds = 60";
        if transport == Transport::Stdio {
            let env: Vec<String> = (self.env.iter())
                .map(|(name, value)| format!("{name:?} = {value:?}"))
                .collect();
            return Instance {
                target: json!({
                    "transport": "stdio",
                    "command": self.command,
                    "args": self.args,
                    "env": self.stdio_env(),
                }),
                upstream: format!(
                    "command = {:?}\nargs = {:?}\nenv = {{ {} }}\n{per_client}",
                    self.command,
                    self.args,
                    env.join(", ")
                ),
                _child: None,
            };
        }
        let (child, addr) = if self.name == "everything" {
            let mode = match transport {
                Transport::Sse => "sse",
                _ => "streamableHttp",
            };
            listening(
                &[everything::entry().display().to_string(), mode.into()],
                &[],
                0,
            )
            .await
        } else {
            self.behind_supergateway(transport).await
        };
        let (url, transport_key) = match transport {
            Transport::Sse => (format!("http://{addr}/sse"), "sse"),
            _ => (format!("http://{addr}/mcp"), "streamable_http"),
        };
        Instance {
            target: json!({"transport": transport.key(), "url": url}),
            upstream: format!("transport = {transport_key:?}\nurl = {url:?}\n{per_client}"),
            _child: Some(child),
        }
    }

    /// The stdio server served over `transport` by supergateway (a session of its own per
    /// client over streamable HTTP; one process for all over SSE).
    async fn behind_supergateway(&self, transport: Transport) -> (Child, std::net::SocketAddr) {
        let mut line = vec![self.command.display().to_string()];
        line.extend(self.args.iter().cloned());
        let gateway = deps::node_packages().join("node_modules/supergateway/dist/index.js");
        let mut args = vec![
            gateway.display().to_string(),
            "--stdio".into(),
            line.join(" "),
            "--logLevel".into(),
            "none".into(),
        ];
        match transport {
            Transport::Sse => args.extend(["--outputTransport".into(), "sse".into()]),
            _ => {
                args.extend(["--outputTransport", "streamableHttp", "--stateful"].map(String::from))
            }
        }
        // supergateway starts the server with its own environment.
        listening(&args, &self.env, 0).await
    }
}
