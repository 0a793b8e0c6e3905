//! A definition as an upstream sent it: a tool, prompt, resource or resource template, read into
//! the SDK's model (for what the gateway itself looks at) and kept as the upstream's own JSON, so
//! that clients get every field unchanged (`execution`, fields newer than the SDK, a vendor's,
//! nested ones too) but for what the gateway rewrites: the name or URI under which it is shown,
//! and a description an operator replaced.

use std::sync::Arc;

use rmcp::model::{JsonObject, Prompt, Resource, ResourceTemplate, Tool};
use serde::{Serialize, de::DeserializeOwned};
use serde_json::Value;

/// One definition: the SDK's model of it and, when it was read as sent, its JSON.
#[derive(Debug, Clone, PartialEq)]
pub struct Listed<T> {
    pub(super) model: T,
    /// The definition as the upstream wrote it, with the gateway's rewrites applied.
    sent: Option<Arc<JsonObject>>,
}

pub type ListedTool = Listed<Tool>;
pub type ListedPrompt = Listed<Prompt>;
pub type ListedResource = Listed<Resource>;
pub type ListedTemplate = Listed<ResourceTemplate>;

/// Why an upstream's definition was left out of the catalog.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rejected {
    /// `tool`, `prompt`, `resource` or `resource template`.
    pub kind: &'static str,
    /// Its name or URI as the upstream sent it, if it had a readable one.
    pub name: String,
    pub reason: String,
}

impl<T> std::ops::Deref for Listed<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.model
    }
}

impl<T> From<T> for Listed<T> {
    fn from(model: T) -> Self {
        Self { model, sent: None }
    }
}

impl<T: Serialize> Serialize for Listed<T> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match &self.sent {
            Some(sent) => sent.serialize(serializer),
            None => self.model.serialize(serializer),
        }
    }
}

impl<T: DeserializeOwned + Serialize> Listed<T> {
    /// The definition `value` (one entry of a list result), read whole.
    pub fn from_value(value: Value) -> Result<Self, serde_json::Error> {
        let model = T::deserialize(&value)?;
        let sent = match value {
            Value::Object(fields) => Some(Arc::new(fields)),
            _ => None,
        };
        Ok(Self { model, sent })
    }

    /// Sets field `key` of the JSON sent to `value` (the model is changed by the caller).
    pub(super) fn rewrite(&mut self, key: &str, value: Value) {
        if let Some(sent) = &mut self.sent {
            Arc::make_mut(sent).insert(key.to_owned(), value);
        }
    }

    /// The field `key` of the definition as sent, if it was read as sent.
    pub fn sent_field(&self, key: &str) -> Option<&Value> {
        self.sent.as_ref()?.get(key)
    }
}

impl Listed<Tool> {
    /// Shows the tool under `name`.
    pub fn rename(&mut self, name: &str) {
        self.model.name = name.to_owned().into();
        self.rewrite("name", name.into());
    }

    /// Replaces the tool's description.
    pub fn describe(&mut self, description: &str) {
        self.model.description = Some(description.to_owned().into());
        self.rewrite("description", description.into());
    }

    /// How the tool may be called as a task.
    pub fn task_support(&self) -> TaskSupport {
        let support = self
            .sent_field("execution")
            .and_then(|execution| execution.get("taskSupport"))
            .and_then(|support| support.as_str());
        match support {
            Some("required") => TaskSupport::Required,
            Some("optional") => TaskSupport::Optional,
            _ => TaskSupport::Forbidden,
        }
    }

    /// The tool's input schema; a cheap shared pointer.
    pub fn schema(&self) -> Arc<JsonObject> {
        self.model.input_schema.clone()
    }
}

impl Listed<Prompt> {
    /// Shows the prompt under `name`.
    pub fn rename(&mut self, name: &str) {
        self.model.name = name.to_owned();
        self.rewrite("name", name.into());
    }
}

impl Listed<Resource> {
    /// Shows the resource at `uri`.
    pub fn relocate(&mut self, uri: &str) {
        self.model.uri = uri.to_owned();
        self.rewrite("uri", uri.into());
    }
}

impl Listed<ResourceTemplate> {
    /// Shows the template as `template`.
    pub fn relocate(&mut self, template: &str) {
        self.model.uri_template = template.to_owned();
        self.rewrite("uriTemplate", template.into());
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

/// The top-level properties of a tool's input schema: each one's name and description.
pub(super) fn parameters(schema: &JsonObject) -> Vec<(&str, Option<&str>)> {
    schema
        .get("properties")
        .and_then(|properties| properties.as_object())
        .map(|properties| {
            properties
                .iter()
                .map(|(name, property)| {
                    let description = property.get("description").and_then(|d| d.as_str());
                    (name.as_str(), description)
                })
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn every_field_sent_comes_back_but_the_rewritten_ones() {
        let sent = json!({
            "name": "research",
            "description": null,
            "inputSchema": {"type": "object", "x-extra": 1},
            "annotations": {"readOnlyHint": true, "x-vendor-hint": "kept"},
            "icons": [{"src": "https://example.com/i.png", "theme": "dark", "x-size": 3}],
            "execution": {"taskSupport": "required"},
            "x-vendor": [1, 2]
        });
        let mut tool = ListedTool::from_value(sent.clone()).unwrap();
        assert_eq!(tool.task_support(), TaskSupport::Required);
        assert_eq!(serde_json::to_value(&tool).unwrap(), sent);
        tool.rename("lab__research");
        let mut expected = sent.clone();
        expected["name"] = json!("lab__research");
        assert_eq!(serde_json::to_value(&tool).unwrap(), expected);
        assert_eq!(tool.name, "lab__research");

        let plain = ListedTool::from(Tool::new("a", "b", Arc::new(JsonObject::new())));
        assert_eq!(plain.task_support(), TaskSupport::Forbidden);
    }

    #[test]
    fn resources_and_templates_move_with_their_uri() {
        let sent = json!({"uri": "file:///a", "name": "a", "size": 3, "x-etag": "w/1"});
        let mut resource = ListedResource::from_value(sent.clone()).unwrap();
        resource.relocate("fs+file:///a");
        assert_eq!(resource.uri, "fs+file:///a");
        let mut expected = sent;
        expected["uri"] = json!("fs+file:///a");
        assert_eq!(serde_json::to_value(&resource).unwrap(), expected);
        let mut template =
            ListedTemplate::from_value(json!({"uriTemplate": "x://{id}", "name": "t"})).unwrap();
        template.relocate("up+x://{id}");
        assert_eq!(
            serde_json::to_value(&template).unwrap(),
            json!({"uriTemplate": "up+x://{id}", "name": "t"})
        );
    }
}
