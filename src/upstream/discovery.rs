//! Discovery: read everything an upstream offers (tools, prompts, resources, templates), following
//! pagination, and only for the capabilities it declared at `initialize`.

use rmcp::{
    RoleClient, ServiceError,
    model::{ErrorCode, ServerPeerInfo},
    service::Peer,
};

use super::UpstreamError;
use crate::catalog::UpstreamCatalog;

/// Lists everything `peer` offers. The four lists are read concurrently.
pub async fn discover(
    peer: &Peer<RoleClient>,
    server: &ServerPeerInfo,
) -> Result<UpstreamCatalog, UpstreamError> {
    let caps = &server.capabilities;
    let has_resources = caps.resources.is_some();
    let (tools, prompts, resources, templates) = tokio::try_join!(
        list("tools", caps.tools.is_some(), peer.list_all_tools()),
        list("prompts", caps.prompts.is_some(), peer.list_all_prompts()),
        list("resources", has_resources, peer.list_all_resources()),
        list(
            "resource templates",
            has_resources,
            peer.list_all_resource_templates()
        ),
    )?;
    Ok(UpstreamCatalog {
        tools,
        prompts,
        resources,
        templates,
        instructions: server.instructions.clone(),
    })
}

/// Runs one list call if the capability was declared. A server that declares a capability but
/// does not implement one of its list methods (common for templates) is taken to have none.
async fn list<T>(
    what: &'static str,
    declared: bool,
    call: impl Future<Output = Result<Vec<T>, ServiceError>>,
) -> Result<Vec<T>, UpstreamError> {
    if !declared {
        return Ok(Vec::new());
    }
    match call.await {
        Ok(items) => Ok(items),
        Err(ServiceError::McpError(e)) if e.code == ErrorCode::METHOD_NOT_FOUND => Ok(Vec::new()),
        Err(error) => Err(UpstreamError::Discovery {
            what,
            reason: error.to_string(),
        }),
    }
}
