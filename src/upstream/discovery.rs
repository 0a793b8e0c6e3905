//! Discovery: read everything an upstream offers (tools, prompts, resources, templates), following
//! pagination, and only for the capabilities it declared at `initialize`; with the caching hints
//! it gave for each list (2026-07-28 servers do), from which the merged lists' hints derive.

use rmcp::{
    RoleClient, ServiceError,
    model::{CacheScope, ErrorCode, ErrorData, PaginatedRequestParams, ServerPeerInfo},
    service::Peer,
};
use serde::Deserialize;

use super::{RawLink, UpstreamError};
use crate::catalog::{CacheHint, ListHints, ListedTool, UpstreamCatalog};

/// One page of a list: its entries, the next cursor, and the caching hint given with it.
type Page<T> = (Vec<T>, Option<String>, Option<CacheHint>);

/// Lists everything `peer` offers. The four lists are read concurrently. Tools are read on
/// the raw path where there is one (`raw`), so that their definitions keep every field.
pub async fn discover(
    peer: &Peer<RoleClient>,
    raw: Option<&RawLink>,
    server: &ServerPeerInfo,
) -> Result<UpstreamCatalog, UpstreamError> {
    let caps = &server.capabilities;
    let has_resources = caps.resources.is_some();
    let params = |cursor| Some(PaginatedRequestParams::default().with_cursor(cursor));
    let (
        (tools, tools_hint),
        (prompts, prompts_hint),
        (resources, resources_hint),
        (templates, templates_hint),
    ) = tokio::try_join!(
        list("tools", caps.tools.is_some(), |cursor| async move {
            // A 2026-07-28 upstream wants the lifecycle in every request's `_meta`, which
            // only rmcp's client writes for the gateway's own requests.
            if let Some(raw) = raw.filter(|raw| raw.era() == crate::protocol::Era::Legacy) {
                return raw_tools(raw, cursor).await;
            }
            let page = peer.list_tools(params(cursor)).await?;
            Ok((
                page.tools.into_iter().map(ListedTool::from).collect(),
                page.next_cursor,
                hint(page.ttl_ms, page.cache_scope),
            ))
        }),
        list("prompts", caps.prompts.is_some(), |cursor| async move {
            let page = peer.list_prompts(params(cursor)).await?;
            Ok((
                page.prompts,
                page.next_cursor,
                hint(page.ttl_ms, page.cache_scope),
            ))
        }),
        list("resources", has_resources, |cursor| async move {
            let page = peer.list_resources(params(cursor)).await?;
            Ok((
                page.resources,
                page.next_cursor,
                hint(page.ttl_ms, page.cache_scope),
            ))
        }),
        list("resource templates", has_resources, |cursor| async move {
            let page = peer.list_resource_templates(params(cursor)).await?;
            let templates = page.resource_templates;
            Ok((
                templates,
                page.next_cursor,
                hint(page.ttl_ms, page.cache_scope),
            ))
        }),
    )?;
    Ok(UpstreamCatalog {
        tools,
        prompts,
        resources,
        templates,
        instructions: server.instructions.clone(),
        task_extension: caps.supports_tasks(),
        hints: ListHints {
            tools: tools_hint,
            prompts: prompts_hint,
            resources: resources_hint,
            templates: templates_hint,
        },
    })
}

/// One page of `tools/list`, read as the upstream wrote it.
async fn raw_tools(
    raw: &RawLink,
    cursor: Option<String>,
) -> Result<Page<ListedTool>, ServiceError> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct ToolsPage {
        tools: Vec<serde_json::Value>,
        next_cursor: Option<String>,
        ttl_ms: Option<u64>,
        cache_scope: Option<CacheScope>,
    }
    let params = match &cursor {
        Some(cursor) => serde_json::json!({ "cursor": cursor }).to_string(),
        None => "{}".to_owned(),
    };
    let answer = raw
        .request("tools/list", &params, |_| {})
        .await
        .map_err(|error| failed(format!("the tool list was not answered: {error}")))?;
    if answer.is_error {
        let error: ErrorData = serde_json::from_str(answer.payload())
            .unwrap_or_else(|_| ErrorData::internal_error("an unreadable error", None));
        return Err(ServiceError::McpError(error));
    }
    let page: ToolsPage = serde_json::from_str(answer.payload())
        .map_err(|error| failed(format!("the tool list cannot be read: {error}")))?;
    let tools = page
        .tools
        .into_iter()
        .map(ListedTool::from_value)
        .collect::<Result<_, _>>()
        .map_err(|error| failed(format!("a tool definition cannot be read: {error}")))?;
    Ok((tools, page.next_cursor, hint(page.ttl_ms, page.cache_scope)))
}

fn failed(reason: String) -> ServiceError {
    ServiceError::McpError(ErrorData::internal_error(reason, None))
}

/// The hint of a list result, if it gave both parts of one.
fn hint(ttl_ms: Option<u64>, scope: Option<CacheScope>) -> Option<CacheHint> {
    Some(CacheHint {
        ttl_ms: ttl_ms?,
        scope: scope?,
    })
}

/// Reads every page of one list if the capability was declared; the hint is the first page's.
/// A server that declares a capability but does not implement one of its list methods (common
/// for templates) is taken to have none.
async fn list<T, F, Fut>(
    what: &'static str,
    declared: bool,
    mut page: F,
) -> Result<(Vec<T>, Option<CacheHint>), UpstreamError>
where
    F: FnMut(Option<String>) -> Fut,
    Fut: Future<Output = Result<Page<T>, ServiceError>>,
{
    if !declared {
        return Ok((Vec::new(), None));
    }
    let mut items = Vec::new();
    let mut first_hint = None;
    let mut cursor = None;
    for number in 0.. {
        let (entries, next, hint) = match page(cursor).await {
            Ok(page) => page,
            Err(ServiceError::McpError(e)) if e.code == ErrorCode::METHOD_NOT_FOUND => {
                return Ok((Vec::new(), None));
            }
            Err(error) => {
                return Err(UpstreamError::Discovery {
                    what,
                    reason: error.to_string(),
                });
            }
        };
        if number == 0 {
            first_hint = hint;
        }
        items.extend(entries);
        match next {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    Ok((items, first_hint))
}
