//! The key paths of the configuration's JSON Schema (`config::schema`), walked once for the
//! tests that hold the reference file and page to it: every table's keys, through maps of
//! tables (`upstreams.NAME`) and arrays of tables (`[[quota]]`).

use serde_json::Value;

/// One step of a key path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// A key the schema names.
    Key(String),
    /// Any key of a map the file names (`[upstreams.NAME]`).
    Name,
    /// Any element of an array of tables (`[[quota]]`).
    Element,
}

/// A key of the schema: where it is, and its schema (references resolved).
pub struct SchemaKey<'a> {
    pub steps: Vec<Step>,
    pub schema: &'a Value,
    pub required: bool,
    /// What the key is: its own description, else its type's.
    pub description: &'a str,
}

impl SchemaKey<'_> {
    /// `upstreams.NAME.oauth.grant`, `quota[].who.groups`.
    pub fn path(&self) -> String {
        path(&self.steps)
    }

    /// The key's own name (the last step).
    pub fn name(&self) -> &str {
        match self.steps.last() {
            Some(Step::Key(name)) => name,
            _ => "",
        }
    }
}

/// A key path written out.
pub fn path(steps: &[Step]) -> String {
    let mut out = String::new();
    for step in steps {
        match step {
            Step::Key(name) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(name);
            }
            Step::Name => out.push_str(".NAME"),
            Step::Element => out.push_str("[]"),
        }
    }
    out
}

/// `schema` with a `$ref` to the root's `$defs` followed.
pub fn resolve<'a>(root: &'a Value, schema: &'a Value) -> &'a Value {
    match schema.get("$ref").and_then(Value::as_str) {
        Some(reference) => {
            let name = reference.trim_start_matches("#/$defs/");
            resolve(root, &root["$defs"][name])
        }
        None => schema,
    }
}

/// The table a key's value is, if it is one: its own (`[server]`), each entry of a map
/// (`[upstreams.NAME]`) or each element of an array (`[[quota]]`), with the step that leads
/// into it (`None` for its own).
pub fn table_of<'a>(root: &'a Value, schema: &'a Value) -> Option<(Option<Step>, &'a Value)> {
    let schema = resolve(root, schema);
    if schema.get("properties").is_some() {
        return Some((None, schema));
    }
    for (keyword, step) in [
        ("additionalProperties", Step::Name),
        ("items", Step::Element),
    ] {
        if let Some(inner) = schema.get(keyword).map(|inner| resolve(root, inner))
            && inner.get("properties").is_some()
        {
            return Some((Some(step), inner));
        }
    }
    None
}

/// Every key of the schema `root`, depth first in the order its types declare them.
pub fn keys(root: &Value) -> Vec<SchemaKey<'_>> {
    let mut out = Vec::new();
    walk(root, root, &mut Vec::new(), &mut out);
    out
}

fn walk<'a>(root: &'a Value, table: &'a Value, at: &mut Vec<Step>, out: &mut Vec<SchemaKey<'a>>) {
    let required: Vec<&str> = (table["required"].as_array().into_iter().flatten())
        .filter_map(Value::as_str)
        .collect();
    for (name, schema) in table["properties"].as_object().into_iter().flatten() {
        at.push(Step::Key(name.clone()));
        out.push(SchemaKey {
            steps: at.clone(),
            schema: resolve(root, schema),
            required: required.contains(&name.as_str()),
            description: (schema
                .get("description")
                .or(resolve(root, schema).get("description")))
            .and_then(Value::as_str)
            .unwrap_or_default(),
        });
        if let Some((step, inner)) = table_of(root, schema) {
            at.extend(step.clone());
            walk(root, inner, at, out);
            if step.is_some() {
                at.pop();
            }
        }
        at.pop();
    }
}
