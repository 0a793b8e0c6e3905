//! Loading a configuration: a file (TOML, or a client's `mcpServers` JSON) and its overlay
//! read, parsed, checked and turned into a `Config`, or every problem found, with the file
//! and key path of each.

use std::{
    fmt,
    path::{Path, PathBuf},
};

use super::{
    Config, Overlay, Overrides, ProcessVars, Vars, mcp_json, overlay_path, parse, validate,
};
use crate::text::printable;

/// Why a configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{}: cannot read the file: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}", format_problems(path, problems))]
    Invalid {
        path: PathBuf,
        problems: Vec<Problem>,
    },
}

impl ConfigError {
    /// Every problem as one line with its file: `FILE: KEY: MESSAGE`.
    pub fn problem_lines(&self) -> Vec<String> {
        match self {
            ConfigError::Invalid { path, problems } => problems
                .iter()
                .map(|problem| format!("{}: {problem}", path.display()))
                .collect(),
            other => vec![other.to_string()],
        }
    }
}

/// One thing wrong with a configuration, located by its key path (`upstreams.github.url`) or,
/// for syntax errors, by line and column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub key: String,
    pub message: String,
}

/// Shown with what could disguise it escaped: keys and values quoted in a message come from
/// the file, and a key may hold any character (`"\u001b[2J" = 1`).
impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let message = printable(&self.message);
        if self.key.is_empty() {
            f.write_str(&message)
        } else {
            write!(f, "{}: {message}", printable(&self.key))
        }
    }
}

fn format_problems(path: &Path, problems: &[Problem]) -> String {
    let mut out = format!(
        "{}: {} problem{} in the configuration:",
        path.display(),
        problems.len(),
        if problems.len() == 1 { "" } else { "s" }
    );
    for problem in problems {
        out.push_str("\n  - ");
        out.push_str(&problem.to_string());
    }
    out
}

/// The two accepted file formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Toml,
    McpJson,
}

impl Format {
    /// By extension when it is telling, else by the first non-blank character.
    fn detect(path: &Path, text: &str) -> Self {
        match path.extension().and_then(|e| e.to_str()) {
            Some(ext) if ext.eq_ignore_ascii_case("toml") => Self::Toml,
            Some(ext) if ext.eq_ignore_ascii_case("json") => Self::McpJson,
            _ if text.trim_start().starts_with('{') => Self::McpJson,
            _ => Self::Toml,
        }
    }
}

/// Loads and validates `path`, expanding placeholders from the process environment.
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    load_with(path, &ProcessVars)
}

/// Loads and validates `path` with the command line's `overrides` in place of its settings.
pub fn load_overridden(path: &Path, overrides: &Overrides) -> Result<Config, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_owned(),
        source,
    })?;
    from_text(path, &text, None, &ProcessVars, overrides).map_err(|e| overrides.annotate(e))
}

/// Loads and validates `path` merged with its overlay, taking placeholder values from `vars`.
pub fn load_with(path: &Path, vars: &dyn Vars) -> Result<Config, ConfigError> {
    load_overlaid(path, None, vars)
}

/// Loads and validates `path` merged with `overlay`, or with its overlay file if `None` (the
/// admin API checks an overlay this way before writing it).
pub fn load_overlaid(
    path: &Path,
    overlay: Option<&Overlay>,
    vars: &dyn Vars,
) -> Result<Config, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_owned(),
        source,
    })?;
    from_text(path, &text, overlay, vars, &Overrides::default())
}

/// Validates configuration `text` as if it had been read from `path`, with no overlay.
pub fn parse_str(path: &Path, text: &str, vars: &dyn Vars) -> Result<Config, ConfigError> {
    from_text(
        path,
        text,
        Some(&Overlay::default()),
        vars,
        &Overrides::default(),
    )
}

/// Parses `text` (read from `path`), merges `overlay` into it (or, if `None`, the overlay
/// file it names) and validates both.
fn from_text(
    path: &Path,
    text: &str,
    overlay: Option<&Overlay>,
    vars: &dyn Vars,
    overrides: &Overrides,
) -> Result<Config, ConfigError> {
    let mut parsed = match Format::detect(path, text) {
        Format::Toml => parse::parse_toml(text),
        Format::McpJson => mcp_json::parse(text),
    }
    .map_err(|problems| ConfigError::Invalid {
        path: path.to_owned(),
        problems,
    })?;
    overrides.apply(&mut parsed.raw);
    let at = overlay_path(path, parsed.raw.admin.overlay_file.as_deref());
    let raw = match overlay {
        Some(overlay) => overlay.raw(&at),
        None => Overlay::read(&at)?.raw(&at),
    };
    validate::validate(parsed, path, raw, vars)
}
