//! `switchyard import`: finds the MCP servers the clients on this machine are configured with
//! (Claude Desktop, Claude Code, Cursor, VS Code, Windsurf, Zed: their user files on Linux and
//! macOS, and a workspace's), shows them (secrets masked, servers found in several files
//! named once), and writes one Switchyard configuration with every server once, through a TOML
//! writer and read back before it is written (`write`). With
//! `--connect CLIENT` it then points that client at the gateway alone; `--undo CLIENT` puts
//! the client's file back.

mod clients;
mod connect;
mod merge;
mod servers;
mod write;

use std::{
    io::Write as _,
    path::{Path, PathBuf},
};

use anyhow::{Context as _, bail};
use serde_json::Value;

pub use clients::Client;
pub use connect::backup_of;

use self::{
    clients::Location,
    merge::{Found, Source, Upstream, shown_path},
    servers::{Context, Entry},
};
use crate::{config, store::private, text::printable};

/// The gateway's MCP URL on the default configuration.
const DEFAULT_URL: &str = "http://127.0.0.1:8080/mcp";

#[derive(clap::Args, Debug)]
pub struct ImportArgs {
    /// Write the configuration to FILE (readable by its owner only: it may hold the clients'
    /// secrets) instead of standard output.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Replace the output file if it exists.
    #[arg(long)]
    pub force: bool,
    /// The home directory whose clients are read [default: $HOME].
    #[arg(long, value_name = "DIR")]
    pub home: Option<PathBuf>,
    /// A project whose client files (.mcp.json, .cursor/, .vscode/, .zed/) are read too
    /// [default: the current directory].
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Read only this client's files (repeatable).
    #[arg(long = "client", value_name = "CLIENT")]
    pub clients: Vec<Client>,
    /// Then rewrite CLIENT's user configuration to use only the gateway (the file as it was
    /// is kept beside it, as FILE.switchyard-backup).
    #[arg(long, value_name = "CLIENT", requires = "output")]
    pub connect: Option<Client>,
    /// The gateway's MCP URL that --connect gives the client.
    #[arg(long, value_name = "URL", default_value = DEFAULT_URL)]
    pub url: String,
    /// Put CLIENT's configuration back as it was before --connect, from its backup.
    #[arg(long, value_name = "CLIENT", conflicts_with_all = ["connect", "output"])]
    pub undo: Option<Client>,
}

/// Runs `switchyard import`: the report goes to standard error, the configuration to
/// `--output` or standard output.
pub fn run(args: &ImportArgs) -> anyhow::Result<()> {
    let home = match &args.home {
        Some(home) => home.clone(),
        None => std::env::var_os("HOME")
            .map(PathBuf::from)
            .context("HOME is not set: give --home")?,
    };
    if let Some(client) = args.undo {
        for path in connect::undo(client, &home)? {
            eprintln!("restored {}", shown_path(&path, &home));
        }
        return Ok(());
    }
    let workspace = match &args.workspace {
        Some(workspace) => Some(workspace.clone()),
        None => std::env::current_dir().ok(),
    };
    let clients = if args.clients.is_empty() {
        Client::ALL.to_vec()
    } else {
        args.clients.clone()
    };
    let scan = scan(&clients, &home, workspace.as_deref());
    let upstreams = merge::merge(scan.found.clone());
    report(&scan, &upstreams, &home);
    if upstreams.is_empty() {
        bail!("no MCP server found in the clients' configurations");
    }
    let text = write::render(&upstreams, &home);
    write::verify(&upstreams, &text).map_err(|why| {
        anyhow::anyhow!("the configuration made would not hold exactly the servers found: {why}")
    })?;
    match &args.output {
        Some(path) => {
            write_output(path, &text, args.force)?;
            eprintln!(
                "\nwrote {} upstreams to {}",
                upstreams.len(),
                path.display()
            );
            check_output(path, &text);
        }
        None => std::io::stdout().write_all(text.as_bytes())?,
    }
    if let Some(client) = args.connect {
        for path in connect::connect(client, &home, &args.url)? {
            eprintln!(
                "{} now uses only {} ({}; `switchyard import --undo {}` puts it back)",
                shown_path(&path, &home),
                args.url,
                shown_path(&backup_of(&path), &home),
                client_name(client),
            );
        }
    }
    Ok(())
}

/// What the clients' files hold.
pub struct Scan {
    pub found: Vec<Found>,
    /// Files read, with how many servers each gave.
    pub files: Vec<(Client, PathBuf, usize)>,
    /// Entries or files that could not be read, and entries left out.
    pub problems: Vec<String>,
}

/// Reads the files of `clients` under `home` and `workspace`.
pub fn scan(clients: &[Client], home: &Path, workspace: Option<&Path>) -> Scan {
    let mut scan = Scan {
        found: Vec::new(),
        files: Vec::new(),
        problems: Vec::new(),
    };
    for client in clients {
        for location in client.locations(home, workspace) {
            let Ok(bytes) = std::fs::read(&location.path) else {
                continue;
            };
            scan_file(&location, &bytes, home, workspace, &mut scan);
        }
    }
    scan
}

/// Reads the servers of one client's file, `bytes` at `location`, into `scan`.
fn scan_file(
    location: &Location,
    bytes: &[u8],
    home: &Path,
    workspace: Option<&Path>,
    scan: &mut Scan,
) {
    let client = location.client;
    let shown = shown_path(&location.path, home);
    let document = match read_document(&location.path, bytes) {
        Ok(document) => document,
        Err(error) => {
            scan.problems.push(format!("{shown}: {error:#}"));
            return;
        }
    };
    let context = Context {
        client,
        scope: location.scope,
        home,
        workspace,
    };
    let mut count = 0;
    for place in client.places(&location.path, &document) {
        let Some(servers) = place.find(&document) else {
            continue;
        };
        for (name, entry) in servers {
            let shown_name = printable(name);
            match servers::read(entry, &context) {
                Ok(Entry::Server { spec, notes }) => {
                    count += 1;
                    scan.found.push(Found {
                        source: Source {
                            client,
                            path: location.path.clone(),
                            name: name.clone(),
                        },
                        spec,
                        notes,
                    });
                }
                Ok(Entry::Skipped(why)) => {
                    scan.problems
                        .push(format!("{shown}: `{shown_name}` left out: {why}"));
                }
                Err(error) => scan
                    .problems
                    .push(format!("{shown}: `{shown_name}` cannot be read: {error}")),
            }
        }
    }
    scan.files.push((client, location.path.clone(), count));
}

/// What `switchyard import` would write for one client file: `bytes`, read as `client`'s
/// file at `path` under `home`. `Ok(None)` if it names no server; an error if the
/// configuration made would not hold exactly the servers found (never expected: the fuzz
/// target `import` looks for one).
pub fn configuration_of(
    client: Client,
    path: &Path,
    bytes: &[u8],
    home: &Path,
) -> Result<Option<String>, String> {
    let mut scan = Scan {
        found: Vec::new(),
        files: Vec::new(),
        problems: Vec::new(),
    };
    let location = Location {
        client,
        scope: clients::Scope::Workspace,
        path: path.to_owned(),
    };
    scan_file(&location, bytes, home, path.parent(), &mut scan);
    let upstreams = merge::merge(scan.found);
    if upstreams.is_empty() {
        return Ok(None);
    }
    let text = write::render(&upstreams, home);
    write::verify(&upstreams, &text)?;
    Ok(Some(text))
}

/// A client's file: JSON with comments and trailing commas allowed (VS Code and Zed write
/// them), an object at the top.
pub fn read_document(path: &Path, bytes: &[u8]) -> anyhow::Result<Value> {
    let text =
        std::str::from_utf8(bytes).with_context(|| format!("{} is not UTF-8", path.display()))?;
    let options = jsonc_parser::ParseOptions::default();
    let document: Value = if text.trim().is_empty() {
        Value::Object(Default::default())
    } else {
        jsonc_parser::parse_to_serde_value(text, &options)
            .map_err(|error| anyhow::anyhow!("not JSON: {error}"))?
    };
    if !document.is_object() {
        bail!("does not hold a JSON object");
    }
    Ok(document)
}

fn report(scan: &Scan, upstreams: &[Upstream], home: &Path) {
    let mut err = std::io::stderr().lock();
    if scan.files.is_empty() {
        let _ = writeln!(
            err,
            "no MCP client configuration found under {}",
            home.display()
        );
    }
    for (client, path, count) in &scan.files {
        let _ = writeln!(
            err,
            "{}: {} ({count} server{})",
            client.label(),
            shown_path(path, home),
            if *count == 1 { "" } else { "s" }
        );
    }
    if !upstreams.is_empty() {
        let _ = writeln!(err, "\nupstreams:");
    }
    for upstream in upstreams {
        let _ = writeln!(
            err,
            "  {:<20} {}",
            upstream.name,
            printable(&upstream.spec.describe())
        );
        if upstream.sources.len() > 1 {
            let clients: Vec<String> = upstream
                .sources
                .iter()
                .map(|source| {
                    let name = printable(&source.name);
                    format!("{} as `{name}`", source.client.label())
                })
                .collect();
            let _ = writeln!(
                err,
                "  {:<20} the same server in {}",
                "",
                clients.join(", ")
            );
        }
        for note in &upstream.notes {
            let _ = writeln!(err, "  {:<20} note: {}", "", printable(note));
        }
    }
    for problem in &scan.problems {
        let _ = writeln!(err, "warning: {}", printable(problem));
    }
}

fn write_output(path: &Path, text: &str, force: bool) -> anyhow::Result<()> {
    let replace = if force {
        private::Replace::Always
    } else {
        private::Replace::Never
    };
    let written = private::write(path, text.as_bytes(), replace)
        .with_context(|| format!("cannot write {}", path.display()))?;
    if !written {
        bail!("{} exists (--force replaces it)", path.display());
    }
    Ok(())
}

/// Tells what `switchyard check` would of the written file, as the environment is now.
fn check_output(path: &Path, text: &str) {
    match config::parse_str(path, text, &config::ProcessVars) {
        Ok(_) => eprintln!("`switchyard check -c {}` passes", path.display()),
        Err(error) => eprintln!("before it runs: {error}"),
    }
}

fn client_name(client: Client) -> String {
    clap::ValueEnum::to_possible_value(&client)
        .map(|value| value.get_name().to_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests;
