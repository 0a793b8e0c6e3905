//! Resource URIs inside results: links and embedded resources in tool results and prompt
//! messages, and the contents of a read, get the same mapping as listed resources, so that a
//! client can read back through Switchyard whatever a result points to.

use rmcp::model::{ContentBlock, PromptMessage, ResourceContents};
use serde_json::value::RawValue;

use super::Routed;
use crate::{
    catalog::NameScheme,
    names::UpstreamName,
    wire::{self, Edit, Fields},
};

/// Maps the URI of every resource link and embedded resource in `content`.
pub fn expose_in_content(scheme: &NameScheme, owner: &UpstreamName, content: &mut [ContentBlock]) {
    if !scheme.is_prefixed() {
        return;
    }
    for block in content {
        expose_in_block(scheme, owner, block);
    }
}

pub fn expose_in_prompt_message(
    scheme: &NameScheme,
    owner: &UpstreamName,
    message: &mut PromptMessage,
) {
    if scheme.is_prefixed() {
        expose_in_block(scheme, owner, &mut message.content);
    }
}

fn expose_in_block(scheme: &NameScheme, owner: &UpstreamName, block: &mut ContentBlock) {
    match block {
        ContentBlock::ResourceLink(link) => link.uri = scheme.expose_uri(owner, &link.uri),
        ContentBlock::Resource(embedded) => {
            expose_in_contents(scheme, owner, &mut embedded.resource)
        }
        _ => {}
    }
}

/// Maps the URI of resource contents.
pub fn expose_in_contents(
    scheme: &NameScheme,
    owner: &UpstreamName,
    contents: &mut ResourceContents,
) {
    if let ResourceContents::TextResourceContents { uri, .. }
    | ResourceContents::BlobResourceContents { uri, .. } = contents
    {
        *uri = scheme.expose_uri(owner, uri);
    }
}

/// Maps the URIs in one item of a result's list; `None` if nothing in it changes.
type MapItem = fn(&NameScheme, &UpstreamName, &RawValue) -> Option<String>;

/// The raw path's counterpart of the functions above: `result` (of a routed request of
/// `kind`) with its resource URIs mapped; `None` if nothing in it changes.
pub fn expose_raw(
    scheme: &NameScheme,
    owner: &UpstreamName,
    kind: Routed,
    result: &str,
) -> Option<String> {
    if !scheme.is_prefixed() || !result.contains("\"uri\"") {
        return None;
    }
    let (field, each): (&str, MapItem) = match kind {
        Routed::Tool => ("content", expose_raw_block),
        Routed::Prompt => ("messages", expose_raw_message),
        Routed::Resource => ("contents", expose_raw_contents),
    };
    let fields = Fields::of_text(result)?;
    let list = fields.get(field)?;
    let mapped = map_array(list, |item| each(scheme, owner, item))?;
    Some(write_with(&fields, field, &mapped))
}

/// A content block with its URI mapped, if it links or embeds a resource.
fn expose_raw_block(scheme: &NameScheme, owner: &UpstreamName, block: &RawValue) -> Option<String> {
    let fields = Fields::of(block)?;
    let kind = fields.get("type").and_then(wire::string)?;
    match &*kind {
        "resource_link" => {
            let uri = fields.get("uri").and_then(wire::string)?;
            Some(write_with(
                &fields,
                "uri",
                &json_string(&scheme.expose_uri(owner, &uri)),
            ))
        }
        "resource" => {
            let embedded = expose_raw_contents(scheme, owner, fields.get("resource")?)?;
            Some(write_with(&fields, "resource", &embedded))
        }
        _ => None,
    }
}

/// A prompt message with the URI of its content mapped.
fn expose_raw_message(
    scheme: &NameScheme,
    owner: &UpstreamName,
    message: &RawValue,
) -> Option<String> {
    let fields = Fields::of(message)?;
    let content = expose_raw_block(scheme, owner, fields.get("content")?)?;
    Some(write_with(&fields, "content", &content))
}

/// Resource contents with their URI mapped.
fn expose_raw_contents(
    scheme: &NameScheme,
    owner: &UpstreamName,
    contents: &RawValue,
) -> Option<String> {
    let fields = Fields::of(contents)?;
    let uri = fields.get("uri").and_then(wire::string)?;
    Some(write_with(
        &fields,
        "uri",
        &json_string(&scheme.expose_uri(owner, &uri)),
    ))
}

/// The JSON array `list` with each item `map` changes replaced; `None` if none changes.
fn map_array(list: &RawValue, map: impl Fn(&RawValue) -> Option<String>) -> Option<String> {
    let items: Vec<&RawValue> = serde_json::from_str(list.get()).ok()?;
    let mapped: Vec<Option<String>> = items.iter().map(|item| map(item)).collect();
    if mapped.iter().all(Option::is_none) {
        return None;
    }
    let mut out = String::with_capacity(list.get().len() + 32);
    out.push('[');
    for (i, (item, mapped)) in items.iter().zip(&mapped).enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(mapped.as_deref().unwrap_or(item.get()));
    }
    out.push(']');
    Some(out)
}

/// The object `fields` with field `name` set to the JSON text `value`.
fn write_with(fields: &Fields<'_>, name: &str, value: &str) -> String {
    let mut out = Vec::new();
    fields.write(
        &mut out,
        |key| {
            if key == name {
                Edit::Value(value)
            } else {
                Edit::Keep
            }
        },
        &[],
    );
    String::from_utf8(out).unwrap_or_default()
}

fn json_string(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use rmcp::model::{Resource, Role};

    use super::*;

    fn owner() -> UpstreamName {
        UpstreamName::new("notes").unwrap()
    }

    #[test]
    fn links_and_embedded_resources_are_mapped_and_the_rest_untouched() {
        let mut content = vec![
            ContentBlock::text("notes://not-a-link"),
            ContentBlock::resource_link(Resource::new("notes://note/1", "one")),
            ContentBlock::embedded_text("notes://note/2", "two"),
        ];
        expose_in_content(&NameScheme::prefixed("__"), &owner(), &mut content);
        let json = serde_json::to_value(&content).unwrap();
        assert_eq!(json[0]["text"], "notes://not-a-link");
        assert_eq!(json[1]["uri"], "notes+notes://note/1");
        assert_eq!(json[2]["resource"]["uri"], "notes+notes://note/2");
    }

    #[test]
    fn unprefixed_leaves_uris_alone() {
        let mut message = PromptMessage::new(Role::User, ContentBlock::embedded_text("x://y", "z"));
        expose_in_prompt_message(&NameScheme::unprefixed(), &owner(), &mut message);
        assert_eq!(
            serde_json::to_value(&message).unwrap()["content"]["resource"]["uri"],
            "x://y"
        );
        expose_in_prompt_message(&NameScheme::prefixed("__"), &owner(), &mut message);
        assert_eq!(
            serde_json::to_value(&message).unwrap()["content"]["resource"]["uri"],
            "notes+x://y"
        );
    }

    #[test]
    fn raw_results_have_their_links_mapped_like_typed_ones() {
        let scheme = NameScheme::prefixed("__");
        let result = RawValue::from_string(
            r#"{"content":[{"type":"text","text":"notes://x"},{"type":"resource_link","uri":"notes://note/1","name":"one"},{"type":"resource","resource":{"uri":"notes://note/2","text":"two"}}],"structuredContent":{"uri":"keep"}}"#.into(),
        )
        .unwrap();
        let mapped = expose_raw(&scheme, &owner(), Routed::Tool, result.get()).unwrap();
        let json: serde_json::Value = serde_json::from_str(&mapped).unwrap();
        assert_eq!(json["content"][0]["text"], "notes://x");
        assert_eq!(json["content"][1]["uri"], "notes+notes://note/1");
        assert_eq!(
            json["content"][2]["resource"]["uri"],
            "notes+notes://note/2"
        );
        assert_eq!(json["structuredContent"]["uri"], "keep");
        let read = RawValue::from_string(r#"{"contents":[{"uri":"notes://n","text":"t"}]}"#.into())
            .unwrap();
        let mapped = expose_raw(&scheme, &owner(), Routed::Resource, read.get()).unwrap();
        assert!(mapped.contains("notes+notes://n"));
        let plain =
            RawValue::from_string(r#"{"content":[{"type":"text","text":"hi"}]}"#.into()).unwrap();
        assert_eq!(
            expose_raw(&scheme, &owner(), Routed::Tool, plain.get()),
            None
        );
        assert_eq!(
            expose_raw(
                &NameScheme::unprefixed(),
                &owner(),
                Routed::Resource,
                read.get()
            ),
            None
        );
    }
}
