//! `--connect CLIENT`: the client's user files keep one server, the gateway, with the file as
//! it was kept beside it (`FILE.switchyard-backup`); `--undo CLIENT` puts that back, byte for
//! byte.

use std::{
    fs,
    path::{Path, PathBuf},
};

use anyhow::{Context as _, bail};
use serde_json::Map;

use super::{
    clients::{Client, Scope},
    read_document,
};

/// The name of the one server a connected client keeps.
pub const GATEWAY_SERVER: &str = "switchyard";

/// The backup of `path`.
pub fn backup_of(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".switchyard-backup");
    PathBuf::from(name)
}

/// Rewrites `client`'s user files under `home` to use only the gateway at `url`; the files
/// rewritten.
pub fn connect(client: Client, home: &Path, url: &str) -> anyhow::Result<Vec<PathBuf>> {
    let files: Vec<PathBuf> = client
        .locations(home, None)
        .into_iter()
        .filter(|location| location.scope == Scope::User && location.path.is_file())
        .map(|location| location.path)
        .collect();
    if files.is_empty() {
        bail!(
            "no configuration file of {} under {}",
            client.label(),
            home.display()
        );
    }
    // Every file is checked before any is changed.
    let mut rewritten = Vec::with_capacity(files.len());
    for path in &files {
        let backup = backup_of(path);
        if backup.exists() {
            bail!(
                "{} exists: {} was connected already (`--undo {}` first)",
                backup.display(),
                client.label(),
                super::client_name(client)
            );
        }
        let original = fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
        let mut document = read_document(path, &original)?;
        let entry = client.gateway_entry(url);
        let places = client.places(path, &document);
        let mut first = true;
        for place in places {
            // The gateway in the first place (the user's servers), nothing in the others.
            let Some(servers) = place.find_mut(&mut document) else {
                bail!(
                    "{}: `{}` is not an object",
                    path.display(),
                    place.describe()
                );
            };
            *servers = Map::new();
            if first {
                servers.insert(GATEWAY_SERVER.into(), entry.clone());
                first = false;
            }
        }
        let mut text = serde_json::to_string_pretty(&document)?;
        text.push('\n');
        rewritten.push((path.clone(), backup, original, text));
    }
    let mut done = Vec::with_capacity(rewritten.len());
    for (path, backup, original, text) in rewritten {
        fs::write(&backup, &original)
            .with_context(|| format!("cannot write the backup {}", backup.display()))?;
        copy_permissions(&path, &backup);
        fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
        done.push(path);
    }
    Ok(done)
}

/// Puts `client`'s user files under `home` back from their backups; the files restored.
pub fn undo(client: Client, home: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut restored = Vec::new();
    for location in client.locations(home, None) {
        let backup = backup_of(&location.path);
        if backup.is_file() {
            fs::rename(&backup, &location.path).with_context(|| {
                format!(
                    "cannot put {} back from {}",
                    location.path.display(),
                    backup.display()
                )
            })?;
            restored.push(location.path);
        }
    }
    if restored.is_empty() {
        bail!(
            "no backup of {}'s configuration under {} (was it connected?)",
            client.label(),
            home.display()
        );
    }
    Ok(restored)
}

/// Gives `to` the permissions of `from` (a backup is as private as its file).
fn copy_permissions(from: &Path, to: &Path) {
    if let Ok(metadata) = fs::metadata(from) {
        let _ = fs::set_permissions(to, metadata.permissions());
    }
}
