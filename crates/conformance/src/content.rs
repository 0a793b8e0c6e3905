//! The resources and prompts of the conformance fixture, with the exact texts the official
//! conformance suite looks for.

use rmcp::{
    ErrorData,
    model::{
        ContentBlock, GetPromptResult, Prompt, PromptArgument, PromptMessage, ReadResourceResult,
        Resource, ResourceContents, ResourceTemplate, Role,
    },
};
use serde_json::{Map, Value};

/// A 1×1 PNG.
pub const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// A tiny WAV file.
pub const WAV: &str = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=";

const STATIC_TEXT: &str = "test://static-text";
const STATIC_BINARY: &str = "test://static-binary";
const WATCHED: &str = "test://watched-resource";
pub const TEMPLATE: &str = "test://template/{id}/data";

pub fn resources() -> Vec<Resource> {
    vec![
        Resource::new(STATIC_TEXT, "static-text")
            .with_description("A static text resource")
            .with_mime_type("text/plain"),
        Resource::new(STATIC_BINARY, "static-binary")
            .with_description("A static binary resource (a PNG)")
            .with_mime_type("image/png"),
        Resource::new(WATCHED, "watched-resource")
            .with_description("A resource that can be subscribed to")
            .with_mime_type("text/plain"),
    ]
}

pub fn templates() -> Vec<ResourceTemplate> {
    vec![
        ResourceTemplate::new(TEMPLATE, "template-data")
            .with_description("Data for an id")
            .with_mime_type("application/json"),
    ]
}

pub fn read(uri: &str) -> Result<ReadResourceResult, ErrorData> {
    let contents = match uri {
        STATIC_TEXT => text(
            uri,
            "text/plain",
            "This is the content of the static text resource.",
        ),
        STATIC_BINARY => ResourceContents::BlobResourceContents {
            uri: uri.to_owned(),
            mime_type: Some("image/png".into()),
            blob: PNG.into(),
            meta: None,
        },
        WATCHED => text(uri, "text/plain", "Watched resource content"),
        _ => match uri
            .strip_prefix("test://template/")
            .and_then(|rest| rest.strip_suffix("/data"))
        {
            Some(id) if !id.is_empty() && !id.contains('/') => {
                let data = serde_json::json!({
                    "id": id, "templateTest": true, "data": format!("Data for ID: {id}")
                });
                text(uri, "application/json", &data.to_string())
            }
            _ => {
                return Err(ErrorData::resource_not_found(
                    format!("no resource `{uri}`"),
                    Some(serde_json::json!({ "uri": uri })),
                ));
            }
        },
    };
    Ok(ReadResourceResult::new(vec![contents]))
}

fn text(uri: &str, mime_type: &str, text: &str) -> ResourceContents {
    ResourceContents::TextResourceContents {
        uri: uri.to_owned(),
        mime_type: Some(mime_type.into()),
        text: text.into(),
        meta: None,
    }
}

pub fn prompts() -> Vec<Prompt> {
    let arg = |name: &str, description: &str| {
        PromptArgument::new(name)
            .with_description(description)
            .with_required(true)
    };
    vec![
        Prompt::new("test_simple_prompt", Some("A simple prompt"), None),
        Prompt::new(
            "test_prompt_with_arguments",
            Some("A prompt with two arguments"),
            Some(vec![
                arg("arg1", "The first argument"),
                arg("arg2", "The second argument"),
            ]),
        ),
        Prompt::new(
            "test_prompt_with_embedded_resource",
            Some("A prompt that embeds a resource"),
            Some(vec![arg("resourceUri", "The URI of the resource to embed")]),
        ),
        Prompt::new(
            "test_prompt_with_image",
            Some("A prompt with an image"),
            None,
        ),
    ]
}

pub fn get_prompt(
    name: &str,
    arguments: &Map<String, Value>,
) -> Result<GetPromptResult, ErrorData> {
    let argument = |key: &str| {
        arguments
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    let messages = match name {
        "test_simple_prompt" => vec![PromptMessage::new_text(
            Role::User,
            "This is a simple prompt for testing.",
        )],
        "test_prompt_with_arguments" => vec![PromptMessage::new_text(
            Role::User,
            format!(
                "Prompt with arguments: arg1='{}', arg2='{}'",
                argument("arg1"),
                argument("arg2")
            ),
        )],
        "test_prompt_with_embedded_resource" => vec![
            PromptMessage::new(
                Role::User,
                ContentBlock::resource(text(
                    argument("resourceUri"),
                    "text/plain",
                    "Embedded resource content for testing.",
                )),
            ),
            PromptMessage::new_text(Role::User, "Please process the embedded resource above."),
        ],
        "test_prompt_with_image" => vec![
            PromptMessage::new(Role::User, ContentBlock::image(PNG, "image/png")),
            PromptMessage::new_text(Role::User, "Please analyze the image above."),
        ],
        other => {
            return Err(ErrorData::invalid_params(
                format!("unknown prompt `{other}`"),
                None,
            ));
        }
    };
    Ok(GetPromptResult::new(messages))
}
