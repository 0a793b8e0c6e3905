//! Checking a tool call's arguments against the tool's input schema before the call leaves the
//! gateway. Each schema is compiled once, when its upstream's lists are discovered (so every
//! catalog snapshot and view built from them shares the compiled form); a schema that does not
//! compile makes its tool an invalid definition, left out of the catalog. Remote `$ref`s are
//! never fetched: a schema must be whole.

use std::{fmt, sync::Arc};

use rmcp::model::JsonObject;
use serde_json::Value;

/// A tool's input schema, compiled.
pub struct ArgumentCheck(jsonschema::Validator);

impl fmt::Debug for ArgumentCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ArgumentCheck")
    }
}

impl ArgumentCheck {
    /// Compiles `schema`, or says why it is not a JSON Schema the gateway can check with.
    pub fn compile(schema: &JsonObject) -> Result<Arc<Self>, String> {
        let schema = Value::Object(schema.clone());
        jsonschema::validator_for(&schema)
            .map(|validator| Arc::new(Self(validator)))
            .map_err(|error| format!("its input schema is not a usable JSON Schema: {error}"))
    }

    /// Checks `arguments` (absent: none were given, as `{}`). The first failure is named by
    /// where it is in the arguments and which rule of the schema it breaks; the values the
    /// client sent are never repeated.
    pub fn check(&self, arguments: Option<&Value>) -> Result<(), String> {
        let empty = Value::Object(Default::default());
        let arguments = arguments.unwrap_or(&empty);
        match self.0.validate(arguments) {
            Ok(()) => Ok(()),
            Err(error) => {
                let at = error.instance_path().as_str();
                let at = if at.is_empty() { "/" } else { at };
                Err(format!(
                    "at `{at}`: {} (schema rule `{}`)",
                    error.masked(),
                    error.schema_path().as_str()
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn schema(value: Value) -> JsonObject {
        match value {
            Value::Object(object) => object,
            _ => unreachable!(),
        }
    }

    #[test]
    fn a_failure_names_its_path_and_rule_but_not_the_value() {
        let check = ArgumentCheck::compile(&schema(json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "depth": {"type": "integer", "minimum": 0}
            },
            "required": ["path"]
        })))
        .unwrap();
        assert!(
            check
                .check(Some(&json!({"path": "/tmp", "depth": 2})))
                .is_ok()
        );
        let error = check
            .check(Some(&json!({"path": "/tmp", "depth": "secret-value"})))
            .unwrap_err();
        assert!(error.contains("/depth"), "{error}");
        assert!(error.contains("type"), "{error}");
        assert!(!error.contains("secret-value"), "{error}");
        let missing = check.check(None).unwrap_err();
        assert!(missing.contains("required"), "{missing}");
    }

    #[test]
    fn a_schema_that_is_not_one_is_refused() {
        assert!(ArgumentCheck::compile(&schema(json!({"type": 12}))).is_err());
        assert!(ArgumentCheck::compile(&schema(json!({"type": "object"}))).is_ok());
    }
}
