//! Parsing: configuration text → the raw form, with unknown keys collected as problems.
//!
//! serde stops at the first type error; everything else (unknown keys anywhere, and all later
//! semantic checks in `validate`) is reported together.

use serde::{Deserialize, Deserializer};

use super::{Problem, keys::key_segment, raw::RawConfig};

/// A parsed file: the raw config, the key under which its upstreams live (`upstreams` in TOML,
/// `mcpServers` or `servers` in JSON) and the problems found while parsing (unknown keys).
pub struct Parsed {
    pub raw: RawConfig,
    pub upstreams_key: &'static str,
    pub problems: Vec<Problem>,
}

/// Parses Switchyard's TOML format.
pub fn parse_toml(text: &str) -> Result<Parsed, Vec<Problem>> {
    let table = parse_toml_table(text)?;
    let (raw, problems) = deserialize_collecting(toml::Value::Table(table))?;
    Ok(Parsed {
        raw,
        upstreams_key: "upstreams",
        problems,
    })
}

/// Parses TOML text into a table, or the syntax error located by line and column.
pub fn parse_toml_table(text: &str) -> Result<toml::Table, Vec<Problem>> {
    text.parse().map_err(|e: toml::de::Error| {
        vec![syntax_problem(text, e.span().map(|s| s.start), e.message())]
    })
}

/// A syntax error located by line and column (both 1-based) of byte `offset` in `text`.
fn syntax_problem(text: &str, offset: Option<usize>, message: &str) -> Problem {
    let key = match offset {
        Some(offset) => {
            let before = &text[..offset.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
            format!("line {line}, column {column}")
        }
        None => String::new(),
    };
    Problem {
        key,
        message: format!("syntax error: {}", message.trim()),
    }
}

/// Deserializes `de` into `T`, reporting unknown keys as problems. A type error stops
/// deserialization (serde cannot go on); it is returned with the unknown keys seen so far.
pub fn deserialize_collecting<'de, T, D>(de: D) -> Result<(T, Vec<Problem>), Vec<Problem>>
where
    T: Deserialize<'de>,
    D: Deserializer<'de>,
{
    let mut problems = Vec::new();
    let mut on_unknown = |path: serde_ignored::Path<'_>| {
        let mut key = String::new();
        ignored_path(&path, &mut key);
        problems.push(Problem {
            key,
            message: "unknown key".into(),
        });
    };
    let result =
        serde_path_to_error::deserialize(serde_ignored::Deserializer::new(de, &mut on_unknown));
    match result {
        Ok(value) => Ok((value, problems)),
        Err(error) => {
            let mut key = String::new();
            for segment in error.path().iter() {
                match segment {
                    serde_path_to_error::Segment::Seq { index } => {
                        key.push_str(&format!("[{index}]"));
                    }
                    serde_path_to_error::Segment::Map { key: name }
                    | serde_path_to_error::Segment::Enum { variant: name } => {
                        push_key(&mut key, name);
                    }
                    _ => {}
                }
            }
            problems.push(Problem {
                key,
                message: error.inner().to_string(),
            });
            Err(problems)
        }
    }
}

/// Writes a `serde_ignored` path as a key path, leaving out the segments serde adds for
/// `Option` and newtypes.
fn ignored_path(path: &serde_ignored::Path<'_>, out: &mut String) {
    use serde_ignored::Path;
    match path {
        Path::Root => {}
        Path::Seq { parent, index } => {
            ignored_path(parent, out);
            out.push_str(&format!("[{index}]"));
        }
        Path::Map { parent, key } => {
            ignored_path(parent, out);
            push_key(out, key);
        }
        Path::Some { parent }
        | Path::NewtypeStruct { parent }
        | Path::NewtypeVariant { parent } => ignored_path(parent, out),
    }
}

fn push_key(out: &mut String, name: &str) {
    if !out.is_empty() {
        out.push('.');
    }
    out.push_str(&key_segment(name));
}
