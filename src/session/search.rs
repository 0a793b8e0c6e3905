//! Tool search, where an endpoint serves it instead of the tool list (`tool_search`): a client
//! lists two tools of the gateway's own, `search_tools` (a query → the best matching tools the
//! caller may see, each with its name, description and input schema) and `call_tool` (a name
//! and arguments, for clients that call only what they listed). The tools a session found join
//! its own tool list, and its client is told the list changed, so that clients that follow
//! list changes call them directly. Any tool the caller may see can be called by its name,
//! listed or not.

use std::sync::Arc;

use bytes::Bytes;
use serde_json::{Value, json};

use super::Session;
use crate::{
    catalog::{ListedTool, SearchModel},
    policy::ToolSearch,
    protocol::Era,
    request::Request,
    store::Store,
    wire,
};

/// The gateway's tools, by name.
pub const SEARCH_TOOL: &str = "search_tools";
pub const CALL_TOOL: &str = "call_tool";
/// The most tools a session's list keeps from its searches.
pub const MAX_FOUND: usize = 128;
/// Results of a search, unless the caller asks for another number (up to `MAX_RESULTS`).
const DEFAULT_RESULTS: usize = 5;
const MAX_RESULTS: usize = 20;

/// Which of the gateway's tools a call is of.
pub enum GatewayTool {
    Search,
    Call,
}

/// Whether `request`'s caller gets search instead of the tool list.
pub fn searching(request: &Request) -> bool {
    match request.live.tool_search(&request.caller.endpoint) {
        ToolSearch::Off => false,
        mode => mode.applies(request.view().tools().len()),
    }
}

/// The gateway tool a `tools/call` names, if it names one.
pub fn gateway_tool(request: &Request) -> Option<GatewayTool> {
    let name = request.message.params()?.get("name")?;
    match wire::string(name)?.as_ref() {
        SEARCH_TOOL => Some(GatewayTool::Search),
        CALL_TOOL => Some(GatewayTool::Call),
        _ => None,
    }
}

/// The tool list of a searching caller: the gateway's two tools, then what the session found
/// that the caller still sees.
pub fn list(request: &Request, session: Option<&Arc<Session>>) -> Bytes {
    let view = request.view();
    let found = session.map(|session| session.found()).unwrap_or_default();
    let mut tools: Vec<Value> = vec![search_definition(), call_definition()];
    tools.extend(
        found
            .iter()
            .filter_map(|name| view.tool_definition(name))
            .filter_map(|tool| serde_json::to_value(tool).ok()),
    );
    let mut result = json!({ "tools": tools });
    if request.era == Era::Modern {
        result["resultType"] = json!("complete");
        result["ttlMs"] = json!(0);
        result["cacheScope"] = json!("private");
    }
    wire::write::response(request.id(), &result.to_string())
}

/// Answers a `search_tools` call: the best matches among the tools the caller sees. The
/// session's own list grows by what was found, and its client is told.
pub async fn search(request: &Request, session: Option<&Arc<Session>>, store: &Store) -> Bytes {
    let id = request.id();
    let arguments = arguments(request);
    let Some(query) = arguments
        .as_ref()
        .and_then(|arguments| arguments.get("query"))
        .and_then(Value::as_str)
        .filter(|query| !query.trim().is_empty())
    else {
        return invalid(id, "`query` must be a string that is not empty");
    };
    let limit = match arguments
        .as_ref()
        .and_then(|arguments| arguments.get("limit"))
    {
        None | Some(Value::Null) => DEFAULT_RESULTS,
        Some(limit) => match limit.as_u64() {
            Some(n @ 1..) if n as usize <= MAX_RESULTS => n as usize,
            _ => {
                return invalid(
                    id,
                    &format!("`limit` must be an integer from 1 to {MAX_RESULTS}"),
                );
            }
        },
    };
    let view = request.view();
    let model = request.live.config.catalog.search_model.as_ref();
    let model = model.map(|model| &model.0);
    if let Some(model) = model {
        embed_in_background(view, model);
    }
    // The first search of a snapshot builds its index (a third of a second for 50,000 tools),
    // and with a model the query's vector takes a few milliseconds: the worker's other tasks
    // move to other threads meanwhile.
    let multi_threaded = tokio::runtime::Handle::try_current()
        .is_ok_and(|handle| handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    let search = || view.search_tools(query, limit, model.map(|model| &**model));
    let matches = if multi_threaded {
        tokio::task::block_in_place(search)
    } else {
        search()
    };
    let names: Vec<&str> = matches.iter().map(|tool| &*tool.name).collect();
    if let Some(session) = session
        && session.find(names.iter().copied())
    {
        let changed =
            Bytes::from_static(br#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#);
        let _ = session.home().outlet.offer(changed);
        let ttl = request.live.config.server.session_idle_timeout;
        keep_found(session, store, ttl).await;
    }
    let found: Vec<Value> = matches.iter().map(|tool| summary(tool)).collect();
    let structured = json!({ "tools": found });
    let text = if found.is_empty() {
        format!("No tool matches `{query}`. Try other words.")
    } else {
        let lines: Vec<String> = matches.iter().map(|tool| line(tool)).collect();
        lines.join("\n")
    };
    let mut result = json!({
        "content": [{ "type": "text", "text": text }],
        "structuredContent": structured,
        "isError": false,
    });
    if request.era == Era::Modern {
        result["resultType"] = json!("complete");
    }
    wire::write::response(id, &result.to_string())
}

/// The `tools/call` a `call_tool` call stands for: the named tool with the given arguments,
/// and the call's `_meta` and `task`; or the error answer if it names none.
pub fn unwrap_call(request: &Request) -> Result<Request, Bytes> {
    let id = request.id();
    let arguments = arguments(request);
    let Some(name) = arguments
        .as_ref()
        .and_then(|arguments| arguments.get("name"))
        .and_then(Value::as_str)
    else {
        return Err(invalid(id, "`name` must be the name of a tool to call"));
    };
    if name == CALL_TOOL || name == SEARCH_TOOL {
        return Err(invalid(
            id,
            "`name` must be a tool found with `search_tools`",
        ));
    }
    let inner_arguments = match arguments.as_ref().and_then(|a| a.get("arguments")) {
        None | Some(Value::Null) => json!({}),
        Some(object @ Value::Object(_)) => object.clone(),
        Some(_) => return Err(invalid(id, "`arguments` must be an object")),
    };
    let mut params = json!({ "name": name, "arguments": inner_arguments });
    let outer = request.message.params();
    for key in ["_meta", "task"] {
        if let Some(value) = outer.and_then(|params| params.get(key)) {
            params[key] = serde_json::from_str(value.get()).unwrap_or(Value::Null);
        }
    }
    Request::within(request, "tools/call", params.to_string().as_bytes())
        .ok_or_else(|| invalid(id, "the call cannot be read"))
}

fn arguments(request: &Request) -> Option<Value> {
    let arguments = request.message.params()?.get("arguments")?;
    serde_json::from_str(arguments.get()).ok()
}

fn invalid(id: &str, message: &str) -> Bytes {
    wire::write::error(Some(id), -32602, message, None)
}

/// What a search shows of a tool.
fn summary(tool: &ListedTool) -> Value {
    let mut shown = json!({
        "name": tool.name,
        "description": tool.description,
        "inputSchema": tool.input_schema,
    });
    if let Some(title) = &tool.title {
        shown["title"] = json!(title);
    }
    shown
}

/// A found tool as one line of the text result, enough to call it: its name, its parameters
/// with their types (`?` after an optional one) and the first sentence of its description.
/// The structured result has the whole definition.
fn line(tool: &ListedTool) -> String {
    let schema = &tool.input_schema;
    let required: Vec<&str> = (schema.get("required").and_then(Value::as_array))
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let parameters: Vec<String> = (schema.get("properties").and_then(Value::as_object))
        .map(|properties| {
            (properties.iter())
                .map(|(name, property)| {
                    let optional = if required.contains(&name.as_str()) {
                        ""
                    } else {
                        "?"
                    };
                    format!("{name}{optional}: {}", type_of(property))
                })
                .collect()
        })
        .unwrap_or_default();
    let description = tool.description.as_deref().unwrap_or_default();
    let summary = first_sentence(description);
    let separator = if summary.is_empty() { "" } else { " — " };
    format!(
        "{}({}){separator}{summary}",
        tool.name,
        parameters.join(", ")
    )
}

/// A parameter's type, shortly: `string`, `number|null`, `"asc"|"desc"`, `string[]`, `any`.
fn type_of(schema: &Value) -> String {
    if let Some(values) = schema.get("enum").and_then(Value::as_array)
        && !values.is_empty()
        && values.len() <= MAX_ENUM_SHOWN
    {
        let values: Vec<String> = values.iter().map(Value::to_string).collect();
        return values.join("|");
    }
    match schema.get("type") {
        Some(Value::String(kind)) if kind == "array" => {
            let items = schema
                .get("items")
                .map_or_else(|| "any".to_owned(), type_of);
            match items.contains('|') {
                true => format!("({items})[]"),
                false => format!("{items}[]"),
            }
        }
        Some(Value::String(kind)) => kind.clone(),
        Some(Value::Array(kinds)) => {
            let kinds: Vec<&str> = kinds.iter().filter_map(Value::as_str).collect();
            kinds.join("|")
        }
        _ => "any".to_owned(),
    }
}

/// The most enumerated values a parameter's type shows (more: its base type).
const MAX_ENUM_SHOWN: usize = 6;
/// The longest summary of a found tool, in characters.
const MAX_SUMMARY: usize = 160;

/// The first sentence (or line) of `text`, at most `MAX_SUMMARY` characters. A period ends a
/// sentence where a space or a line follows it, unless it ends an abbreviation ("e.g.").
fn first_sentence(text: &str) -> String {
    let text = text.trim();
    let mut end = text.find('\n').unwrap_or(text.len());
    for (at, _) in text[..end].match_indices(". ") {
        let before = text[..at]
            .rsplit(char::is_whitespace)
            .next()
            .unwrap_or_default();
        if !ABBREVIATIONS.contains(&before.to_lowercase().as_str()) {
            end = at + 1;
            break;
        }
    }
    let sentence = text[..end].trim_end();
    match sentence.char_indices().nth(MAX_SUMMARY) {
        Some((cut, _)) => format!("{}…", sentence[..cut].trim_end()),
        None => sentence.to_owned(),
    }
}

/// Words before a period that does not end a sentence (without that period).
const ABBREVIATIONS: &[&str] = &["e.g", "i.e", "etc", "vs", "(e.g", "(i.e", "approx", "incl"];

fn search_definition() -> Value {
    json!({
        "name": SEARCH_TOOL,
        "title": "Search tools",
        "description": "Finds tools of the servers behind this gateway by what they do. \
            Give a few words (for example \"read a file\" or \"create a GitHub issue\"); \
            the best matches come back with their names, descriptions and input schemas. \
            Found tools are added to this session's tool list, and can be called by name \
            directly or through call_tool.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What the tool should do, in a few words"},
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_RESULTS, "description": "How many tools to return (5 unless given)"}
            },
            "required": ["query"]
        },
        "annotations": {"readOnlyHint": true, "openWorldHint": false}
    })
}

fn call_definition() -> Value {
    json!({
        "name": CALL_TOOL,
        "title": "Call a tool",
        "description": "Calls a tool found with search_tools, by its name, with its arguments \
            (as its input schema describes them).",
        "inputSchema": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "The tool's name, as search_tools gave it"},
                "arguments": {"type": "object", "description": "The tool's arguments"}
            },
            "required": ["name"]
        }
    })
}

/// Keeps what `session`'s client found in the store, where sessions are kept there, for
/// the replica that serves it next (or this one after a restart).
async fn keep_found(session: &Session, store: &Store, ttl: std::time::Duration) {
    let Some(hash) = session.shared_hash() else {
        return;
    };
    let found = session.found();
    let names: Vec<&str> = found.iter().map(|name| &**name).collect();
    if let Err(error) = store.keep_found_tools(hash, &names, ttl).await {
        tracing::warn!(%error, "the tools a session found were not kept in the store");
    }
}

/// Gives `session`, adopted from the store, the tools its client found where it was served
/// before.
pub async fn recall_found(session: &Session, store: &Store) {
    let Some(hash) = session.shared_hash() else {
        return;
    };
    match store.found_tools(hash).await {
        Ok(found) => {
            session.find(found.iter().map(String::as_str));
        }
        Err(error) => {
            tracing::warn!(%error, "the tools a session found elsewhere could not be read");
        }
    }
}

/// Makes the vectors of `view`'s tools on a blocking thread, unless they are made or being
/// made (a view of a published snapshot mostly finds them made already, by text).
fn embed_in_background(view: &Arc<crate::catalog::Catalog>, model: &Arc<SearchModel>) {
    if view.meanings_ready() || !view.claim_meanings() {
        return;
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let (view, model) = (view.clone(), model.clone());
    runtime.spawn_blocking(move || view.prepare_search(Some(&model)));
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_found_tool_is_one_line_with_its_parameters_and_first_sentence() {
        let tool = ListedTool::from_value(json!({
            "name": "gh__list_issues",
            "description": "List issues of a repository. Paginated: pass `page` for more.",
            "inputSchema": {"type": "object", "properties": {
                "repo": {"type": "string"},
                "state": {"type": "string", "enum": ["open", "closed", "all"]},
                "labels": {"type": "array", "items": {"type": "string"}},
                "limit": {"type": ["integer", "null"]},
                "filter": {}
            }, "required": ["repo"]}
        }))
        .unwrap();
        assert_eq!(
            line(&tool),
            "gh__list_issues(repo: string, state?: \"open\"|\"closed\"|\"all\", labels?: string[], \
             limit?: integer|null, filter?: any) — List issues of a repository."
        );
        let bare = ListedTool::from_value(json!({
            "name": "ping",
            "inputSchema": {"type": "object"}
        }))
        .unwrap();
        assert_eq!(line(&bare), "ping()");
    }

    #[test]
    fn a_summary_is_the_first_sentence_or_line_cut_to_its_length() {
        assert_eq!(
            first_sentence("Reads a file.\nLong details"),
            "Reads a file."
        );
        assert_eq!(first_sentence("v1.2 of the API. More"), "v1.2 of the API.");
        assert_eq!(
            first_sentence("Fetch a URL, e.g. a page. Then more"),
            "Fetch a URL, e.g. a page."
        );
        assert_eq!(first_sentence("Ends here.\nNext line"), "Ends here.");
        assert_eq!(first_sentence("  no stop at all  "), "no stop at all");
        let long = "é".repeat(MAX_SUMMARY + 10);
        let cut = first_sentence(&long);
        assert_eq!(cut.chars().count(), MAX_SUMMARY + 1);
        assert!(cut.ends_with('…'));
    }
}
