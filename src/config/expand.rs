//! Placeholder expansion in configuration values: `${env:NAME}`, `${env:NAME:-default}`,
//! `${file:PATH}` (a secret file's contents, without its final line break; a relative path is
//! read from the configuration's directory) and `${switchyard}` (this executable), with `$${`
//! for a literal `${`. `${NAME}` and `${NAME:-default}` (as Claude Code writes them) mean the
//! same as with `env:`.
//!
//! Expansion happens once, at load time, so secrets can stay in the environment instead of the
//! file. An unset variable without a default is an error, never an empty string.

use std::path::Path;

/// Where placeholder values come from: the process environment in production, a map in tests.
pub trait Vars {
    fn env(&self, name: &str) -> Option<String>;
    /// The path of the running Switchyard executable, for `${switchyard}`.
    fn self_exe(&self) -> Option<String>;
}

/// The real process environment.
pub struct ProcessVars;

impl Vars for ProcessVars {
    fn env(&self, name: &str) -> Option<String> {
        std::env::var(name).ok()
    }

    fn self_exe(&self) -> Option<String> {
        std::env::current_exe()
            .ok()
            .as_deref()
            .and_then(Path::to_str)
            .map(str::to_owned)
    }
}

/// Expands every placeholder in `value`, reading relative `${file:…}` paths from `base`; the
/// error says which placeholder failed and why.
pub fn expand_at(value: &str, vars: &dyn Vars, base: &Path) -> Result<String, String> {
    if !value.contains('$') {
        return Ok(value.to_owned());
    }
    let mut out = String::with_capacity(value.len());
    for piece in pieces(value) {
        match piece {
            Piece::Text(text) => out.push_str(text),
            Piece::Placeholder(placeholder) => out.push_str(&resolve(placeholder, vars, base)?),
            Piece::Unterminated(after) => {
                return Err(format!("unterminated placeholder `${{{after}`"));
            }
        }
    }
    Ok(out)
}

/// A part of a configuration value: text as it reads (`$${` already made `${`), or the inside
/// of a `${…}` placeholder, or what follows a `${` that is never closed.
enum Piece<'a> {
    Text(&'a str),
    Placeholder(&'a str),
    Unterminated(&'a str),
}

/// The pieces of `value`, in order.
fn pieces(value: &str) -> impl Iterator<Item = Piece<'_>> {
    let mut rest = value;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let Some(pos) = rest.find('$') else {
            return Some(Piece::Text(std::mem::take(&mut rest)));
        };
        if pos > 0 {
            let (text, tail) = rest.split_at(pos);
            rest = tail;
            return Some(Piece::Text(text));
        }
        if let Some(after) = rest.strip_prefix("$${") {
            rest = after;
            return Some(Piece::Text("${"));
        }
        let Some(after) = rest.strip_prefix("${") else {
            rest = &rest[1..];
            return Some(Piece::Text("$"));
        };
        match after.find('}') {
            Some(end) => {
                rest = &after[end + 1..];
                Some(Piece::Placeholder(&after[..end]))
            }
            None => {
                rest = "";
                Some(Piece::Unterminated(after))
            }
        }
    })
}

/// Whether `value` holds a placeholder that reads the gateway's host: its environment, a
/// file, or its own path (anything but `${claim:…}`, which is the caller's, and `$${`).
pub fn reads_host(value: &str) -> bool {
    pieces(value).any(|piece| match piece {
        Piece::Text(_) => false,
        Piece::Placeholder(inside) | Piece::Unterminated(inside) => !inside.starts_with("claim:"),
    })
}

fn is_variable_name(name: &str) -> bool {
    !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn is_conventional_variable(name: &str) -> bool {
    is_variable_name(name)
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| !c.is_ascii_lowercase())
}

fn resolve(placeholder: &str, vars: &dyn Vars, base: &Path) -> Result<String, String> {
    if let Some(path) = placeholder.strip_prefix("file:") {
        let path = base.join(path);
        let text = std::fs::read_to_string(&path)
            .map_err(|error| format!("cannot read {}: {error}", path.display()))?;
        return Ok(text.trim_end_matches(['\n', '\r']).to_owned());
    }
    if placeholder == "switchyard" {
        return vars
            .self_exe()
            .ok_or_else(|| "cannot determine the path of the switchyard executable".into());
    }
    let spec = match placeholder.strip_prefix("env:") {
        Some(spec) => spec,
        // Only names written as environment variables are (`${HOME}`, not VS Code's
        // `${workspaceFolder}`), so that other tools' placeholders get a clear error.
        None if is_conventional_variable(placeholder.split(":-").next().unwrap_or_default()) => {
            placeholder
        }
        None => {
            return Err(format!(
                "unsupported placeholder `${{{placeholder}}}`; use `${{env:NAME}}`, \
                 `${{env:NAME:-default}}`, `${{file:PATH}}` or `${{switchyard}}` (write `$${{` for a literal `${{`)"
            ));
        }
    };
    let (name, default) = match spec.split_once(":-") {
        Some((name, default)) => (name, Some(default)),
        None => (spec, None),
    };
    if !is_variable_name(name) {
        return Err(format!("`{name}` is not a valid environment variable name"));
    }
    match (vars.env(name), default) {
        (Some(value), _) => Ok(value),
        (None, Some(default)) => Ok(default.to_owned()),
        (None, None) => Err(format!("environment variable `{name}` is not set")),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn tells_placeholders_that_read_the_host() {
        for reads in [
            "${env:HOME}",
            "${HOME}",
            "x ${file:/etc/passwd}",
            "${switchyard}",
            "$${ ${env:A}",
        ] {
            assert!(reads_host(reads), "{reads}");
        }
        for plain in ["plain", "${claim:sub}", "$${env:HOME}", "$5", "a $ b"] {
            assert!(!reads_host(plain), "{plain}");
        }
    }

    fn expand(value: &str, vars: &dyn Vars) -> Result<String, String> {
        expand_at(value, vars, Path::new(""))
    }

    #[test]
    fn secret_files_are_read_from_the_configurations_directory() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("token"), "s3cret\n").unwrap();
        let v = MapVars(HashMap::new());
        assert_eq!(
            expand_at("Bearer ${file:token}", &v, dir.path()).unwrap(),
            "Bearer s3cret"
        );
        let missing = expand_at("${file:nope}", &v, dir.path()).unwrap_err();
        assert!(
            missing.starts_with("cannot read ") && missing.contains("nope"),
            "{missing}"
        );
    }

    /// Fixed variables for tests.
    pub(crate) struct MapVars(pub HashMap<&'static str, &'static str>);

    impl Vars for MapVars {
        fn env(&self, name: &str) -> Option<String> {
            self.0.get(name).map(|v| (*v).to_owned())
        }
        fn self_exe(&self) -> Option<String> {
            Some("/opt/switchyard/bin/switchyard".into())
        }
    }

    fn vars() -> MapVars {
        MapVars(HashMap::from([("TOKEN", "s3cret"), ("EMPTY", "")]))
    }

    #[test]
    fn expands_env_and_defaults() {
        let v = vars();
        assert_eq!(expand("Bearer ${env:TOKEN}", &v).unwrap(), "Bearer s3cret");
        assert_eq!(expand("${env:MISSING:-fallback}", &v).unwrap(), "fallback");
        assert_eq!(expand("${env:EMPTY:-fallback}", &v).unwrap(), "");
        assert_eq!(
            expand("a${env:TOKEN}b${env:TOKEN}", &v).unwrap(),
            "as3cretbs3cret"
        );
        assert_eq!(
            expand("${switchyard}", &v).unwrap(),
            "/opt/switchyard/bin/switchyard"
        );
        // As Claude Code writes them.
        assert_eq!(expand("Bearer ${TOKEN}", &v).unwrap(), "Bearer s3cret");
        assert_eq!(expand("${MISSING:-fallback}", &v).unwrap(), "fallback");
        assert!(
            expand("${MISSING}", &v)
                .unwrap_err()
                .contains("`MISSING` is not set")
        );
    }

    #[test]
    fn leaves_plain_dollars_and_escapes() {
        let v = vars();
        assert_eq!(expand("cost: $5", &v).unwrap(), "cost: $5");
        assert_eq!(expand("$${env:TOKEN}", &v).unwrap(), "${env:TOKEN}");
        assert_eq!(expand("trailing $", &v).unwrap(), "trailing $");
    }

    #[test]
    fn reports_what_failed() {
        let v = vars();
        assert!(
            expand("${env:MISSING}", &v)
                .unwrap_err()
                .contains("`MISSING` is not set")
        );
        assert!(
            expand("${workspaceFolder}", &v)
                .unwrap_err()
                .contains("unsupported placeholder `${workspaceFolder}`")
        );
        assert!(
            expand("${env:TOKEN", &v)
                .unwrap_err()
                .contains("unterminated")
        );
        assert!(
            expand("${env:BAD-NAME}", &v)
                .unwrap_err()
                .contains("not a valid")
        );
    }
}
