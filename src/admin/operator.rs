//! `/mcp` on the admin listener: the operator's tools as an MCP server, so that an operator
//! can run the gateway from an MCP client — its status and servers, a reload, an upstream
//! reconnected, listed again, switched off or on, pinned tools' changes looked at and
//! approved, tool calls waiting for approval allowed or denied. Only on the admin listener
//! and behind its guard: the admin token, its hosts, no page of another origin. Each tool is the admin API's own handler, so that it checks,
//! audits and answers exactly as the API does: a refusal is a tool error with the API's
//! message. Stateless: each request stands alone, answered with JSON.

use std::sync::Arc;

use axum::{
    body::to_bytes,
    extract::{Path, State},
    response::{IntoResponse, Response},
};
use rmcp::{
    ErrorData, ServerHandler,
    handler::server::{router::tool::ToolRouter, wrapper::Parameters},
    model::{CallToolResult, ContentBlock, Implementation, ServerCapabilities, ServerConfig},
    schemars, tool, tool_handler, tool_router,
    transport::{
        StreamableHttpServerConfig, StreamableHttpService,
        streamable_http_server::session::local::LocalSessionManager,
    },
};
use serde::Deserialize;

use super::{Admin, api, approvals, tools, upstreams};

/// The most of an admin answer a tool result carries.
const MOST: usize = 4 << 20;

/// The operator's MCP server, for the admin application to mount.
pub fn service(admin: Admin) -> StreamableHttpService<Operator, LocalSessionManager> {
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        // The admin listener's guard has checked the host and the origin already.
        .disable_allowed_hosts();
    StreamableHttpService::new(
        move || Ok(Operator::new(admin.clone())),
        Arc::new(LocalSessionManager::default()),
        config,
    )
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct Named {
    /// The upstream's name, as configured.
    pub name: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct Approval {
    /// The upstream whose pinned tools' changes are approved.
    pub upstream: String,
    /// One tool, by the upstream's own name for it; without it, every change of the upstream.
    pub tool: Option<String>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct CallDecision {
    /// The waiting call's id, as listed.
    pub id: String,
    #[serde(flatten)]
    pub decision: approvals::Decide,
}

#[derive(Clone)]
pub struct Operator {
    admin: Admin,
    tool_router: ToolRouter<Self>,
}

impl Operator {
    fn new(admin: Admin) -> Self {
        Self {
            admin,
            tool_router: Self::tool_router() + Self::approval_router(),
        }
    }

    fn state(&self) -> State<Admin> {
        State(self.admin.clone())
    }
}

/// The admin API's answer as a tool result: its JSON as text, an error status as a tool error.
async fn result(response: Response) -> Result<CallToolResult, ErrorData> {
    let status = response.status();
    let body = to_bytes(response.into_body(), MOST)
        .await
        .map_err(|error| ErrorData::internal_error(error.to_string(), None))?;
    let text = String::from_utf8_lossy(&body).into_owned();
    let content = vec![ContentBlock::text(text)];
    Ok(if status.is_success() {
        CallToolResult::success(content)
    } else {
        CallToolResult::error(content)
    })
}

#[tool_router]
impl Operator {
    #[tool(
        description = "The gateway's status: version, configuration, traffic, every upstream's \
                       state, upstreams switched off, tool changes waiting, recent errors and \
                       reloads.",
        annotations(read_only_hint = true)
    )]
    async fn status(&self) -> Result<CallToolResult, ErrorData> {
        result(api::status(self.state()).await.into_response()).await
    }

    #[tool(
        description = "Every upstream server in full: state, server info, capabilities, \
                       instructions, and its tools, prompts, resources and templates.",
        annotations(read_only_hint = true)
    )]
    async fn servers(&self) -> Result<CallToolResult, ErrorData> {
        result(api::servers(self.state()).await.into_response()).await
    }

    #[tool(
        description = "Reload the configuration file; a file with problems is refused with \
                       every problem and nothing changes."
    )]
    async fn reload(&self) -> Result<CallToolResult, ErrorData> {
        result(api::reload(self.state()).await).await
    }

    #[tool(
        description = "Connect an upstream again from scratch (also one that gave up after its \
                       restart attempts)."
    )]
    async fn reconnect(
        &self,
        Parameters(Named { name }): Parameters<Named>,
    ) -> Result<CallToolResult, ErrorData> {
        result(upstreams::reconnect(self.state(), Path(name)).await).await
    }

    #[tool(description = "Have an upstream list its tools, prompts and resources again now.")]
    async fn rediscover(
        &self,
        Parameters(Named { name }): Parameters<Named>,
    ) -> Result<CallToolResult, ErrorData> {
        result(upstreams::rediscover(self.state(), Path(name)).await).await
    }

    #[tool(
        description = "Switch an upstream off: its items leave the catalog, and it stays off \
                       across restarts until enabled.",
        annotations(destructive_hint = true)
    )]
    async fn disable(
        &self,
        Parameters(Named { name }): Parameters<Named>,
    ) -> Result<CallToolResult, ErrorData> {
        result(upstreams::disable(self.state(), Path(name)).await).await
    }

    #[tool(description = "Switch an upstream that was switched off on again.")]
    async fn enable(
        &self,
        Parameters(Named { name }): Parameters<Named>,
    ) -> Result<CallToolResult, ErrorData> {
        result(upstreams::enable(self.state(), Path(name)).await).await
    }

    #[tool(
        description = "Pinned tools whose definitions changed (or that are new) and wait for \
                       approval, each with a diff.",
        annotations(read_only_hint = true)
    )]
    async fn held_tools(&self) -> Result<CallToolResult, ErrorData> {
        result(tools::held(self.state()).await).await
    }

    #[tool(
        description = "Approve the waiting definition of a pinned tool, or of all of an \
                          upstream's: they are served from now on."
    )]
    async fn approve_tools(
        &self,
        Parameters(Approval { upstream, tool }): Parameters<Approval>,
    ) -> Result<CallToolResult, ErrorData> {
        let state = self.state();
        let response = match tool {
            Some(tool) => tools::approve(state, Path((upstream, tool))).await,
            None => tools::approve_all(state, Path(upstream)).await,
        };
        result(response).await
    }
}

#[tool_router(router = approval_router)]
impl Operator {
    #[tool(
        description = "Tool calls waiting for an operator's approval, each with its user, tool, \
                       arguments (masked as configured), their SHA-256, and when it expires.",
        annotations(read_only_hint = true)
    )]
    async fn waiting_calls(&self) -> Result<CallToolResult, ErrorData> {
        result(approvals::list(self.state()).await).await
    }

    #[tool(
        description = "Allow (once) or deny a tool call waiting for approval, by its id; with \
                       `arguments_sha256`, only if its arguments are the ones looked at."
    )]
    async fn decide_call(
        &self,
        Parameters(CallDecision { id, decision }): Parameters<CallDecision>,
    ) -> Result<CallToolResult, ErrorData> {
        result(approvals::decide(self.state(), Path(id), axum::Json(decision)).await).await
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Operator {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(
                "switchyard-operator",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(
                "Operate this Switchyard gateway: look at its status and servers, reload its \
                 configuration, reconnect, rediscover, disable or enable an upstream, \
                 approve pinned tools' changes, and decide on tool calls waiting for \
                 approval.",
            )
    }
}
