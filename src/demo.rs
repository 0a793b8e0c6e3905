//! `switchyard demo-server`: a small MCP server that ships with Switchyard, so the default
//! configuration serves something real on a fresh machine. It speaks stdio, or streamable HTTP
//! with `--http ADDR` (the fast upstream fixture of `switchyard bench`).
//!
//! It offers a few useful tools (text, arithmetic, time, a counter that keeps per-process state,
//! a slow task that reports progress), a resource, a resource template and a prompt. For the
//! benches' cost curves it can also list many more tools that send back their text
//! (`--extra-tools`), and serve several servers on one address (`--servers`).

use std::{
    sync::{
        Arc,
        atomic::{AtomicI64, Ordering},
    },
    time::Duration,
};

use rmcp::{
    ErrorData, RoleServer, ServerHandler, ServiceExt,
    handler::server::{
        router::{
            prompt::PromptRouter,
            tool::{ToolRoute, ToolRouter},
        },
        tool::ToolCallContext,
        wrapper::{Json, Parameters},
    },
    model::{
        CallToolResponse, CallToolResult, ContentBlock, Implementation,
        ListResourceTemplatesResult, ListResourcesResult, PaginatedRequestParams,
        ProgressNotificationParam, PromptMessage, ReadResourceRequestParams, ReadResourceResponse,
        ReadResourceResult, Resource, ResourceContents, ResourceTemplate, Role, ServerCapabilities,
        ServerConfig, Tool,
    },
    prompt, prompt_handler, prompt_router, schemars,
    service::RequestContext,
    tool, tool_handler, tool_router,
};
use serde::{Deserialize, Serialize};

const ABOUT_URI: &str = "demo://about";
const GREETING_TEMPLATE: &str = "demo://greeting/{name}";
const ABOUT: &str = "Switchyard is an MCP gateway: it connects to many MCP servers and serves \
their merged, prefixed catalog of tools, prompts and resources as one streamable-HTTP endpoint. \
This text comes from `switchyard demo-server`, a stdio server that ships with it.";

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct EchoArgs {
    /// The text to send back.
    pub text: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct AddArgs {
    pub a: f64,
    pub b: f64,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct Sum {
    pub sum: f64,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct TextArgs {
    /// The text to count.
    pub text: String,
}

#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct TextStats {
    pub characters: usize,
    pub words: usize,
    pub lines: usize,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct SlowArgs {
    /// How many seconds to take (at most 60).
    pub seconds: u32,
}

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SummarizeArgs {
    /// The text to summarize.
    pub text: String,
    /// `short` (one sentence) or `detailed` (a few bullet points).
    pub style: Option<String>,
}

/// The demo server. Its counter lives as long as the process.
#[derive(Clone)]
pub struct DemoServer {
    counter: Arc<AtomicI64>,
    tool_router: ToolRouter<Self>,
    prompt_router: PromptRouter<Self>,
}

impl Default for DemoServer {
    fn default() -> Self {
        Self::new()
    }
}

#[tool_router]
impl DemoServer {
    pub fn new() -> Self {
        Self {
            counter: Arc::new(AtomicI64::new(0)),
            tool_router: Self::tool_router(),
            prompt_router: Self::prompt_router(),
        }
    }

    /// The demo server with `extra` tools listed beside its own.
    fn with_tools(mut self, extra: &[ToolRoute<DemoServer>]) -> Self {
        for route in extra {
            self.tool_router.add_route(route.clone());
        }
        self
    }

    #[tool(description = "Send back the given text unchanged.")]
    fn echo(&self, Parameters(args): Parameters<EchoArgs>) -> String {
        args.text
    }

    #[tool(description = "Add two numbers.", annotations(read_only_hint = true))]
    fn add(&self, Parameters(AddArgs { a, b }): Parameters<AddArgs>) -> Json<Sum> {
        Json(Sum { sum: a + b })
    }

    #[tool(description = "Count the characters, words and lines of a text.")]
    fn text_stats(&self, Parameters(TextArgs { text }): Parameters<TextArgs>) -> Json<TextStats> {
        Json(TextStats {
            characters: text.chars().count(),
            words: text.split_whitespace().count(),
            lines: text.lines().count(),
        })
    }

    #[tool(description = "The current time as seconds since the Unix epoch, and in UTC.")]
    fn now(&self) -> String {
        let secs = crate::clock::now_seconds();
        format!("{secs} ({})", format_utc(secs))
    }

    #[tool(
        description = "Add one to this server's counter and return the new value. \
        The counter is kept per server process."
    )]
    fn increment(&self) -> String {
        (self.counter.fetch_add(1, Ordering::SeqCst) + 1).to_string()
    }

    #[tool(description = "Wait the given number of seconds, reporting progress every second.")]
    async fn slow_task(
        &self,
        Parameters(SlowArgs { seconds }): Parameters<SlowArgs>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let seconds = seconds.min(60);
        let token = context.meta.get_progress_token();
        for done in 1..=seconds {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                _ = context.ct.cancelled() => {
                    return Ok(CallToolResult::error(vec![ContentBlock::text("cancelled")]));
                }
            }
            if let Some(token) = &token {
                let progress = ProgressNotificationParam::new(token.clone(), f64::from(done))
                    .with_total(f64::from(seconds))
                    .with_message(format!("{done} of {seconds} seconds"));
                let _ = context.peer.notify_progress(progress).await;
            }
        }
        Ok(CallToolResult::success(vec![ContentBlock::text(format!(
            "waited {seconds} seconds"
        ))]))
    }
}

#[prompt_router]
impl DemoServer {
    /// Ask the model to summarize a text.
    #[prompt(name = "summarize")]
    async fn summarize(&self, Parameters(args): Parameters<SummarizeArgs>) -> Vec<PromptMessage> {
        let style = match args.style.as_deref() {
            Some("detailed") => "in three to five bullet points",
            _ => "in one sentence",
        };
        vec![PromptMessage::new_text(
            Role::User,
            format!("Summarize the following text {style}:\n\n{}", args.text),
        )]
    }
}

#[tool_handler(router = self.tool_router)]
#[prompt_handler(router = self.prompt_router)]
impl ServerHandler for DemoServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_prompts()
                .enable_resources()
                .enable_tools()
                .build(),
        )
        .with_server_info(Implementation::new(
            "switchyard-demo",
            env!("CARGO_PKG_VERSION"),
        ))
        .with_instructions(
            "Demo tools: echo, add, text_stats, now, increment, slow_task. \
             Read demo://about for what Switchyard is.",
        )
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let about = Resource::new(ABOUT_URI, "about")
            .with_title("About Switchyard")
            .with_mime_type("text/plain");
        Ok(ListResourcesResult::with_all_items(vec![about]))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let greeting = ResourceTemplate::new(GREETING_TEMPLATE, "greeting")
            .with_title("A greeting for someone")
            .with_mime_type("text/plain");
        Ok(ListResourceTemplatesResult::with_all_items(vec![greeting]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let uri = request.uri;
        let text = if uri == ABOUT_URI {
            ABOUT.to_owned()
        } else if let Some(name) = uri.strip_prefix("demo://greeting/") {
            format!("Hello, {name}!")
        } else {
            return Err(ErrorData::resource_not_found(
                format!("no resource `{uri}`"),
                None,
            ));
        };
        Ok(ReadResourceResult::new(vec![ResourceContents::text(text, uri)]).into())
    }
}

/// Serves the demo server on stdin/stdout until the client disconnects.
pub async fn serve_stdio() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let service = DemoServer::new().serve(rmcp::transport::stdio()).await?;
    service.waiting().await?;
    Ok(())
}

/// How many demo servers one address serves, and with how many more tools each.
#[derive(Debug, Clone, Copy, Default)]
pub struct Fleet {
    /// Servers beside the one at `/mcp`, at `/mcp/1` … `/mcp/N-1` (0 or 1: only `/mcp`).
    pub servers: usize,
    /// More tools each server lists beside its own: `tool_0`, `tool_1`, … (each sends back its
    /// `text`).
    pub extra_tools: usize,
}

/// Serves the demo server over streamable HTTP at `/mcp` on `listener` (sessions for clients
/// that `initialize`, stateless 2026-07-28 otherwise) until the listener fails; `fleet`: more
/// servers at `/mcp/1` … and more tools on each.
pub async fn serve_http(listener: tokio::net::TcpListener, fleet: Fleet) -> std::io::Result<()> {
    use rmcp::transport::{
        StreamableHttpServerConfig, StreamableHttpService,
        streamable_http_server::session::local::LocalSessionManager,
    };
    let extra: Arc<[ToolRoute<DemoServer>]> = (0..fleet.extra_tools).map(extra_tool).collect();
    let service = || {
        let extra = extra.clone();
        StreamableHttpService::new(
            move || Ok(DemoServer::new().with_tools(&extra)),
            Arc::new(LocalSessionManager::default()),
            StreamableHttpServerConfig::default(),
        )
    };
    let mut app = axum::Router::new().nest_service("/mcp", service());
    for index in 1..fleet.servers {
        app = app.nest_service(&format!("/mcp/{index}"), service());
    }
    // Like production servers (Node, uvicorn, Go), answer without Nagle's algorithm: axum keeps
    // it on by default, and a keep-alive client then waits ~40 ms for each SSE reply.
    let listener = axum::serve::ListenerExt::tap_io(listener, |stream| {
        let _ = stream.set_nodelay(true);
    });
    axum::serve(listener, app).await
}

/// Extra tool number `index`: it sends back its `text`.
fn extra_tool(index: usize) -> ToolRoute<DemoServer> {
    let schema = serde_json::json!({
        "type": "object",
        "properties": { "text": { "type": "string", "description": "The text to send back." } },
        "required": ["text"],
    });
    let serde_json::Value::Object(schema) = schema else {
        unreachable!("the schema is an object");
    };
    let tool = Tool::new(
        format!("tool_{index}"),
        format!("Extra demo tool number {index}: sends back the given text unchanged."),
        Arc::new(schema),
    );
    ToolRoute::new_dyn(tool, |context: ToolCallContext<'_, DemoServer>| {
        let text = context
            .arguments
            .as_ref()
            .and_then(|arguments| arguments.get("text"))
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_owned();
        Box::pin(async move {
            Ok(CallToolResponse::Complete(CallToolResult::success(vec![
                ContentBlock::text(text),
            ])))
        })
    })
}

/// `YYYY-MM-DD hh:mm:ss` for `secs` since the epoch (UTC, proleptic Gregorian).
fn format_utc(secs: u64) -> String {
    let days = secs / 86_400;
    let rem = secs % 86_400;
    // Civil-from-days (Howard Hinnant's algorithm), valid for all dates after 1970.
    let z = days as i64 + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::format_utc;

    #[test]
    fn formats_utc_dates() {
        assert_eq!(format_utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(format_utc(951_782_400), "2000-02-29 00:00:00 UTC");
        assert_eq!(format_utc(1_795_262_400), "2026-11-21 12:00:00 UTC");
    }
}
