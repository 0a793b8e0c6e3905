//! MCP Apps (`io.modelcontextprotocol/ui`): a tool names its interface, a `ui://` resource, in
//! `_meta.ui.resourceUri` (servers written before that key: `_meta["ui/resourceUri"]` and
//! `_meta["openai/outputTemplate"]`), and the host reads that resource with `resources/read`
//! from the server it got the tool from. The catalog lists an upstream's resources under
//! mapped URIs (`probe+ui://…` where it prefixes), so a tool must name its interface by the
//! same URI: each of those keys is mapped as resource URIs are, and reads of it are mapped back
//! the same way. The interface resource's own `_meta` (CSP, permissions) goes as it is.

use rmcp::model::{JsonObject, Tool};
use serde_json::Value;

use super::Listed;

/// The extension's identifier, in `capabilities.extensions`.
pub const UI_EXTENSION: &str = "io.modelcontextprotocol/ui";

/// The flat `_meta` keys older servers name a tool's interface with.
const FLAT_KEYS: [&str; 2] = ["ui/resourceUri", "openai/outputTemplate"];

/// The MIME type of an interface (a `ui://` resource hosts render).
pub const APP_MIME_TYPE: &str = "text/html;profile=mcp-app";

/// The extension's settings as an upstream offers it: as it declared them, or, if it did not
/// declare the extension but a tool of its names an interface (servers of an era before
/// extensions were declared), none.
pub fn offered(declared: Option<&JsonObject>, tools: &[Listed<Tool>]) -> Option<JsonObject> {
    if let Some(declared) = declared {
        return Some(declared.clone());
    }
    tools
        .iter()
        .any(|tool| {
            let meta = tool.sent_field("_meta").and_then(Value::as_object);
            meta.is_some_and(|meta| interface_of(meta).is_some())
        })
        .then(JsonObject::new)
}

/// The interface a tool's `_meta` names, if any.
fn interface_of(meta: &JsonObject) -> Option<&str> {
    let nested = meta
        .get("ui")
        .and_then(|ui| ui.get("resourceUri"))
        .and_then(Value::as_str);
    nested.or_else(|| FLAT_KEYS.iter().find_map(|key| meta.get(*key)?.as_str()))
}

impl Listed<Tool> {
    /// Names the tool's interface resource (if it has one) by the URI `map` gives for the
    /// upstream's.
    pub fn map_interface(&mut self, map: impl Fn(&str) -> String) {
        let Some(Value::Object(meta)) = self.sent_field("_meta") else {
            return;
        };
        let mut meta = meta.clone();
        if !map_interface(&mut meta, &map) {
            return;
        }
        if let Ok(typed) = serde_json::from_value(Value::Object(meta.clone())) {
            self.model.meta = Some(typed);
        }
        self.rewrite("_meta", Value::Object(meta));
    }
}

/// Maps the interface URIs of a tool's `_meta` in place; whether any was there.
fn map_interface(meta: &mut JsonObject, map: &impl Fn(&str) -> String) -> bool {
    let mut mapped = false;
    let mut swap = |value: Option<&mut Value>| {
        if let Some(Value::String(uri)) = value {
            *uri = map(uri);
            mapped = true;
        }
    };
    swap(
        meta.get_mut("ui")
            .and_then(|ui| ui.as_object_mut())
            .and_then(|ui| ui.get_mut("resourceUri")),
    );
    for key in FLAT_KEYS {
        swap(meta.get_mut(key));
    }
    mapped
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn every_key_naming_the_interface_is_mapped_and_the_rest_kept() {
        let sent = json!({
            "name": "clock",
            "inputSchema": {"type": "object"},
            "_meta": {
                "ui": {"resourceUri": "ui://clock/app.html", "visibility": ["model", "app"]},
                "ui/resourceUri": "ui://clock/app.html",
                "openai/outputTemplate": "ui://clock/app.html",
                "com.example/other": "ui://not-an-interface"
            }
        });
        let mut tool: Listed<Tool> = Listed::from_value(sent).unwrap();
        tool.map_interface(|uri| format!("probe+{uri}"));
        let shown = serde_json::to_value(&tool).unwrap();
        assert_eq!(
            shown["_meta"],
            json!({
                "ui": {"resourceUri": "probe+ui://clock/app.html", "visibility": ["model", "app"]},
                "ui/resourceUri": "probe+ui://clock/app.html",
                "openai/outputTemplate": "probe+ui://clock/app.html",
                "com.example/other": "ui://not-an-interface"
            })
        );
        let mut plain: Listed<Tool> =
            Listed::from_value(json!({"name": "t", "inputSchema": {"type": "object"}})).unwrap();
        plain.map_interface(|uri| format!("probe+{uri}"));
        assert!(serde_json::to_value(&plain).unwrap().get("_meta").is_none());
    }
}
