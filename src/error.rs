//! Errors of a proxied request, each knowing which side caused it, and the one place they become
//! JSON-RPC errors on the wire.
//!
//! Upstream JSON-RPC errors pass through with their code, message and data; everything else gets
//! a message that names the tool, prompt, resource or upstream involved and never internals.

use rmcp::{
    ErrorData, ServiceError,
    model::{ErrorCode, JsonObject},
};
use serde_json::{Value, json};

use crate::names::UpstreamName;

/// Who is at fault, which decides the error code, log level and (later) metric label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The client asked for something that does not exist or is malformed.
    Downstream,
    /// An upstream server failed or answered with an error.
    Upstream,
    /// Switchyard itself.
    Gateway,
}

impl Side {
    pub fn as_str(self) -> &'static str {
        match self {
            Side::Downstream => "downstream",
            Side::Upstream => "upstream",
            Side::Gateway => "gateway",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    #[error("unknown tool `{0}`")]
    UnknownTool(String),
    #[error("unknown prompt `{0}`")]
    UnknownPrompt(String),
    #[error("unknown resource `{0}`")]
    UnknownResource(String),
    #[error("{0}")]
    InvalidParams(String),
    #[error("upstream `{upstream}` is unavailable: {reason}")]
    Unavailable {
        upstream: UpstreamName,
        reason: String,
    },
    #[error("upstream `{upstream}` failed: {reason}")]
    UpstreamFailed {
        upstream: UpstreamName,
        reason: String,
    },
    /// A JSON-RPC error the upstream answered with; passed on as it is.
    #[error("upstream `{upstream}` answered with error {}: {}", .error.code.0, .error.message)]
    UpstreamRpc {
        upstream: UpstreamName,
        error: ErrorData,
    },
    /// The upstream did not answer in time; `detail` says which timeout and what was done.
    #[error("upstream `{upstream}` {detail}")]
    TimedOut {
        upstream: UpstreamName,
        detail: String,
        timeout: std::time::Duration,
    },
    /// The client cancelled the request (its answer is dropped, but the code path needs one).
    #[error("the request was cancelled")]
    Cancelled,
    #[error("{0}")]
    Internal(String),
}

impl GatewayError {
    /// The error for a failed request to `upstream`.
    pub fn from_service(upstream: &UpstreamName, error: ServiceError) -> Self {
        match error {
            ServiceError::McpError(error) => Self::UpstreamRpc {
                upstream: upstream.clone(),
                error,
            },
            ServiceError::Timeout { timeout } => Self::UpstreamFailed {
                upstream: upstream.clone(),
                reason: format!("no answer within {}s", timeout.as_secs_f64()),
            },
            ServiceError::TransportClosed => Self::UpstreamFailed {
                upstream: upstream.clone(),
                reason: "the connection closed before it answered".into(),
            },
            other => Self::UpstreamFailed {
                upstream: upstream.clone(),
                reason: other.to_string(),
            },
        }
    }

    pub fn side(&self) -> Side {
        match self {
            Self::UnknownTool(_)
            | Self::UnknownPrompt(_)
            | Self::UnknownResource(_)
            | Self::InvalidParams(_)
            | Self::Cancelled => Side::Downstream,
            Self::Unavailable { .. }
            | Self::UpstreamFailed { .. }
            | Self::UpstreamRpc { .. }
            | Self::TimedOut { .. } => Side::Upstream,
            Self::Internal(_) => Side::Gateway,
        }
    }

    /// The JSON-RPC error sent to the client.
    pub fn into_error_data(self) -> ErrorData {
        let message = self.to_string();
        match self {
            Self::UnknownTool(name) | Self::UnknownPrompt(name) => {
                ErrorData::invalid_params(message, Some(json!({ "name": name })))
            }
            Self::UnknownResource(uri) => {
                ErrorData::resource_not_found(message, Some(json!({ "uri": uri })))
            }
            Self::InvalidParams(_) => ErrorData::invalid_params(message, None),
            Self::Cancelled => ErrorData::invalid_request(message, None),
            Self::UpstreamRpc { error, .. } => error,
            Self::Unavailable { upstream, .. } | Self::UpstreamFailed { upstream, .. } => {
                ErrorData::new(
                    ErrorCode::INTERNAL_ERROR,
                    message,
                    Some(upstream_data(&upstream)),
                )
            }
            Self::TimedOut {
                upstream, timeout, ..
            } => {
                let mut data = upstream_data(&upstream);
                data["timeoutSeconds"] = json!(timeout.as_secs_f64());
                ErrorData::new(ErrorCode::INTERNAL_ERROR, message, Some(data))
            }
            Self::Internal(_) => ErrorData::internal_error(message, None),
        }
    }
}

fn upstream_data(upstream: &UpstreamName) -> Value {
    let mut data = JsonObject::new();
    data.insert("upstream".into(), Value::String(upstream.to_string()));
    Value::Object(data)
}

impl From<GatewayError> for ErrorData {
    fn from(error: GatewayError) -> Self {
        error.into_error_data()
    }
}
