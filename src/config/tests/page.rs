//! `docs/src/configuration.md`, the configuration reference page, is generated from the
//! schema (`config::schema`): a section per table, a row per key with its type, unit and
//! range, default and description. The test fails when the committed page differs;
//! `SWITCHYARD_BLESS=1 cargo test --lib config::tests::page` writes it anew.

use std::{fmt::Write, path::Path};

use serde_json::Value;

use super::keys::{SchemaKey, Step, keys, path, resolve, table_of};
use crate::config::schema;

const PAGE: &str = "docs/src/configuration.md";

const INTRO: &str = "\
<!-- Generated from the configuration's types (src/config/*.rs) by the test
     config::tests::page; do not edit. To regenerate:
     SWITCHYARD_BLESS=1 cargo test --lib config::tests::page -->

# Configuration reference

Switchyard reads one TOML file (`switchyard -c FILE`; `conf/switchyard.toml` by default).
Every table and key is optional, and a key Switchyard does not know is an error.
`switchyard check -c FILE` reports every problem of a file at once, each with its key path,
and exits. `conf/switchyard.toml` shows every key below, with comments, and is tested to.

The same description, as a JSON Schema (draft 2020-12) for editors and other tools:

```sh
switchyard config schema > switchyard.schema.json
```

(With the *Even Better TOML* extension, a first line
`#:schema ./switchyard.schema.json` in the file lets an editor check and complete it.)

**Placeholders.** Where the type says *placeholders*, a value may hold `${env:NAME}`,
`${env:NAME:-default}` (`${NAME}` too, for upper-case names), `${file:PATH}` (a secret
file's contents, relative to the configuration's directory) and `${switchyard}` (the path
of the running executable), read once at load; `$${` writes a literal `${`. An unset
variable without a default is an error. Upstreams' `headers` may also name the user's token
claims, `${claim:NAME}`.

**Names.** `NAME` in a table's name stands for a name of your choosing: the upstream's in
`[upstreams.NAME]`, the key's in `[auth.api_keys.NAME]`, and so on. `[[policy]]` and
`[[quota]]` are arrays of tables: write the header once per rule.
";

/// The page, as generated now.
fn render() -> String {
    let schema = schema();
    let keys = keys(&schema);
    let mut out = String::from(INTRO);
    let mut shown = Vec::new();
    section(&mut out, (&schema, &schema), &[], "", &keys, &mut shown);
    out
}

/// The section of the table at `at` (whose schema is `table`), then those of its tables.
fn section<'a>(
    out: &mut String,
    (root, table): (&'a Value, &'a Value),
    at: &[Step],
    description: &str,
    keys: &[SchemaKey<'a>],
    shown: &mut Vec<(*const Value, String)>,
) {
    let own: Vec<&SchemaKey> = keys
        .iter()
        .filter(|key| key.steps.len() == at.len() + 1 && key.steps.starts_with(at))
        .collect();
    let (leaves, tables): (Vec<&SchemaKey>, Vec<&SchemaKey>) = own
        .into_iter()
        .partition(|key| table_of(root, key.schema).is_none());
    if !at.is_empty() {
        let _ = write!(out, "\n## `{}`\n\n", header(at));
        if !description.is_empty() {
            out.push_str(&paragraph(description));
            out.push_str("\n\n");
        }
        // A table of a type shown before (`who` of `[[policy]]` and `[[quota]]`) points there.
        if let Some((_, first)) = shown.iter().find(|(seen, _)| std::ptr::eq(*seen, table)) {
            let _ = writeln!(out, "The keys of `{first}`, above.");
            return;
        }
        shown.push((table as *const Value, header(at)));
    }
    if !leaves.is_empty() {
        out.push_str("| Key | Type | Default | Description |\n|---|---|---|---|\n");
        for key in &leaves {
            let _ = writeln!(
                out,
                "| `{}`{} | {} | {} | {} |",
                key.name(),
                if key.required { " (required)" } else { "" },
                cell(&kind(root, key.schema, key.name())),
                cell(&default(key.schema)),
                cell(&paragraph(key.description)),
            );
        }
    }
    for key in tables {
        let (step, inner) = table_of(root, key.schema).expect("a table");
        let mut steps = key.steps.clone();
        steps.extend(step);
        section(out, (root, inner), &steps, key.description, keys, shown);
    }
}

/// How a table's header is written: `[upstreams.NAME.oauth]`, `[[quota]]`, `[quota.who]`.
fn header(at: &[Step]) -> String {
    match at.last() {
        Some(Step::Element) => format!("[[{}]]", path(&at[..at.len() - 1])),
        _ => format!("[{}]", path(at).replace("[]", "")),
    }
}

/// A doc comment's lines joined into one paragraph.
fn paragraph(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn cell(text: &str) -> String {
    text.replace('|', "\\|")
}

/// The key's type, with its unit, range, accepted values and whether placeholders expand.
fn kind(root: &Value, schema: &Value, name: &str) -> String {
    let mut text = match schema["type"].as_str() {
        Some("array") => {
            let items = resolve(root, &schema["items"]);
            format!("array of {}", plural(&kind(root, items, "")))
        }
        Some("object") => {
            let values = resolve(root, &schema["additionalProperties"]);
            format!("table of `NAME = {}`", kind(root, values, ""))
        }
        Some(other) => other.to_owned(),
        None if schema.get("anyOf").is_some() => (schema["anyOf"].as_array().into_iter().flatten())
            .map(|alternative| kind(root, resolve(root, alternative), ""))
            .collect::<Vec<_>>()
            .join(" or "),
        None => "any".to_owned(),
    };
    if let Some(values) = schema["enum"].as_array() {
        let values: Vec<String> = values.iter().map(|v| format!("`{v}`")).collect();
        text = values.join(", ");
    }
    let unit = [
        ("_seconds", "seconds"),
        ("_ms", "milliseconds"),
        ("_bytes", "bytes"),
    ]
    .iter()
    .find(|(suffix, _)| name.ends_with(suffix))
    .map(|(_, unit)| *unit);
    let mut notes: Vec<String> = unit.map(str::to_owned).into_iter().collect();
    notes.extend(range(schema));
    if let Some(pattern) = schema["pattern"].as_str() {
        notes.push(format!("matching `{pattern}`"));
    }
    if schema["x-placeholders"] == Value::Bool(true) {
        notes.push("placeholders".to_owned());
    }
    if notes.is_empty() {
        text
    } else {
        format!("{text} ({})", notes.join(", "))
    }
}

fn plural(kind: &str) -> String {
    match kind.split_once(' ') {
        Some((first, rest)) if !first.starts_with('`') => format!("{first}s {rest}"),
        None if !kind.starts_with('`') => format!("{kind}s"),
        _ => kind.to_owned(),
    }
}

/// `1 to 10000`, `above 0`, `at most 300`.
fn range(schema: &Value) -> Option<String> {
    let bound = |key: &str| schema.get(key).map(number);
    let low = bound("minimum")
        .map(|n| (n, false))
        .or(bound("exclusiveMinimum").map(|n| (n, true)));
    let high = bound("maximum")
        .map(|n| (n, false))
        .or(bound("exclusiveMaximum").map(|n| (n, true)));
    match (low, high) {
        (Some((low, false)), Some((high, false))) => Some(format!("{low} to {high}")),
        (Some((low, open)), Some((high, high_open))) => Some(format!(
            "{} {low}, {} {high}",
            if open { "above" } else { "at least" },
            if high_open { "below" } else { "at most" }
        )),
        (Some((low, open)), None) => {
            Some(format!("{} {low}", if open { "above" } else { "at least" }))
        }
        (None, Some((high, open))) => {
            Some(format!("{} {high}", if open { "below" } else { "at most" }))
        }
        (None, None) => None,
    }
}

/// A number as written: `300`, not `300.0`.
fn number(value: &Value) -> String {
    match value.as_f64() {
        Some(n) if n.fract() == 0.0 && n.abs() < 1e15 => format!("{}", n as i64),
        _ => value.to_string(),
    }
}

fn default(schema: &Value) -> String {
    match schema.get("default") {
        None => String::new(),
        Some(value) => format!("`{}`", toml_value(value)),
    }
}

/// A default as TOML writes it.
fn toml_value(value: &Value) -> String {
    match value {
        Value::Object(map) => {
            let fields: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{k} = {}", toml_value(v)))
                .collect();
            format!("{{ {} }}", fields.join(", "))
        }
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(toml_value).collect();
            format!("[{}]", items.join(", "))
        }
        other => other.to_string(),
    }
}

#[test]
fn the_reference_page_is_generated_from_the_schema() {
    let page = render();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(PAGE);
    if std::env::var_os("SWITCHYARD_BLESS").is_some() {
        std::fs::write(&path, &page).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed != page {
        let first = committed
            .lines()
            .zip(page.lines())
            .position(|(a, b)| a != b);
        panic!(
            "{PAGE} is not what the configuration's types describe (first difference at line \
             {}); regenerate it: SWITCHYARD_BLESS=1 cargo test --lib config::tests::page",
            first.map_or(committed.lines().count().min(page.lines().count()), |i| i) + 1
        );
    }
}
