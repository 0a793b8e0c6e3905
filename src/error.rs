//! Errors of a proxied request, each knowing which side caused it, and the one place they become
//! JSON-RPC errors on the wire.
//!
//! Upstream JSON-RPC errors pass through with their code, message and data; everything else gets
//! a message that names the tool, prompt, resource or upstream involved and never internals.

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

/// Failures that repeat, logged once per interval: the first of a kind is logged, the others
/// within `interval` are counted, and the count goes with the next one logged.
pub struct Repeats {
    interval: std::time::Duration,
    seen: dashmap::DashMap<String, (std::time::Instant, u64)>,
}

impl Repeats {
    pub fn new(interval: std::time::Duration) -> Self {
        Self {
            interval,
            seen: dashmap::DashMap::new(),
        }
    }

    /// Notes a failure of kind `key`: `Some(n)` if it is to be logged, `n` being how many of
    /// its kind were not since the last one that was; `None` if it is only counted.
    pub fn note(&self, key: &str) -> Option<u64> {
        let now = std::time::Instant::now();
        if let Some(mut entry) = self.seen.get_mut(key) {
            let (logged, unlogged) = &mut *entry;
            if now.duration_since(*logged) < self.interval {
                *unlogged += 1;
                return None;
            }
            let missed = std::mem::take(unlogged);
            *logged = now;
            return Some(missed);
        }
        self.seen.insert(key.to_owned(), (now, 0));
        Some(0)
    }
}

/// A failed request to an upstream, in words a user can act on: rmcp's own texts name Rust
/// types (`Transport [switchyard::upstream::inbound::Inbound<…>]`).
pub fn service_failure(error: &ServiceError) -> String {
    match error {
        ServiceError::McpError(error) => {
            format!("it answered with error {}: {}", error.code.0, error.message)
        }
        ServiceError::Timeout { timeout } => format!("no answer within {}s", timeout.as_secs_f64()),
        ServiceError::TransportClosed => "the connection closed before it answered".into(),
        ServiceError::TransportSend(error) => {
            format!(
                "the request could not be sent to it ({})",
                transport_cause(error)
            )
        }
        ServiceError::UnexpectedResponse => {
            "it sent something other than an answer to the request".into()
        }
        ServiceError::Cancelled { .. } => "the connection to it was being closed".into(),
        other => cause(other),
    }
}

/// What went wrong in an rmcp transport: the HTTP client's own error, when it is one (rmcp's
/// wrapper keeps it out of the chain of sources), else the deepest readable cause.
pub fn transport_cause(error: &rmcp::transport::DynamicTransportError) -> String {
    use rmcp::transport::streamable_http_client::StreamableHttpError;
    match error
        .error
        .downcast_ref::<StreamableHttpError<reqwest::Error>>()
    {
        Some(StreamableHttpError::Client(client)) => cause(client),
        _ => cause(&*error.error),
    }
}

/// What went wrong at the bottom of `error`: the deepest of its causes that reads as a
/// sentence (not a Rust type), without a URL (one may carry a secret in its query).
pub fn cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut chain = Vec::new();
    let mut next = Some(error);
    while let Some(error) = next {
        chain.push(error.to_string());
        next = error.source();
    }
    let readable = |text: &&String| !text.contains("::") && !text.contains("Transport [");
    let deepest = chain
        .iter()
        .rev()
        .find(readable)
        .cloned()
        .unwrap_or_else(|| "a transport error".to_owned());
    without_urls(&reworded(&deepest))
}

/// An error with its causes, each said once (a cause a message already quotes is not added
/// again): what actually went wrong, for a log or an upstream failure's text.
pub fn with_causes(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// Phrasings of the libraries below that name their own types, and what they mean in words.
const REWORDED: &[(&str, &str)] = &[
    (
        "could not parse JSON response as ServerJsonRpcMessage",
        "its answer is not a JSON-RPC message",
    ),
    (
        "received corrupt message of type InvalidContentType",
        "the TLS handshake failed: what came back is not TLS (does the URL's scheme match the server?)",
    ),
    (
        "connection closed: initialize response",
        "it closed the connection before answering initialize",
    ),
];

/// `text` with the phrasings that name a library's types said in words.
fn reworded(text: &str) -> String {
    REWORDED
        .iter()
        .fold(text.to_owned(), |text, (said, meant)| {
            text.replace(said, meant)
        })
}

/// `text` with every `http://…` or `https://…` (up to a space or a closing bracket) left out.
fn without_urls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("http://").or_else(|| rest.find("https://")) {
        out.push_str(&rest[..at]);
        out.push_str("the upstream's URL");
        let end = rest[at..]
            .find([' ', ')', ']', '"'])
            .map_or(rest.len(), |end| at + end);
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// "; the closest: `a`, `b`" after an unknown tool's name, when there are any.
fn closest_names(closest: &[String]) -> String {
    if closest.is_empty() {
        return String::new();
    }
    let names: Vec<String> = closest.iter().map(|name| format!("`{name}`")).collect();
    format!("; the closest: {}", names.join(", "))
}

#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// A tool name the caller's catalog does not have, with the names closest to it there.
    #[error("unknown tool `{name}`{}", closest_names(closest))]
    UnknownTool { name: String, closest: Vec<String> },
    #[error("unknown prompt `{0}`")]
    UnknownPrompt(String),
    #[error("unknown resource `{0}`")]
    UnknownResource(String),
    #[error("{0}")]
    InvalidParams(String),
    /// A tool call's arguments Switchyard does not pass on: they break the tool's input schema
    /// (every problem named), or cannot be checked at a bounded cost. Answered as the tool's
    /// own failure (`isError`), which a model reads and corrects, as 2025-11-25 asks of input
    /// validation errors.
    #[error("invalid arguments for tool `{tool}`:\n{}", bullets(.problems))]
    InvalidArguments { tool: String, problems: Vec<String> },
    /// A tool call that waits for a person's approval (`[[policy]] approval`) and did not get
    /// it: answered, too, as the tool's own failure, which a model reads.
    #[error("the call of tool `{tool}` was not run: it needs approval, and {reason}")]
    NotApproved { tool: String, reason: String },
    /// A tool call a guardrail (`[[guardrail]]`) kept from its upstream: its arguments hold
    /// what the guardrail blocks, its policy hook denied it, or the hook could not be asked and
    /// the guardrail fails closed. Answered, too, as the tool's own failure.
    #[error("the call of tool `{tool}` was not run: guardrail `{guardrail}` refused it: {reason}")]
    Refused {
        tool: String,
        guardrail: String,
        reason: String,
    },
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
            other => Self::UpstreamFailed {
                upstream: upstream.clone(),
                reason: service_failure(&other),
            },
        }
    }

    pub fn side(&self) -> Side {
        match self {
            Self::UnknownTool { .. }
            | Self::UnknownPrompt(_)
            | Self::UnknownResource(_)
            | Self::InvalidParams(_)
            | Self::InvalidArguments { .. }
            | Self::NotApproved { .. }
            | Self::Refused { .. }
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
            Self::UnknownTool { name, closest } => ErrorData::invalid_params(
                message,
                Some(json!({ "name": name, "closest": closest })),
            ),
            Self::UnknownPrompt(name) => {
                ErrorData::invalid_params(message, Some(json!({ "name": name })))
            }
            Self::UnknownResource(uri) => {
                ErrorData::resource_not_found(message, Some(json!({ "uri": uri })))
            }
            Self::InvalidParams(_) | Self::InvalidArguments { .. } => {
                ErrorData::invalid_params(message, None)
            }
            Self::NotApproved { .. } | Self::Refused { .. } => {
                ErrorData::invalid_request(message, None)
            }
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

    /// The answer to request `id` (JSON text) of a client of `era`: a JSON-RPC error, or, for
    /// arguments not passed on and calls not approved or refused, the tool's failed result.
    pub fn answer(self, id: &str, era: Era) -> wire::Answer {
        if let Self::InvalidArguments { .. } | Self::NotApproved { .. } | Self::Refused { .. } =
            &self
        {
            let result = serde_json::json!({
                "content": [{"type": "text", "text": self.to_string()}],
                "isError": true,
            });
            return wire::Answer {
                message: wire::write::response(id, &result.to_string()),
                outcome: wire::Outcome::ToolError,
            };
        }
        let mut data = self.into_error_data();
        if era == Era::Modern && data.code == ErrorCode::RESOURCE_NOT_FOUND {
            // 2026-07-28 reports a missing resource as invalid params.
            data.code = ErrorCode::INVALID_PARAMS;
        }
        wire::Answer::error_with(id, data.code.0, &data.message, data.data.as_ref())
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

/// Each of `problems` on a line of its own, as a list.
fn bullets(problems: &[String]) -> String {
    let lines: Vec<String> = problems
        .iter()
        .map(|problem| format!("- {problem}"))
        .collect();
    lines.join("\n")
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

    /// A wrapper that names a Rust type, as rmcp's transport errors do, around a cause.
    #[derive(Debug)]
    struct Typed(std::io::Error);

    impl std::fmt::Display for Typed {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("Transport [switchyard::upstream::inbound::Inbound<rmcp::X>] error")
        }
    }

    impl std::error::Error for Typed {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn a_cause_names_no_type_and_no_url() {
        let refused = Typed(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "Connection refused (os error 111)",
        ));
        assert_eq!(cause(&refused), "Connection refused (os error 111)");
        let with_url = std::io::Error::other(
            "error sending request for url (http://h:1/mcp?api_key=secret) after 2 tries",
        );
        let text = cause(&with_url);
        assert!(!text.contains("secret") && !text.contains("http"), "{text}");
        assert_eq!(
            text,
            "error sending request for url (the upstream's URL) after 2 tries"
        );
        let nothing_readable = Typed(std::io::Error::other("a::b"));
        assert_eq!(cause(&nothing_readable), "a transport error");
    }

    #[tokio::test]
    async fn a_refused_connection_reads_as_one() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let error = reqwest::get(format!("http://127.0.0.1:{port}/mcp?key=k"))
            .await
            .unwrap_err();
        let text = cause(&error);
        assert!(text.to_lowercase().contains("refused"), "{text}");
        assert!(!text.contains("key=k") && !text.contains("::"), "{text}");
    }

    #[test]
    fn repeats_are_counted_between_the_lines_logged() {
        let repeats = Repeats::new(Duration::from_millis(50));
        assert_eq!(repeats.note("a"), Some(0));
        assert_eq!(repeats.note("a"), None);
        assert_eq!(repeats.note("a"), None);
        assert_eq!(repeats.note("b"), Some(0), "each kind its own");
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(repeats.note("a"), Some(2));
        assert_eq!(repeats.note("a"), None);
    }
}
