//! The configuration file's JSON Schema (draft 2020-12), derived from the raw types that read
//! it: `switchyard config schema` prints it, and the reference file (`conf/switchyard.toml`)
//! and page (`docs/src/configuration.md`) are tested against it. The raw types are loose (a
//! string for a choice, a float for seconds) so that every problem is reported at once; their
//! `#[schemars]` attributes still tell an editor the accepted values, ranges and defaults.

use serde_json::{Map, Value};

use super::raw::RawConfig;

/// The JSON Schema of a Switchyard TOML configuration file.
pub fn schema() -> Value {
    let generator = schemars::generate::SchemaSettings::draft2020_12().into_generator();
    let mut schema = generator.into_root_schema_for::<RawConfig>().to_value();
    if let Some(root) = schema.as_object_mut() {
        root.insert("title".into(), "Switchyard configuration".into());
    }
    tighten(&mut schema);
    schema
}

/// TOML has no null, and every table rejects keys it does not know (`load` reports them):
/// `Option`'s null is dropped and `additionalProperties: false` set on every table with known
/// keys.
fn tighten(value: &mut Value) {
    match value {
        Value::Object(object) => {
            drop_null(object);
            if object.contains_key("properties") && !object.contains_key("additionalProperties") {
                object.insert("additionalProperties".into(), false.into());
            }
            object.values_mut().for_each(tighten);
        }
        Value::Array(items) => items.iter_mut().for_each(tighten),
        _ => {}
    }
}

/// `"type": ["T", "null"]` → `"type": "T"`; `anyOf: [S, {"type": "null"}]` → S.
fn drop_null(object: &mut Map<String, Value>) {
    if let Some(Value::Array(types)) = object.get_mut("type") {
        types.retain(|t| t != "null");
        if types.len() == 1 {
            let only = types.remove(0);
            object.insert("type".into(), only);
        }
    }
    let Some(Value::Array(any_of)) = object.get_mut("anyOf") else {
        return;
    };
    any_of.retain(|s| s.get("type").is_none_or(|t| t != "null"));
    if any_of.len() == 1 {
        let Some(Value::Object(only)) = any_of.pop() else {
            return;
        };
        object.remove("anyOf");
        for (key, value) in only {
            object.entry(key).or_insert(value);
        }
    }
    if let Some(Value::Array(enumerated)) = object.get_mut("enum") {
        enumerated.retain(|v| !v.is_null());
    }
}
