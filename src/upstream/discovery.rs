//! Discovery: read everything an upstream offers (tools, prompts, resources, templates), following
//! pagination, and only for the capabilities it declared at `initialize`; with the caching hints
//! it gave for each list (2026-07-28 servers do), from which the merged lists' hints derive.

use rmcp::{
    RoleClient, ServiceError,
    model::{CacheScope, ErrorCode, ErrorData, PaginatedRequestParams, ServerPeerInfo},
    service::Peer,
};
use serde::{Deserialize, Serialize, de::DeserializeOwned};

use super::{RawLink, UpstreamError};
use crate::catalog::{CacheHint, ListHints, Listed, ListedTool, Rejected, UpstreamCatalog};

/// One page of a list: its entries, those left out, the next cursor, and the caching hint.
type Page<T> = (
    Vec<Listed<T>>,
    Vec<Rejected>,
    Option<String>,
    Option<CacheHint>,
);

/// Lists everything `peer` offers. The four lists are read concurrently, on the raw path where
/// there is one (`raw`), so that definitions keep every field the upstream sent and one
/// unreadable definition leaves the rest of its list served.
pub async fn discover(
    peer: &Peer<RoleClient>,
    raw: Option<&RawLink>,
    server: &ServerPeerInfo,
) -> Result<UpstreamCatalog, UpstreamError> {
    let caps = &server.capabilities;
    let has_resources = caps.resources.is_some();
    let params = |cursor| Some(PaginatedRequestParams::default().with_cursor(cursor));
    let (
        (tools, mut rejected, tools_hint),
        (prompts, rejected_prompts, prompts_hint),
        (resources, rejected_resources, resources_hint),
        (templates, rejected_templates, templates_hint),
    ) = tokio::try_join!(
        list(TOOLS, caps.tools.is_some(), |cursor| async move {
            if let Some(raw) = raw {
                return raw_page(raw, TOOLS, cursor).await;
            }
            let page = peer.list_tools(params(cursor)).await?;
            Ok(typed(
                page.tools,
                page.next_cursor,
                page.ttl_ms,
                page.cache_scope,
            ))
        }),
        list(PROMPTS, caps.prompts.is_some(), |cursor| async move {
            if let Some(raw) = raw {
                return raw_page(raw, PROMPTS, cursor).await;
            }
            let page = peer.list_prompts(params(cursor)).await?;
            Ok(typed(
                page.prompts,
                page.next_cursor,
                page.ttl_ms,
                page.cache_scope,
            ))
        }),
        list(RESOURCES, has_resources, |cursor| async move {
            if let Some(raw) = raw {
                return raw_page(raw, RESOURCES, cursor).await;
            }
            let page = peer.list_resources(params(cursor)).await?;
            Ok(typed(
                page.resources,
                page.next_cursor,
                page.ttl_ms,
                page.cache_scope,
            ))
        }),
        list(TEMPLATES, has_resources, |cursor| async move {
            if let Some(raw) = raw {
                return raw_page(raw, TEMPLATES, cursor).await;
            }
            let page = peer.list_resource_templates(params(cursor)).await?;
            let templates = page.resource_templates;
            Ok(typed(
                templates,
                page.next_cursor,
                page.ttl_ms,
                page.cache_scope,
            ))
        }),
    )?;
    rejected.extend(rejected_prompts);
    rejected.extend(rejected_resources);
    rejected.extend(rejected_templates);
    let tools = distinct(tools, &mut rejected);
    let ui_extension = crate::catalog::apps::offered(
        (caps.extensions.as_ref())
            .and_then(|extensions| extensions.get(crate::catalog::UI_EXTENSION)),
        &tools,
    );
    Ok(UpstreamCatalog {
        tools,
        prompts,
        resources,
        templates,
        rejected,
        checks: Default::default(),
        instructions: server.instructions.clone(),
        task_extension: caps.supports_tasks(),
        needs: Default::default(),
        ui_extension,
        hints: ListHints {
            tools: tools_hint,
            prompts: prompts_hint,
            resources: resources_hint,
            templates: templates_hint,
        },
    })
}

/// One of the four lists: its method, the field of its result that holds the entries, what
/// an entry is called, and the field that names one.
struct ListMethod {
    method: &'static str,
    field: &'static str,
    what: &'static str,
    plural: &'static str,
    key: &'static str,
}

const TOOLS: ListMethod = ListMethod {
    method: "tools/list",
    field: "tools",
    what: "tool",
    plural: "tools",
    key: "name",
};
const PROMPTS: ListMethod = ListMethod {
    method: "prompts/list",
    field: "prompts",
    what: "prompt",
    plural: "prompts",
    key: "name",
};
const RESOURCES: ListMethod = ListMethod {
    method: "resources/list",
    field: "resources",
    what: "resource",
    plural: "resources",
    key: "uri",
};
const TEMPLATES: ListMethod = ListMethod {
    method: "resources/templates/list",
    field: "resourceTemplates",
    what: "resource template",
    plural: "resource templates",
    key: "uriTemplate",
};

/// A page read through the SDK's models (an upstream without a raw path).
fn typed<T>(
    entries: Vec<T>,
    next: Option<String>,
    ttl_ms: Option<u64>,
    scope: Option<CacheScope>,
) -> Page<T> {
    let entries = entries.into_iter().map(Listed::from).collect();
    (entries, Vec::new(), next, hint(ttl_ms, scope))
}

/// One page of `list`, read as the upstream wrote it. An entry that is not a definition of
/// its kind is left out and reported; the rest are kept.
async fn raw_page<T: DeserializeOwned + Serialize>(
    raw: &RawLink,
    list: ListMethod,
    cursor: Option<String>,
) -> Result<Page<T>, ServiceError> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct RawPage {
        next_cursor: Option<String>,
        ttl_ms: Option<u64>,
        cache_scope: Option<CacheScope>,
        #[serde(flatten)]
        rest: serde_json::Map<String, serde_json::Value>,
    }
    let params = match cursor {
        Some(cursor) => serde_json::json!({ "cursor": cursor }),
        None => serde_json::json!({}),
    };
    let answer = raw
        .request(list.method, params, |_| {})
        .await
        .map_err(|error| failed(format!("the {} list was not answered: {error}", list.what)))?;
    if answer.is_error {
        let error: ErrorData = serde_json::from_str(answer.payload())
            .unwrap_or_else(|_| ErrorData::internal_error("an unreadable error", None));
        return Err(ServiceError::McpError(error));
    }
    let mut page: RawPage = serde_json::from_str(answer.payload())
        .map_err(|error| failed(format!("the {} list cannot be read: {error}", list.what)))?;
    let entries = match page.rest.remove(list.field) {
        Some(serde_json::Value::Array(entries)) => entries,
        _ => {
            return Err(failed(format!(
                "the {} list has no `{}` array",
                list.what, list.field
            )));
        }
    };
    let mut kept = Vec::with_capacity(entries.len());
    let mut rejected = Vec::new();
    for entry in entries {
        let name = entry
            .get(list.key)
            .and_then(|name| name.as_str())
            .unwrap_or_default()
            .to_owned();
        let refuse = |reason: String| Rejected {
            kind: list.what,
            name: name.clone(),
            reason,
        };
        if name.is_empty() {
            rejected.push(refuse(format!("it has no `{}`", list.key)));
            continue;
        }
        match Listed::<T>::from_value(entry) {
            Ok(listed) => kept.push(listed),
            Err(error) => rejected.push(refuse(error.to_string())),
        }
    }
    let hint = hint(page.ttl_ms, page.cache_scope);
    Ok((kept, rejected, page.next_cursor, hint))
}

/// `tools` with a second definition of one name left out (a client could call only one).
fn distinct(tools: Vec<ListedTool>, rejected: &mut Vec<Rejected>) -> Vec<ListedTool> {
    let mut seen = std::collections::HashSet::new();
    tools
        .into_iter()
        .filter(|tool| {
            let first = seen.insert(tool.name.to_string());
            if !first {
                rejected.push(Rejected {
                    kind: "tool",
                    name: tool.name.to_string(),
                    reason: "the upstream listed a tool of this name before".into(),
                });
            }
            first
        })
        .collect()
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

/// Reads every page of `list` if the capability was declared; the hint is the first page's.
/// A server that declares a capability but does not implement one of its list methods (common
/// for templates) is taken to have none.
async fn list<T, F, Fut>(
    list: ListMethod,
    declared: bool,
    mut page: F,
) -> Result<(Vec<Listed<T>>, Vec<Rejected>, Option<CacheHint>), UpstreamError>
where
    F: FnMut(Option<String>) -> Fut,
    Fut: Future<Output = Result<Page<T>, ServiceError>>,
{
    if !declared {
        return Ok((Vec::new(), Vec::new(), None));
    }
    let mut items = Vec::new();
    let mut rejected = Vec::new();
    let mut first_hint = None;
    let mut cursor = None;
    for number in 0.. {
        let (entries, left_out, next, hint) = match page(cursor).await {
            Ok(page) => page,
            Err(ServiceError::McpError(e)) if e.code == ErrorCode::METHOD_NOT_FOUND => {
                return Ok((Vec::new(), Vec::new(), None));
            }
            Err(error) => {
                return Err(UpstreamError::Discovery {
                    what: list.plural,
                    reason: error.to_string(),
                });
            }
        };
        if number == 0 {
            first_hint = hint;
        }
        items.extend(entries);
        rejected.extend(left_out);
        match next {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    Ok((items, rejected, first_hint))
}
