//! What a loosely typed raw field accepts, for the configuration's JSON Schema (`schema`):
//! the raw types read seconds as any number and strings before their placeholders are
//! expanded, and name these types in their `#[schemars(with = …)]` attributes.

use std::borrow::Cow;

use schemars::{JsonSchema, SchemaGenerator, json_schema};

/// A number of seconds (fractions allowed), above 0 (and below 10⁹, which `load` takes for a
/// mistake rather than a time).
pub(super) struct Seconds;

impl JsonSchema for Seconds {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        "Seconds".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> schemars::Schema {
        json_schema!({
            "type": "number",
            "exclusiveMinimum": 0,
        })
    }
}

/// A string whose placeholders are expanded at load: `${env:NAME}`, `${env:NAME:-default}`,
/// `${NAME}`, `${file:PATH}`, `${switchyard}` (`$${` for a literal `${`).
pub(super) struct Expanded;

impl JsonSchema for Expanded {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        "Expanded".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> schemars::Schema {
        json_schema!({ "type": "string", "x-placeholders": true })
    }
}
