//! The MCP clients `switchyard import` knows: where each keeps its servers on Linux and macOS
//! (for the user, and in a workspace), under which key, and how it names a remote server.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

/// A client whose configuration files are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum Client {
    ClaudeDesktop,
    ClaudeCode,
    Cursor,
    Vscode,
    Windsurf,
    Zed,
}

/// Whose file: the user's, or a workspace's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    User,
    Workspace,
}

/// Where in a file the servers are: the path of keys to their object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    pub keys: Vec<String>,
}

impl Place {
    fn at(keys: &[&str]) -> Self {
        Self {
            keys: keys.iter().map(|key| (*key).to_owned()).collect(),
        }
    }

    /// `mcpServers`, `projects › /home/u/app › mcpServers`.
    pub fn describe(&self) -> String {
        self.keys.join(" › ")
    }

    /// The servers' object in `document`, if there is one.
    pub fn find<'a>(&self, document: &'a Value) -> Option<&'a Map<String, Value>> {
        let mut here = document;
        for key in &self.keys {
            here = here.get(key)?;
        }
        here.as_object()
    }

    /// The servers' object in `document`, made if missing.
    pub fn find_mut<'a>(&self, document: &'a mut Value) -> Option<&'a mut Map<String, Value>> {
        let mut here = document;
        for key in &self.keys {
            let object = here.as_object_mut()?;
            here = object
                .entry(key.clone())
                .or_insert_with(|| Value::Object(Map::new()));
        }
        here.as_object_mut()
    }
}

/// One file a client may keep servers in.
#[derive(Debug, Clone)]
pub struct Location {
    pub client: Client,
    pub scope: Scope,
    pub path: PathBuf,
}

impl Client {
    pub const ALL: [Client; 6] = [
        Client::ClaudeDesktop,
        Client::ClaudeCode,
        Client::Cursor,
        Client::Vscode,
        Client::Windsurf,
        Client::Zed,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Client::ClaudeDesktop => "Claude Desktop",
            Client::ClaudeCode => "Claude Code",
            Client::Cursor => "Cursor",
            Client::Vscode => "VS Code",
            Client::Windsurf => "Windsurf",
            Client::Zed => "Zed",
        }
    }

    /// The files this client may keep servers in, for the user `home` (Linux and macOS
    /// paths both: only those that exist are read) and the workspace `workspace`.
    pub fn locations(self, home: &Path, workspace: Option<&Path>) -> Vec<Location> {
        let user = |relative: &str| Location {
            client: self,
            scope: Scope::User,
            path: home.join(relative),
        };
        let mut found = match self {
            Client::ClaudeDesktop => vec![
                user(".config/Claude/claude_desktop_config.json"),
                user("Library/Application Support/Claude/claude_desktop_config.json"),
            ],
            Client::ClaudeCode => vec![user(".claude.json")],
            Client::Cursor => vec![user(".cursor/mcp.json")],
            Client::Vscode => vec![
                user(".config/Code/User/mcp.json"),
                user(".config/Code/User/settings.json"),
                user("Library/Application Support/Code/User/mcp.json"),
                user("Library/Application Support/Code/User/settings.json"),
            ],
            Client::Windsurf => vec![user(".codeium/windsurf/mcp_config.json")],
            Client::Zed => vec![user(".config/zed/settings.json")],
        };
        let relative: &[&str] = match self {
            Client::ClaudeDesktop | Client::Windsurf => &[],
            Client::ClaudeCode => &[".mcp.json"],
            Client::Cursor => &[".cursor/mcp.json"],
            Client::Vscode => &[".vscode/mcp.json", ".vscode/settings.json"],
            Client::Zed => &[".zed/settings.json"],
        };
        if let Some(workspace) = workspace {
            found.extend(relative.iter().map(|relative| Location {
                client: self,
                scope: Scope::Workspace,
                path: workspace.join(relative),
            }));
        }
        found
    }

    /// Where the servers are in `document`, a file of this client at `path`.
    pub fn places(self, path: &Path, document: &Value) -> Vec<Place> {
        let settings = path.file_name().is_some_and(|name| name == "settings.json");
        match self {
            Client::Vscode if settings => vec![Place::at(&["mcp", "servers"])],
            Client::Vscode => vec![Place::at(&["servers"])],
            Client::Zed => vec![Place::at(&["context_servers"])],
            Client::ClaudeCode => {
                let mut places = vec![Place::at(&["mcpServers"])];
                // Servers of one project ("local" scope), kept in the same file.
                if let Some(projects) = document.get("projects").and_then(Value::as_object) {
                    for (project, settings) in projects {
                        if settings.get("mcpServers").is_some() {
                            places.push(Place::at(&["projects", project, "mcpServers"]));
                        }
                    }
                }
                places
            }
            Client::ClaudeDesktop | Client::Cursor | Client::Windsurf => {
                vec![Place::at(&["mcpServers"])]
            }
        }
    }

    /// Whether this client expands `${…}` in its files (and which forms: see `servers`).
    pub fn expands(self) -> bool {
        matches!(self, Client::ClaudeCode | Client::Cursor | Client::Vscode)
    }

    /// The one server entry that points this client at the gateway's `url`.
    pub fn gateway_entry(self, url: &str) -> Value {
        match self {
            // Its configuration file runs local servers only: a bridge speaks to the URL.
            Client::ClaudeDesktop => json!({"command": "npx", "args": ["-y", "mcp-remote", url]}),
            Client::ClaudeCode | Client::Vscode => json!({"type": "http", "url": url}),
            Client::Cursor | Client::Zed => json!({"url": url}),
            Client::Windsurf => json!({"serverUrl": url}),
        }
    }
}
