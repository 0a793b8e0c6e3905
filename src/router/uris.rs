//! Resource URIs inside results: links and embedded resources in tool results and prompt
//! messages, and the contents of a read, get the same mapping as listed resources, so that a
//! client can read back through Switchyard whatever a result points to.

use rmcp::model::{ContentBlock, PromptMessage, ResourceContents};

use crate::{catalog::NameScheme, names::UpstreamName};

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
}
