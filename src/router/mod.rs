//! Routing: from the name or URI a client used to the upstream that owns it, and the forwarding
//! of the request there with the upstream's own name or URI restored.
//!
//! Each function reads one catalog snapshot, copies out only the route (two shared pointers),
//! gets a connection from the caller's `ConnectionSource`, and forwards the typed request.
//! The client's cancellation token is honoured while waiting: dropping the upstream request
//! sends `notifications/cancelled` upstream.

use std::{borrow::Cow, sync::Arc};

use rmcp::{
    ServiceError,
    model::{
        CallToolRequestParams, CallToolResponse, CompleteRequestParams, CompleteResult,
        GetPromptRequestParams, GetPromptResponse, ReadResourceRequestParams, ReadResourceResponse,
        Reference, ResourceContents,
    },
};
use tokio_util::sync::CancellationToken;

use crate::{
    catalog::{NameScheme, Route},
    error::GatewayError,
    gateway::Gateway,
    names::UpstreamName,
    upstream::{Connection, Upstream},
};

/// Where a request gets its upstream connection: the shared one, or the downstream session's own.
pub trait ConnectionSource: Sync {
    fn connection(
        &self,
        upstream: &Arc<Upstream>,
    ) -> impl Future<Output = Result<Arc<Connection>, GatewayError>> + Send;
}

/// `tools/call`: the result comes back exactly as the upstream sent it.
pub async fn call_tool(
    gateway: &Gateway,
    source: &impl ConnectionSource,
    mut params: CallToolRequestParams,
    ct: &CancellationToken,
) -> Result<CallToolResponse, GatewayError> {
    let route = gateway.catalog().tool(&params.name).cloned();
    let route =
        route.ok_or_else(|| gateway.missing_name(&params.name, GatewayError::UnknownTool))?;
    let (upstream, connection) = connect(gateway, source, &route.upstream).await?;
    params.name = Cow::Owned(route.original.to_string());
    forward(
        upstream.name(),
        ct,
        connection.peer().call_tool_once(params),
    )
    .await
}

/// `prompts/get`.
pub async fn get_prompt(
    gateway: &Gateway,
    source: &impl ConnectionSource,
    mut params: GetPromptRequestParams,
    ct: &CancellationToken,
) -> Result<GetPromptResponse, GatewayError> {
    let route = prompt_route(gateway, &params.name)?;
    let (upstream, connection) = connect(gateway, source, &route.upstream).await?;
    params.name = route.original.to_string();
    forward(
        upstream.name(),
        ct,
        connection.peer().get_prompt_once(params),
    )
    .await
}

/// `resources/read`: the contents' URIs are mapped back to the form the client used.
pub async fn read_resource(
    gateway: &Gateway,
    source: &impl ConnectionSource,
    mut params: ReadResourceRequestParams,
    ct: &CancellationToken,
) -> Result<ReadResourceResponse, GatewayError> {
    let (owner, original, scheme) = resolve_uri(gateway, &params.uri)?;
    let (upstream, connection) = connect(gateway, source, &owner).await?;
    params.uri = original;
    let response = forward(
        upstream.name(),
        ct,
        connection.peer().read_resource_once(params),
    )
    .await?;
    Ok(match response {
        ReadResourceResponse::Complete(mut result) => {
            for contents in &mut result.contents {
                expose_contents_uri(&scheme, &owner, contents);
            }
            ReadResourceResponse::Complete(result)
        }
        other => other,
    })
}

/// `completion/complete`, for a prompt argument or a resource template variable.
pub async fn complete(
    gateway: &Gateway,
    source: &impl ConnectionSource,
    mut params: CompleteRequestParams,
    ct: &CancellationToken,
) -> Result<CompleteResult, GatewayError> {
    let owner = match &mut params.r#ref {
        Reference::Prompt(prompt) => {
            let route = prompt_route(gateway, &prompt.name)?;
            prompt.name = route.original.to_string();
            route.upstream
        }
        Reference::Resource(resource) => {
            let (owner, original, _) = resolve_uri(gateway, &resource.uri)?;
            resource.uri = original;
            owner
        }
        _ => {
            return Err(GatewayError::InvalidParams(
                "unsupported completion reference".into(),
            ));
        }
    };
    let (upstream, connection) = connect(gateway, source, &owner).await?;
    forward(upstream.name(), ct, connection.peer().complete(params)).await
}

fn prompt_route(gateway: &Gateway, name: &str) -> Result<Route, GatewayError> {
    let route = gateway.catalog().prompt(name).cloned();
    route.ok_or_else(|| gateway.missing_name(name, GatewayError::UnknownPrompt))
}

/// The owner of an exposed URI, the URI it knows, and the naming scheme in force.
fn resolve_uri(
    gateway: &Gateway,
    uri: &str,
) -> Result<(UpstreamName, String, NameScheme), GatewayError> {
    let catalog = gateway.catalog();
    let unknown = || GatewayError::UnknownResource(uri.to_owned());
    let route = catalog.resolve_uri(uri).ok_or_else(unknown)?;
    let upstream = gateway.upstream(route.upstream).ok_or_else(unknown)?;
    Ok((
        upstream.name().clone(),
        route.original.to_owned(),
        catalog.scheme().clone(),
    ))
}

fn expose_contents_uri(scheme: &NameScheme, owner: &UpstreamName, contents: &mut ResourceContents) {
    if let ResourceContents::TextResourceContents { uri, .. }
    | ResourceContents::BlobResourceContents { uri, .. } = contents
    {
        *uri = scheme.expose_uri(owner, uri);
    }
}

/// The upstream named by a route, and a connection to it from `source`.
async fn connect<'g>(
    gateway: &'g Gateway,
    source: &impl ConnectionSource,
    name: &UpstreamName,
) -> Result<(&'g Arc<Upstream>, Arc<Connection>), GatewayError> {
    let upstream = gateway.serving_upstream(name)?;
    let connection = source.connection(upstream).await?;
    Ok((upstream, connection))
}

/// Awaits an upstream request unless the client cancels first.
async fn forward<T>(
    upstream: &UpstreamName,
    ct: &CancellationToken,
    request: impl Future<Output = Result<T, ServiceError>>,
) -> Result<T, GatewayError> {
    tokio::select! {
        result = request => result.map_err(|e| GatewayError::from_service(upstream, e)),
        _ = ct.cancelled() => Err(GatewayError::Cancelled),
    }
}
