//! A tool as an upstream defined it: the SDK's model of the definition, plus the fields that
//! model does not know (`execution`, which says whether the tool runs as a task, and any field
//! newer than the SDK or of a vendor's), kept verbatim so that clients get them unchanged.

use std::sync::Arc;

use rmcp::model::{JsonObject, Tool};
use serde::Serialize;

/// One tool definition.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ListedTool {
    #[serde(flatten)]
    pub tool: Tool,
    /// The definition's fields the SDK's model dropped, as the upstream sent them.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub extra: Option<Arc<JsonObject>>,
}

impl std::ops::Deref for ListedTool {
    type Target = Tool;

    fn deref(&self) -> &Tool {
        &self.tool
    }
}

impl std::ops::DerefMut for ListedTool {
    fn deref_mut(&mut self) -> &mut Tool {
        &mut self.tool
    }
}

impl From<Tool> for ListedTool {
    fn from(tool: Tool) -> Self {
        Self { tool, extra: None }
    }
}

/// Whether a tool may, must or must not be called as a task (`execution.taskSupport`, from
/// 2025-11-25 on; absent means forbidden).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TaskSupport {
    #[default]
    Forbidden,
    Optional,
    Required,
}

impl ListedTool {
    /// The definition `value` (one entry of a `tools/list` result), read whole.
    pub fn from_value(value: serde_json::Value) -> Result<Self, serde_json::Error> {
        let tool: Tool = serde_json::from_value(value.clone())?;
        let serde_json::Value::Object(mut fields) = value else {
            return Ok(tool.into());
        };
        if let serde_json::Value::Object(known) = serde_json::to_value(&tool)? {
            fields.retain(|key, _| !known.contains_key(key));
        }
        // Keys the model reads but writes differently (empty optionals) are its own.
        for key in [
            "name",
            "title",
            "description",
            "inputSchema",
            "outputSchema",
            "annotations",
            "icons",
            "_meta",
        ] {
            fields.remove(key);
        }
        let extra = (!fields.is_empty()).then(|| Arc::new(fields));
        Ok(Self { tool, extra })
    }

    /// How the tool may be called as a task.
    pub fn task_support(&self) -> TaskSupport {
        let support = self
            .extra
            .as_ref()
            .and_then(|extra| extra.get("execution"))
            .and_then(|execution| execution.get("taskSupport"))
            .and_then(|support| support.as_str());
        match support {
            Some("required") => TaskSupport::Required,
            Some("optional") => TaskSupport::Optional,
            _ => TaskSupport::Forbidden,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn fields_the_model_drops_come_back_verbatim() {
        let sent = json!({
            "name": "research",
            "description": "Runs long",
            "inputSchema": {"type": "object"},
            "execution": {"taskSupport": "required"},
            "x-vendor": [1, 2]
        });
        let tool = ListedTool::from_value(sent.clone()).unwrap();
        assert_eq!(tool.task_support(), TaskSupport::Required);
        assert_eq!(serde_json::to_value(&tool).unwrap(), sent);
        let plain = ListedTool::from_value(json!({"name": "a", "inputSchema": {}})).unwrap();
        assert!(plain.extra.is_none());
        assert_eq!(plain.task_support(), TaskSupport::Forbidden);
    }
}
