//! The tools of the conformance fixture that work the same in both protocol eras, or use the
//! legacy era's server-to-client requests (sampling, elicitation) and log messages.

// Sampling and logging are deprecated by SEP-2577 but exercised by the 2025-11-25 suite.
#![allow(deprecated)]

use std::time::Duration;

use rmcp::{
    ErrorData, RoleServer,
    handler::server::wrapper::Parameters,
    model::{
        CallToolResult, ContentBlock, CreateMessageRequestParams, ElicitRequestParams,
        ElicitationSchema, LoggingLevel, LoggingMessageNotificationParam,
        ProgressNotificationParam, ResourceContents, SamplingMessage,
    },
    schemars,
    service::RequestContext,
    tool, tool_router,
};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{
    ConformanceServer,
    content::{PNG, WAV},
};

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct PromptArgs {
    /// The prompt to sample a completion for.
    pub prompt: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct MessageArgs {
    /// The message to show the user.
    pub message: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct RegionArgs {
    /// A region, also sent as the `Mcp-Param-Region` header.
    #[schemars(extend("x-mcp-header" = "Region"))]
    pub region: String,
}

fn text_result(text: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(text)])
}

/// An elicitation schema from its JSON form (the typed builders cannot say everything the
/// suite checks, such as defaults on every property kind).
fn schema(value: Value) -> Result<ElicitationSchema, ErrorData> {
    serde_json::from_value(value).map_err(|e| ErrorData::internal_error(e.to_string(), None))
}

/// Elicits with `schema` and describes the answer; failures are reported, not raised, since the
/// suite's client may refuse an answer it finds invalid.
async fn elicit(
    context: &RequestContext<RoleServer>,
    message: &str,
    requested_schema: ElicitationSchema,
) -> CallToolResult {
    let params = ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: message.to_owned(),
        requested_schema,
    };
    match context.peer.create_elicitation(params).await {
        Ok(answer) => text_result(format!(
            "User response: action={:?}, content={}",
            answer.action,
            answer.content.unwrap_or(Value::Null)
        )),
        Err(error) => text_result(format!("Elicitation failed: {error}")),
    }
}

#[tool_router(vis = "pub(super)")]
impl ConformanceServer {
    #[tool(description = "Returns a simple text response")]
    fn test_simple_text(&self) -> CallToolResult {
        text_result("This is a simple text response for testing.")
    }

    #[tool(description = "Returns an image")]
    fn test_image_content(&self) -> CallToolResult {
        CallToolResult::success(vec![ContentBlock::image(PNG, "image/png")])
    }

    #[tool(description = "Returns audio")]
    fn test_audio_content(&self) -> CallToolResult {
        CallToolResult::success(vec![ContentBlock::audio(WAV, "audio/wav")])
    }

    #[tool(description = "Returns an embedded resource")]
    fn test_embedded_resource(&self) -> CallToolResult {
        CallToolResult::success(vec![ContentBlock::resource(ResourceContents::text(
            "This is an embedded resource content.",
            "test://embedded-resource",
        ))])
    }

    #[tool(description = "Returns text, an image and an embedded resource")]
    fn test_multiple_content_types(&self) -> CallToolResult {
        let mut resource = ResourceContents::text(
            r#"{"test":"data","value":123}"#,
            "test://mixed-content-resource",
        );
        if let ResourceContents::TextResourceContents { mime_type, .. } = &mut resource {
            *mime_type = Some("application/json".into());
        }
        CallToolResult::success(vec![
            ContentBlock::text("Multiple content types test:"),
            ContentBlock::image(PNG, "image/png"),
            ContentBlock::resource(resource),
        ])
    }

    #[tool(description = "Sends three log messages while it runs")]
    async fn test_tool_with_logging(&self, context: RequestContext<RoleServer>) -> CallToolResult {
        for message in [
            "Tool execution started",
            "Tool processing data",
            "Tool execution completed",
        ] {
            let log = LoggingMessageNotificationParam::new(LoggingLevel::Info, json!(message));
            let _ = context.peer.notify_logging_message(log).await;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        text_result("Tool with logging executed successfully")
    }

    #[tool(description = "Reports progress in three steps, echoing the client's progress token")]
    async fn test_tool_with_progress(&self, context: RequestContext<RoleServer>) -> CallToolResult {
        let Some(token) = context.meta.get_progress_token() else {
            return text_result("no progress token");
        };
        for (step, progress) in [0.0, 50.0, 100.0].into_iter().enumerate() {
            let notification = ProgressNotificationParam::new(token.clone(), progress)
                .with_total(100.0)
                .with_message(format!("Completed step {} of 100", step * 50));
            let _ = context.peer.notify_progress(notification).await;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        text_result(serde_json::to_string(&token).unwrap_or_default())
    }

    #[tool(description = "Returns a tool error")]
    fn test_error_handling(&self) -> CallToolResult {
        CallToolResult::error(vec![ContentBlock::text(
            "This tool intentionally returns an error for testing",
        )])
    }

    #[tool(description = "Asks the client to sample a completion for the prompt")]
    async fn test_sampling(
        &self,
        Parameters(PromptArgs { prompt }): Parameters<PromptArgs>,
        context: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let params = CreateMessageRequestParams::new(vec![SamplingMessage::user_text(prompt)], 100);
        match context.peer.create_message(params).await {
            Ok(answer) => {
                let text = answer
                    .message
                    .content
                    .first()
                    .and_then(|c| c.as_text())
                    .map(|t| t.text.clone())
                    .unwrap_or_default();
                text_result(format!("LLM response: {text}"))
            }
            Err(error) => text_result(format!("Sampling failed: {error}")),
        }
    }

    #[tool(description = "Asks the user for a username and email address")]
    async fn test_elicitation(
        &self,
        Parameters(MessageArgs { message }): Parameters<MessageArgs>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let requested = schema(json!({
            "type": "object",
            "properties": {
                "username": {"type": "string", "description": "User's response"},
                "email": {"type": "string", "description": "User's email address"}
            },
            "required": ["username", "email"]
        }))?;
        Ok(elicit(&context, &message, requested).await)
    }

    #[tool(description = "Elicits with a default on every kind of property (SEP-1034)")]
    async fn test_elicitation_sep1034_defaults(
        &self,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let requested = schema(json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "default": "John Doe"},
                "age": {"type": "integer", "default": 30},
                "score": {"type": "number", "default": 95.5},
                "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
                "verified": {"type": "boolean", "default": true}
            }
        }))?;
        Ok(elicit(&context, "Please review your details", requested).await)
    }

    #[tool(description = "Elicits with every kind of enum (SEP-1330)")]
    async fn test_elicitation_sep1330_enums(
        &self,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let titled = |consts: [&str; 3], titles: [&str; 3]| {
            consts
                .iter()
                .zip(titles)
                .map(|(c, t)| json!({"const": c, "title": t}))
                .collect::<Vec<_>>()
        };
        let requested = schema(json!({
            "type": "object",
            "properties": {
                "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
                "titledSingle": {"type": "string", "oneOf": titled(
                    ["value1", "value2", "value3"],
                    ["First Option", "Second Option", "Third Option"])},
                "legacyEnum": {"type": "string", "enum": ["opt1", "opt2", "opt3"],
                    "enumNames": ["Option One", "Option Two", "Option Three"]},
                "untitledMulti": {"type": "array",
                    "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
                "titledMulti": {"type": "array", "items": {"anyOf": titled(
                    ["value1", "value2", "value3"],
                    ["First Choice", "Second Choice", "Third Choice"])}}
            }
        }))?;
        Ok(elicit(&context, "Please choose", requested).await)
    }

    #[tool(description = "Returns after a short pause (for SSE reconnection tests)")]
    async fn test_reconnection(&self) -> CallToolResult {
        tokio::time::sleep(Duration::from_millis(100)).await;
        text_result("Reconnection test completed")
    }

    #[tool(description = "Needs the client's sampling capability")]
    fn test_missing_capability(
        &self,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let sampling = context
            .client_capabilities()
            .is_some_and(|c| c.sampling.is_some());
        if !sampling {
            let mut required = rmcp::model::ClientCapabilities::default();
            required.sampling = Some(Default::default());
            return Err(ErrorData::missing_required_client_capability(required));
        }
        Ok(text_result("The client can sample"))
    }

    #[tool(description = "Sends a log message only when the client asked for a log level")]
    async fn test_logging_tool(&self, context: RequestContext<RoleServer>) -> CallToolResult {
        let legacy = context
            .protocol_version()
            .is_none_or(|v| v.has_initialize());
        let asked = context
            .meta
            .contains_key("io.modelcontextprotocol/logLevel");
        if legacy || asked {
            let log = LoggingMessageNotificationParam::new(LoggingLevel::Info, json!("logged"));
            let _ = context.peer.notify_logging_message(log).await;
        }
        text_result("Logging tool done")
    }

    #[tool(description = "Echoes a region that is also sent as the Mcp-Param-Region header")]
    fn test_x_mcp_header(
        &self,
        Parameters(RegionArgs { region }): Parameters<RegionArgs>,
    ) -> CallToolResult {
        text_result(format!("Region: {region}"))
    }

    #[tool(description = "Announces a change of the tool list")]
    async fn test_trigger_tool_change(&self) -> CallToolResult {
        self.announce(
            rmcp::model::ServerNotification::ToolListChangedNotification(Default::default()),
        )
        .await;
        text_result("Tool list change announced")
    }

    #[tool(description = "Announces a change of the prompt list")]
    async fn test_trigger_prompt_change(&self) -> CallToolResult {
        self.announce(
            rmcp::model::ServerNotification::PromptListChangedNotification(Default::default()),
        )
        .await;
        text_result("Prompt list change announced")
    }
}
