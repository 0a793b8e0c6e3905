//! Errors of a proxied request, each knowing which side caused it, and the one place they become
//! JSON-RPC errors on the wire.
//!
//! Upstream JSON-RPC errors pass through with their code, message and data; everything else gets
//! a message that names the tool, prompt, resource or upstream involved and never internals.

use bytes::Bytes;
use rmcp::{
    ErrorData, ServiceError,
    model::{ClientCapabilities, ErrorCode, JsonObject},
};
use serde_json::{Value, json};

use crate::{names::UpstreamName, protocol::Era, wire};

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
    /// The upstream needs a user to authorize Switchyard first, at `url`.
    #[error(
        "upstream `{upstream}` needs authorization: open {url} to authorize Switchyard (the link expires in {})",
        in_words(*.expires_in)
    )]
    AuthorizationRequired {
        upstream: UpstreamName,
        url: String,
        /// How long the link stays valid from now.
        expires_in: std::time::Duration,
        /// Names the link as a URL-mode elicitation.
        elicitation_id: String,
        /// The client takes URL-mode elicitations: the error is one (-32042).
        url_elicitation: bool,
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
            // Said in words a user can act on: rmcp's own texts name Rust types.
            ServiceError::TransportSend(error) => Self::UpstreamFailed {
                upstream: upstream.clone(),
                reason: format!("the request could not be sent to it ({})", error.error),
            },
            ServiceError::UnexpectedResponse => Self::UpstreamFailed {
                upstream: upstream.clone(),
                reason: "it sent something other than an answer to the request".into(),
            },
            ServiceError::Cancelled { .. } => Self::UpstreamFailed {
                upstream: upstream.clone(),
                reason: "the connection to it was being closed".into(),
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
            | Self::TimedOut { .. }
            | Self::AuthorizationRequired { .. } => Side::Upstream,
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
            Self::AuthorizationRequired {
                upstream,
                url,
                elicitation_id,
                url_elicitation,
                ..
            } => {
                let mut data = upstream_data(&upstream);
                if url_elicitation {
                    data["elicitations"] = json!([{
                        "mode": "url",
                        "elicitationId": elicitation_id,
                        "url": url,
                        "message": format!("Authorize Switchyard to use the upstream `{upstream}`."),
                    }]);
                    ErrorData::new(URL_ELICITATION_REQUIRED, message, Some(data))
                } else {
                    data["authorizationUrl"] = json!(url);
                    ErrorData::new(ErrorCode::INTERNAL_ERROR, message, Some(data))
                }
            }
            Self::Internal(_) => ErrorData::internal_error(message, None),
        }
    }

    /// The JSON-RPC error answer to request `id` (JSON text) of a client of `era`.
    pub fn answer(self, id: &str, era: Era) -> Bytes {
        let mut data = self.into_error_data();
        if era == Era::Modern && data.code == ErrorCode::RESOURCE_NOT_FOUND {
            // 2026-07-28 reports a missing resource as invalid params.
            data.code = ErrorCode::INVALID_PARAMS;
        }
        wire::write::error(Some(id), data.code.0, &data.message, data.data.as_ref())
    }

    /// This error as the client that made the request should get it: an authorization link
    /// as a URL-mode elicitation where the client takes those.
    pub fn for_client(self, capabilities: &ClientCapabilities) -> Self {
        match self {
            Self::AuthorizationRequired {
                upstream,
                url,
                expires_in,
                elicitation_id,
                ..
            } => Self::AuthorizationRequired {
                upstream,
                url,
                expires_in,
                elicitation_id,
                url_elicitation: capabilities
                    .elicitation
                    .as_ref()
                    .is_some_and(|e| e.url.is_some()),
            },
            other => other,
        }
    }
}

/// A duration as a person would say it: whole minutes from two minutes on (rounded to the
/// nearest), else seconds.
fn in_words(duration: std::time::Duration) -> String {
    let seconds = duration.as_secs();
    let (count, unit) = if seconds >= 120 {
        ((seconds + 30) / 60, "minute")
    } else {
        (seconds, "second")
    };
    let plural = if count == 1 { "" } else { "s" };
    format!("{count} {unit}{plural}")
}

/// MCP's "URL elicitation required" error: the request needs the user to visit a URL first.
pub const URL_ELICITATION_REQUIRED: ErrorCode = ErrorCode(-32042);

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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_authorization_error_says_how_long_its_link_lasts() {
        let error = |seconds| GatewayError::AuthorizationRequired {
            upstream: UpstreamName::new("files").unwrap(),
            url: "https://as.example.com/authorize".into(),
            expires_in: Duration::from_secs(seconds),
            elicitation_id: "e".into(),
            url_elicitation: false,
        };
        let says = |seconds| {
            let text = error(seconds).to_string();
            text[text.find("(the link").unwrap()..].to_owned()
        };
        assert_eq!(says(600), "(the link expires in 10 minutes)");
        assert_eq!(says(3599), "(the link expires in 60 minutes)");
        assert_eq!(says(119), "(the link expires in 119 seconds)");
        assert_eq!(says(1), "(the link expires in 1 second)");
    }
}
