//! A tool's `x-mcp-header` annotations (SEP-2243): the arguments its input schema asks clients
//! to repeat as `Mcp-Param-{Name}` headers, so that intermediaries can route on them without
//! reading the body. Found once, when the catalog is built.

use std::sync::Arc;

use rmcp::model::JsonObject;
use serde_json::Value;

/// One annotated argument: where it sits in `arguments`, and the header that carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamHeader {
    /// Property names from the root of `arguments` to the argument.
    pub path: Vec<String>,
    /// The header, `Mcp-Param-` and the annotation.
    pub header: String,
}

/// The annotated arguments of a tool with input schema `schema`; `None` if it has none.
pub fn param_headers(schema: &JsonObject) -> Option<Arc<[ParamHeader]>> {
    let mut found = Vec::new();
    collect(schema.get("properties"), &mut Vec::new(), &mut found);
    (!found.is_empty()).then(|| found.into())
}

/// Annotations on properties reached from the root through `properties` alone.
fn collect(properties: Option<&Value>, path: &mut Vec<String>, found: &mut Vec<ParamHeader>) {
    let Some(Value::Object(properties)) = properties else {
        return;
    };
    for (name, schema) in properties {
        path.push(name.clone());
        if let Some(Value::String(header)) = schema.get("x-mcp-header")
            && !header.is_empty()
        {
            found.push(ParamHeader {
                path: path.clone(),
                header: format!("Mcp-Param-{header}"),
            });
        }
        collect(schema.get("properties"), path, found);
        path.pop();
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn annotations_are_found_along_properties() {
        let Value::Object(schema) = json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "nested": {"type": "object", "properties": {"id": {"type": "integer", "x-mcp-header": "Id"}}},
            "plain": {"type": "string"},
            "empty": {"type": "string", "x-mcp-header": ""}
        }}) else {
            unreachable!()
        };
        let found = param_headers(&schema).unwrap();
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].path, ["region"]);
        assert_eq!(found[0].header, "Mcp-Param-Region");
        assert_eq!(found[1].path, ["nested", "id"]);
        let Value::Object(none) = json!({"type": "object"}) else {
            unreachable!()
        };
        assert!(param_headers(&none).is_none());
    }
}
