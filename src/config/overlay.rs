//! The overlay: upstreams added and removed through the admin API, kept in a TOML file next to
//! the configuration file so that they survive a restart.
//!
//! It holds `[upstreams.NAME]` tables written exactly as in the configuration file (placeholders
//! unexpanded), and `removed`, the names of the file's upstreams taken out at runtime. Every
//! load merges it into the file's upstreams, and the same validator checks both; its problems
//! are reported with the overlay's own path.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::{
    ConfigError, Problem, keys::Entries, parse::deserialize_collecting, upstream::RawUpstream,
};

/// The first lines of a written overlay.
const HEADER: &str = "\
# Upstreams added (`[upstreams.NAME]`) and removed (`removed`) through Switchyard's admin API.
# Merged into the configuration file on every load, and watched like it. The same keys as in
# the configuration file's [upstreams.NAME] tables apply.
";

/// The overlay as written, kept as TOML so that what was given is what is stored.
#[derive(Debug, Clone, Default)]
pub struct Overlay {
    document: toml::Table,
}

/// The overlay checked against the raw upstream form, ready to merge.
pub(super) struct RawOverlay {
    pub path: PathBuf,
    pub upstreams: Entries<RawUpstream>,
    pub removed: Vec<String>,
    pub disabled: Vec<String>,
    pub problems: Vec<Problem>,
}

#[derive(Deserialize)]
struct OverlayFile {
    #[serde(default)]
    upstreams: Entries<RawUpstream>,
    #[serde(default)]
    removed: Vec<String>,
    /// Upstreams (of the file or added here) switched off through the admin API.
    #[serde(default)]
    disabled: Vec<String>,
}

/// Where the overlay of the configuration file `config` lives: `given` (`admin.overlay_file`,
/// relative to the file's directory), or `NAME.overlay.toml` beside `NAME.toml`/`NAME.json`.
pub fn overlay_path(config: &Path, given: Option<&str>) -> PathBuf {
    let dir = config.parent().unwrap_or(Path::new(""));
    match given {
        Some(given) => dir.join(given),
        None => {
            let stem = config
                .file_stem()
                .map_or_else(|| "switchyard".into(), |s| s.to_string_lossy());
            dir.join(format!("{stem}.overlay.toml"))
        }
    }
}

/// The key of `entry` (an `[upstreams.NAME]` table) that would run a program on the gateway's
/// host or read its files or environment, if any (see `RawUpstream::privileged_key`). An entry
/// that is not even of the upstream's form has none here; validation refuses it.
pub fn privileged_key(entry: &toml::Table) -> Option<String> {
    RawUpstream::deserialize(toml::Value::Table(entry.clone()))
        .ok()?
        .privileged_key()
}

impl Overlay {
    /// Reads the overlay at `path`; a missing file is an empty overlay.
    pub fn read(path: &Path) -> Result<Self, ConfigError> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Self::default());
            }
            Err(source) => {
                return Err(ConfigError::Read {
                    path: path.to_owned(),
                    source,
                });
            }
        };
        let document =
            super::parse::parse_toml_table(&text).map_err(|problems| ConfigError::Invalid {
                path: path.to_owned(),
                problems,
            })?;
        Ok(Self { document })
    }

    /// Writes the overlay to `path` atomically (a temporary file renamed over it).
    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        let body = toml::to_string_pretty(&self.document).map_err(std::io::Error::other)?;
        let temporary = path.with_extension("toml.tmp");
        std::fs::write(&temporary, format!("{HEADER}\n{body}"))?;
        std::fs::rename(&temporary, path)
    }

    /// Adds upstream `name` as `entry` (its keys as in `[upstreams.NAME]`). If the file's
    /// upstream of that name was removed, it stays removed: this one takes its place.
    pub fn add(&mut self, name: &str, entry: toml::Table) {
        let upstreams = self
            .document
            .entry("upstreams")
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        if let toml::Value::Table(upstreams) = upstreams {
            upstreams.insert(name.to_owned(), toml::Value::Table(entry));
        }
    }

    /// Removes upstream `name`: from the overlay if it was added there, else by listing it as
    /// removed from the configuration file.
    pub fn remove(&mut self, name: &str) {
        if let Some(toml::Value::Table(upstreams)) = self.document.get_mut("upstreams")
            && upstreams.remove(name).is_some()
        {
            if upstreams.is_empty() {
                self.document.remove("upstreams");
            }
            return;
        }
        self.set_removed(name);
    }

    fn set_removed(&mut self, name: &str) {
        self.list("removed", name, true);
    }

    /// Switches upstream `name` off (`false`) or on again (`true`): it stays configured, kept
    /// out of the catalog while off, across restarts.
    pub fn set_enabled(&mut self, name: &str, enabled: bool) {
        self.list("disabled", name, !enabled);
    }

    /// Puts `name` in the list `key` (`listed`), or takes it out; an emptied list goes.
    fn list(&mut self, key: &str, name: &str, listed: bool) {
        let mut names: Vec<toml::Value> = match self.document.remove(key) {
            Some(toml::Value::Array(names)) => names,
            _ => Vec::new(),
        };
        names.retain(|n| n.as_str() != Some(name));
        if listed {
            names.push(toml::Value::String(name.to_owned()));
        }
        if !names.is_empty() {
            self.document.insert(key.into(), toml::Value::Array(names));
        }
    }

    /// The overlay in the raw form, with the problems found reading it (unknown keys, wrong
    /// types), located in `path`.
    pub(super) fn raw(&self, path: &Path) -> RawOverlay {
        let (file, problems) = match deserialize_collecting::<OverlayFile, _>(toml::Value::Table(
            self.document.clone(),
        )) {
            Ok((file, problems)) => (file, problems),
            Err(problems) => (
                OverlayFile {
                    upstreams: Entries::default(),
                    removed: Vec::new(),
                    disabled: Vec::new(),
                },
                problems,
            ),
        };
        RawOverlay {
            path: path.to_owned(),
            upstreams: file.upstreams,
            removed: file.removed,
            disabled: file.disabled,
            problems,
        }
    }
}
