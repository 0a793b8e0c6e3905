//! A tool's `x-mcp-header` annotations (SEP-2243): the arguments its input schema asks clients
//! to repeat as `Mcp-Param-{Name}` headers, so that intermediaries can route on them without
//! reading the body. Found once, when the catalog is built; read from a call's arguments to
//! check a client's headers, and to write them towards a 2026-07-28 upstream.

use std::sync::Arc;

use http::{HeaderName, HeaderValue};
use rmcp::model::JsonObject;
use serde_json::{Value, value::RawValue};

use crate::{protocol::header_text, wire::Fields};

/// One annotated argument: where it sits in `arguments`, and the header that carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamHeader {
    /// Property names from the root of `arguments` to the argument.
    pub path: Vec<String>,
    /// The header, `Mcp-Param-` and the annotation, as the schema spells it.
    pub header: String,
    /// The same, as a header name.
    pub name: HeaderName,
}

impl ParamHeader {
    /// The argument this header repeats, as a header carries it before encoding: strings as
    /// they are, numbers and booleans as written in JSON; `None` when it is absent, null, an
    /// object or an array (then no header is sent).
    pub fn text_in(&self, arguments: &RawValue) -> Option<String> {
        let mut value = arguments;
        for key in &self.path {
            value = Fields::of(value)?.get(key)?;
        }
        match serde_json::from_str::<Value>(value.get()).ok()? {
            Value::String(text) => Some(text),
            Value::Bool(b) => Some(b.to_string()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        }
    }
}

/// The `Mcp-Param-*` headers of a `tools/call` with `params`, for a tool annotated with
/// `annotated`.
pub fn header_values(annotated: &[ParamHeader], params: &Fields) -> Vec<(HeaderName, HeaderValue)> {
    let Some(arguments) = params.get("arguments") else {
        return Vec::new();
    };
    annotated
        .iter()
        .filter_map(|param| Some((param.name.clone(), header_text(&param.text_in(arguments)?))))
        .collect()
}

/// The annotated arguments of a tool with input schema `schema`; `None` if it has none.
pub fn param_headers(schema: &JsonObject) -> Option<Arc<[ParamHeader]>> {
    let mut found = Vec::new();
    collect(schema.get("properties"), &mut Vec::new(), &mut found);
    (!found.is_empty()).then(|| found.into())
}

/// Annotations on properties reached from the root through `properties` alone. One that makes
/// no header name is no annotation.
fn collect(properties: Option<&Value>, path: &mut Vec<String>, found: &mut Vec<ParamHeader>) {
    let Some(Value::Object(properties)) = properties else {
        return;
    };
    for (name, schema) in properties {
        path.push(name.clone());
        if let Some(Value::String(header)) = schema.get("x-mcp-header")
            && !header.is_empty()
        {
            let header = format!("Mcp-Param-{header}");
            if let Ok(name) = HeaderName::try_from(&header) {
                found.push(ParamHeader {
                    path: path.clone(),
                    header,
                    name,
                });
            }
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
            "empty": {"type": "string", "x-mcp-header": ""},
            "spaced": {"type": "string", "x-mcp-header": "Not A Name"}
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

    #[test]
    fn arguments_become_headers_encoded_where_they_must_be() {
        let Value::Object(schema) = json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "nested": {"type": "object", "properties": {"id": {"type": "integer", "x-mcp-header": "Id"}}},
            "flag": {"type": "boolean", "x-mcp-header": "Flag"},
            "list": {"type": "array", "x-mcp-header": "List"}
        }}) else {
            unreachable!()
        };
        let annotated = param_headers(&schema).unwrap();
        let params = r#"{"name":"t","arguments":{"region":"Zürich","nested":{"id":7},"flag":null,"list":[1]}}"#;
        let params = serde_json::from_str::<&RawValue>(params).unwrap();
        let headers = header_values(&annotated, &Fields::of(params).unwrap());
        let headers: Vec<(&str, &str)> = headers
            .iter()
            .map(|(name, value)| (name.as_str(), value.to_str().unwrap()))
            .collect();
        assert_eq!(
            headers,
            [
                ("mcp-param-region", "=?base64?WsO8cmljaA==?="),
                ("mcp-param-id", "7")
            ],
            "null and arrays send none"
        );
        let none = serde_json::from_str::<&RawValue>(r#"{"name":"t"}"#).unwrap();
        assert!(header_values(&annotated, &Fields::of(none).unwrap()).is_empty());
    }
}
