//! Every server found, once: the same server in several files is one upstream, names are made
//! valid upstream names (and told apart where two servers share one).

use std::path::{Path, PathBuf};

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
