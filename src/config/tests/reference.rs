//! `conf/switchyard.toml` is the configuration reference and the schema (`config::schema`) is
//! what the parser accepts: every key of the one is in the other. The file's commented-out
//! settings (`# key = value`, `# [table]`) are read as set, each where it stands; a block of
//! them after a `# alternative:` line is read in a variant of its own, in place of the block
//! before the line (see the head of the file).

use std::path::Path;

use serde_json::Value;

use super::keys::{Step, keys, path};
use crate::config::{parse::parse_toml, schema};

const REFERENCE: &str = include_str!("../../../conf/switchyard.toml");

/// What a line of the reference file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Line {
    /// A setting or table header in effect.
    Active,
    /// Blank: ends a block of commented settings.
    Blank,
    /// A comment in words.
    Prose,
    /// `# key = value` or `# [table]`: a setting shown, not in effect.
    Setting,
    /// `# alternative: …`: what follows replaces the block of settings before it.
    Alternative,
}

fn classify(line: &str) -> Line {
    let trimmed = line.trim();
    if trimmed.is_empty() {
        return Line::Blank;
    }
    let Some(comment) = trimmed.strip_prefix('#') else {
        return Line::Active;
    };
    if comment.starts_with(" alternative:") {
        return Line::Alternative;
    }
    match comment.strip_prefix(' ') {
        Some(code) if !code.starts_with([' ', '#']) && code.parse::<toml::Table>().is_ok() => {
            Line::Setting
        }
        _ => Line::Prose,
    }
}

/// Commented settings that exclude each other: `base` (line indexes) and its alternatives.
#[derive(Debug, Default)]
struct Group {
    base: Vec<usize>,
    alternatives: Vec<Vec<usize>>,
}

/// The reference with its commented settings in effect: one text per variant (the first
/// with every group's base block, the n-th with every group's n-th alternative where it has
/// one), each line numbered as in the file.
fn variants(text: &str) -> Vec<String> {
    let kinds: Vec<Line> = text.lines().map(classify).collect();
    let mut groups: Vec<Group> = Vec::new();
    let mut block: Vec<usize> = Vec::new();
    let mut in_alternative = false;
    for (i, kind) in kinds.iter().enumerate() {
        match kind {
            Line::Active | Line::Blank => {
                block.clear();
                in_alternative = false;
            }
            Line::Prose => {}
            Line::Setting if in_alternative => groups
                .last_mut()
                .unwrap()
                .alternatives
                .last_mut()
                .unwrap()
                .push(i),
            Line::Setting => block.push(i),
            Line::Alternative => {
                if !in_alternative {
                    groups.push(Group {
                        base: std::mem::take(&mut block),
                        ..Group::default()
                    });
                }
                groups.last_mut().unwrap().alternatives.push(Vec::new());
                in_alternative = true;
            }
        }
    }
    let count = 1 + groups
        .iter()
        .map(|g| g.alternatives.len())
        .max()
        .unwrap_or(0);
    (0..count)
        .map(|variant| {
            let mut on: Vec<bool> = kinds.iter().map(|k| *k == Line::Setting).collect();
            for group in &groups {
                let chosen = match variant {
                    0 => &group.base,
                    n => group.alternatives.get(n - 1).unwrap_or(&group.base),
                };
                for line in group.base.iter().chain(group.alternatives.iter().flatten()) {
                    on[*line] = chosen.contains(line);
                }
            }
            text.lines()
                .zip(on)
                .map(|(line, on)| match on {
                    true => &line.trim_start()[2..],
                    false => line,
                })
                .collect::<Vec<_>>()
                .join("\n")
        })
        .collect()
}

/// The values at `steps` in `table`, through every name of a map and element of an array.
fn values_at<'a>(table: &'a toml::Value, steps: &[Step]) -> Vec<&'a toml::Value> {
    let mut values = vec![table];
    for step in steps {
        values = values
            .into_iter()
            .flat_map(|value| -> Vec<&toml::Value> {
                match (step, value) {
                    (Step::Key(key), toml::Value::Table(table)) => {
                        table.get(key).into_iter().collect()
                    }
                    (Step::Name, toml::Value::Table(table)) => table.values().collect(),
                    (Step::Element, toml::Value::Array(items)) => items.iter().collect(),
                    _ => Vec::new(),
                }
            })
            .collect();
    }
    values
}

fn parsed_variants() -> Vec<toml::Value> {
    variants(REFERENCE)
        .iter()
        .enumerate()
        .map(|(n, text)| match text.parse::<toml::Table>() {
            Ok(table) => toml::Value::Table(table),
            Err(error) => panic!("variant {n} of conf/switchyard.toml is not TOML: {error}"),
        })
        .collect()
}

#[test]
fn the_reference_file_shows_every_key_of_the_schema() {
    let schema = schema();
    let variants = parsed_variants();
    let missing: Vec<String> = keys(&schema)
        .iter()
        .filter(|key| {
            !variants
                .iter()
                .any(|variant| !values_at(variant, &key.steps).is_empty())
        })
        .map(|key| key.path())
        .collect();
    assert!(
        missing.is_empty(),
        "conf/switchyard.toml shows no `key = value` (set or as `# key = value`) for:\n  {}",
        missing.join("\n  ")
    );
}

#[test]
fn every_key_the_reference_file_shows_is_accepted() {
    for (n, text) in variants(REFERENCE).iter().enumerate() {
        let problems = match parse_toml(text) {
            Ok(parsed) => parsed.problems,
            Err(problems) => problems,
        };
        let problems: Vec<String> = problems.iter().map(ToString::to_string).collect();
        assert!(
            problems.is_empty(),
            "conf/switchyard.toml with its commented settings in effect (variant {n}):\n  {}",
            problems.join("\n  ")
        );
    }
}

#[test]
fn the_reference_file_as_shipped_loads() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("conf/switchyard.toml");
    if let Err(error) = super::load(path.to_str().unwrap(), REFERENCE) {
        panic!("{error}");
    }
}

#[test]
fn the_variants_read_alternatives_in_place_of_their_base() {
    let text = "[a]\nx = 1\n# y = 2\n\n# [b]\n# kind = \"one\"\n# alternative: two\n# [b]\n\
                # kind = \"two\"\n# Words, not a setting.\n# alternative: three\n# [b]\n# kind = \"three\"\n";
    let kinds: Vec<String> = variants(text)
        .iter()
        .map(|variant| {
            let table: toml::Table = variant.parse().unwrap();
            assert_eq!(table["a"]["y"].as_integer(), Some(2));
            table["b"]["kind"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(kinds, ["one", "two", "three"]);
    let doc: toml::Value =
        toml::Value::Table("[u.x]\nk = 1\n[u.y]\nj = 2\n[[q]]\nn = 1".parse().unwrap());
    let found = |steps: &[Step]| values_at(&doc, steps).len();
    assert_eq!(
        found(&[Step::Key("u".into()), Step::Name, Step::Key("j".into())]),
        1
    );
    assert_eq!(
        found(&[Step::Key("q".into()), Step::Element, Step::Key("n".into())]),
        1
    );
    assert_eq!(found(&[Step::Key("u".into()), Step::Key("k".into())]), 0);
    assert_eq!(
        path(&[Step::Key("q".into()), Step::Element, Step::Key("n".into())]),
        "q[].n"
    );
}

/// The schema accepts the reference file with its commented settings in effect (so each
/// example fits the ranges, values and patterns the schema gives), and every default it
/// states.
#[test]
fn the_schema_accepts_the_reference_file_and_its_own_defaults() {
    let schema = schema();
    let validator = jsonschema::validator_for(&schema).unwrap();
    for (n, variant) in parsed_variants().iter().enumerate() {
        let instance = serde_json::to_value(variant).unwrap();
        let errors: Vec<String> = validator
            .iter_errors(&instance)
            .map(|error| format!("{}: {error}", error.instance_path()))
            .collect();
        assert!(errors.is_empty(), "variant {n}:\n  {}", errors.join("\n  "));
    }
    for key in keys(&schema) {
        let Some(default) = key.schema.get("default") else {
            continue;
        };
        let own = jsonschema::validator_for(key.schema).unwrap();
        assert!(
            own.is_valid(default),
            "{}: default {default} does not fit",
            key.path()
        );
    }
}

/// The schema names the keys a configuration is read with, and the types `load` takes.
#[test]
fn the_schema_describes_the_file() {
    let schema = schema();
    assert_eq!(
        schema["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
    let paths: Vec<String> = keys(&schema).iter().map(|key| key.path()).collect();
    for expected in [
        "server.listen",
        "upstreams.NAME.transport",
        "upstreams.NAME.tool_cache.NAME.seconds",
        "endpoints.NAME.tools.NAME.name",
        "quota[].who.groups",
        "auth.api_keys.NAME.sha256",
    ] {
        assert!(
            paths.iter().any(|p| p == expected),
            "{expected} not in {paths:?}"
        );
    }
    let upstream = &schema["$defs"]["Upstream"]["properties"];
    assert_eq!(
        upstream["transport"]["enum"],
        serde_json::json!(["stdio", "streamable_http", "sse", "auto"])
    );
    assert_eq!(upstream["connect_timeout_seconds"]["type"], "number");
    assert_eq!(
        schema["$defs"]["Server"]["additionalProperties"],
        Value::Bool(false)
    );
    assert!(!serde_json::to_string(&schema).unwrap().contains("\"null\""));
}
