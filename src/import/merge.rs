//! Every server found, once: the same server in several files is one upstream, names are made
//! valid upstream names (and told apart where two servers share one), and the whole is written
//! as Switchyard TOML, each upstream with a comment saying where it came from.

use std::{
    collections::BTreeMap,
    fmt::Write as _,
    path::{Path, PathBuf},
};

use super::{clients::Client, servers::Spec};
use crate::names::{MAX_UPSTREAM_NAME_LEN, suggest_upstream_name, validate_upstream_name};

/// Where a server was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    pub client: Client,
    pub path: PathBuf,
    /// The name the client gives it.
    pub name: String,
}

/// One server as a client has it.
#[derive(Debug, Clone)]
pub struct Found {
    pub source: Source,
    pub spec: Spec,
    pub notes: Vec<String>,
}

/// One upstream of the written configuration.
#[derive(Debug, Clone)]
pub struct Upstream {
    pub name: String,
    pub spec: Spec,
    pub sources: Vec<Source>,
    pub notes: Vec<String>,
}

/// The servers `found`, each once, in the order first found, named validly and uniquely.
pub fn merge(found: Vec<Found>) -> Vec<Upstream> {
    let mut upstreams: Vec<Upstream> = Vec::new();
    for server in found {
        if let Some(same) = upstreams
            .iter_mut()
            .find(|u| u.spec.same_server(&server.spec))
        {
            // A client that named the transport knows better than one that did not.
            if let (
                Spec::Remote {
                    transport: kept @ None,
                    ..
                },
                Spec::Remote {
                    transport: Some(named),
                    ..
                },
            ) = (&mut same.spec, &server.spec)
            {
                *kept = Some(named);
            }
            same.sources.push(server.source);
            for note in server.notes {
                if !same.notes.contains(&note) {
                    same.notes.push(note);
                }
            }
            continue;
        }
        let base = valid_name(&server.source.name);
        let mut name = base.clone();
        let mut n = 2;
        while upstreams.iter().any(|u| u.name == name) {
            let suffix = format!("-{n}");
            let room = MAX_UPSTREAM_NAME_LEN - suffix.len();
            name = format!("{}{suffix}", &base[..base.len().min(room)]);
            n += 1;
        }
        upstreams.push(Upstream {
            name,
            spec: server.spec,
            sources: vec![server.source],
            notes: server.notes,
        });
    }
    upstreams
}

/// `name` as an upstream name: itself if valid, else lowercase letters, digits and `-`,
/// starting with a letter, at most `MAX_UPSTREAM_NAME_LEN` long.
fn valid_name(name: &str) -> String {
    if validate_upstream_name(name).is_ok() {
        return name.to_owned();
    }
    let mut made = suggest_upstream_name(name);
    made.truncate(MAX_UPSTREAM_NAME_LEN);
    let made = made.trim_end_matches('-').to_owned();
    if validate_upstream_name(&made).is_ok() {
        made
    } else {
        "server".to_owned()
    }
}

/// `path` with the home directory written `~`.
pub fn shown_path(path: &Path, home: &Path) -> String {
    match path.strip_prefix(home) {
        Ok(rest) => format!("~/{}", rest.display()),
        Err(_) => path.display().to_string(),
    }
}

/// The configuration: a header, then each upstream's table.
pub fn render(upstreams: &[Upstream], home: &Path) -> String {
    let mut out = String::from(
        "# Written by `switchyard import` from the MCP clients' configurations found on this\n\
         # machine. It may hold their secrets: keep it private (or move them to ${env:NAME}).\n\
         # Check it with `switchyard check -c FILE`, run it with `switchyard -c FILE`.\n",
    );
    for upstream in upstreams {
        out.push('\n');
        let from: Vec<String> = upstream
            .sources
            .iter()
            .map(|source| {
                let named = if source.name == upstream.name {
                    String::new()
                } else {
                    format!(" as `{}`", source.name)
                };
                format!(
                    "{} ({}){named}",
                    source.client.label(),
                    shown_path(&source.path, home)
                )
            })
            .collect();
        let _ = writeln!(out, "# From {}.", from.join(", "));
        for note in &upstream.notes {
            let _ = writeln!(out, "# Note: {note}.");
        }
        let mut table = toml::Table::new();
        match &upstream.spec {
            Spec::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                table.insert("command".into(), command.clone().into());
                if !args.is_empty() {
                    table.insert("args".into(), args.clone().into());
                }
                if let Some(cwd) = cwd {
                    table.insert("cwd".into(), cwd.clone().into());
                }
                if !env.is_empty() {
                    table.insert("env".into(), string_table(env).into());
                }
            }
            Spec::Remote {
                url,
                transport,
                headers,
            } => {
                if let Some(transport) = transport {
                    table.insert("transport".into(), (*transport).into());
                }
                table.insert("url".into(), url.clone().into());
                if !headers.is_empty() {
                    table.insert("headers".into(), string_table(headers).into());
                }
            }
        }
        let mut document = toml::Table::new();
        let mut upstreams = toml::Table::new();
        upstreams.insert(upstream.name.clone(), table.into());
        document.insert("upstreams".into(), upstreams.into());
        out.push_str(&toml::to_string(&document).expect("a table of strings serializes"));
    }
    out
}

fn string_table(entries: &BTreeMap<String, String>) -> toml::Table {
    entries
        .iter()
        .map(|(name, value)| (name.clone(), toml::Value::String(value.clone())))
        .collect()
}
