//! Every answer is checked, not just counted: HTTP status, content type, the JSON-RPC envelope
//! and id, then the result the request asked for. A failed check is a `Failure` of one
//! `ErrorKind`, carrying a short quote of what came back.

use std::{borrow::Cow, fmt};

use serde::{Deserialize, de::IgnoredAny};
use serde_json::value::RawValue;

use super::{
    args::EchoCheck,
    wire::{Reply, SSE, describe, is_media_type},
};

/// How long a quoted answer may be, in characters.
const QUOTE_CHARS: usize = 300;

/// What went wrong with one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ErrorKind {
    /// Connecting, sending or reading failed.
    Connection,
    /// No complete answer within the request timeout.
    Timeout,
    /// A status other than 2xx.
    HttpStatus(u16),
    /// A JSON-RPC error response, by code.
    JsonRpc(i64),
    /// A tool result with `isError: true`.
    ToolError,
    /// An answer that is not the one asked for (content type, envelope, id, result).
    Invalid,
}

impl ErrorKind {
    /// The stable name of the kind in the JSON report.
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Connection => "connection",
            ErrorKind::Timeout => "timeout",
            ErrorKind::HttpStatus(_) => "http_status",
            ErrorKind::JsonRpc(_) => "jsonrpc",
            ErrorKind::ToolError => "tool_error",
            ErrorKind::Invalid => "invalid",
        }
    }

    /// The HTTP status or JSON-RPC code, for the kinds that have one.
    pub fn code(self) -> Option<i64> {
        match self {
            ErrorKind::HttpStatus(status) => Some(i64::from(status)),
            ErrorKind::JsonRpc(code) => Some(code),
            _ => None,
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.code() {
            Some(code) => write!(f, "{} {code}", self.name()),
            None => f.write_str(self.name()),
        }
    }
}

/// One failed request: its kind and what was seen.
#[derive(Clone, Debug)]
pub struct Failure {
    pub kind: ErrorKind,
    pub detail: String,
}

impl Failure {
    pub fn new(kind: ErrorKind, detail: impl Into<String>) -> Self {
        Self {
            kind,
            detail: detail.into(),
        }
    }

    fn invalid(detail: impl Into<String>) -> Self {
        Self::new(ErrorKind::Invalid, detail)
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.detail)
    }
}

/// What a request's result must hold.
#[derive(Clone, Copy, Debug)]
pub enum Expect<'a> {
    /// `tools/call` of the echo tool: not `isError`, and the text as `check` says.
    Echo { text: &'a str, check: EchoCheck },
    /// `tools/list`: a `tools` array.
    Tools,
    /// `resources/read`: a `contents` array.
    Contents,
    /// Any result object (`initialize`, `resources/list`: the caller reads it).
    Any,
}

#[derive(Deserialize)]
struct Envelope<'a> {
    jsonrpc: Option<Cow<'a, str>>,
    #[serde(borrow)]
    id: Option<&'a RawValue>,
    #[serde(borrow)]
    result: Option<&'a RawValue>,
    #[serde(borrow)]
    error: Option<RpcError<'a>>,
}

#[derive(Deserialize)]
struct RpcError<'a> {
    code: i64,
    #[serde(borrow)]
    message: Cow<'a, str>,
}

#[derive(Deserialize)]
struct CallResult<'a> {
    #[serde(rename = "isError", default)]
    is_error: Option<bool>,
    #[serde(borrow)]
    content: Vec<Block<'a>>,
}

#[derive(Deserialize)]
struct Block<'a> {
    #[serde(borrow, default)]
    text: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct Tools {
    #[allow(dead_code)]
    tools: Vec<IgnoredAny>,
}

#[derive(Deserialize)]
struct Contents {
    #[allow(dead_code)]
    contents: Vec<IgnoredAny>,
}

/// Checks the reply to request `id` and returns its `result`.
pub fn check<'r>(reply: &'r Reply, id: &str, expect: Expect<'_>) -> Result<&'r RawValue, Failure> {
    if !reply.status.is_success() {
        return Err(Failure::new(
            ErrorKind::HttpStatus(reply.status.as_u16()),
            describe(reply),
        ));
    }
    let Some(message) = &reply.message else {
        let what = if is_media_type(&reply.content_type, SSE) {
            format!("the SSE stream ended without the response to id {id}")
        } else {
            "the answer is neither application/json nor text/event-stream".to_owned()
        };
        return Err(Failure::invalid(format!("{what}: {}", describe(reply))));
    };
    let envelope: Envelope = serde_json::from_slice(message)
        .map_err(|e| Failure::invalid(format!("not JSON-RPC ({e}): {}", quote(message))))?;
    if envelope.jsonrpc.as_deref() != Some("2.0") {
        return Err(Failure::invalid(format!(
            "no \"jsonrpc\":\"2.0\": {}",
            quote(message)
        )));
    }
    if envelope.id.map(RawValue::get) != Some(id) {
        return Err(Failure::invalid(format!(
            "answer to another id (sent {id}): {}",
            quote(message)
        )));
    }
    if let Some(error) = envelope.error {
        return Err(Failure::new(
            ErrorKind::JsonRpc(error.code),
            format!(
                "JSON-RPC error {}: {}",
                error.code,
                quote(error.message.as_bytes())
            ),
        ));
    }
    let result = envelope
        .result
        .ok_or_else(|| Failure::invalid(format!("neither result nor error: {}", quote(message))))?;
    check_result(result, expect).map_err(|mut failure| {
        failure.detail = format!("{}: {}", failure.detail, quote(result.get().as_bytes()));
        failure
    })?;
    Ok(result)
}

fn check_result(result: &RawValue, expect: Expect<'_>) -> Result<(), Failure> {
    let json = result.get();
    match expect {
        Expect::Echo { text, check } => {
            let call: CallResult = serde_json::from_str(json)
                .map_err(|e| Failure::invalid(format!("not a tool result ({e})")))?;
            if call.is_error == Some(true) {
                return Err(Failure::new(
                    ErrorKind::ToolError,
                    "the tool answered isError: true",
                ));
            }
            let first = call.content.iter().find_map(|b| b.text.as_deref());
            let ok = match (check, first) {
                (EchoCheck::Off, _) => true,
                (EchoCheck::Exact, Some(first)) => first == text,
                (EchoCheck::Contains, Some(first)) => first.contains(text),
                (_, None) => false,
            };
            if !ok {
                return Err(Failure::invalid(format!(
                    "the tool did not echo the {} bytes sent",
                    text.len()
                )));
            }
        }
        Expect::Tools => {
            serde_json::from_str::<Tools>(json)
                .map_err(|e| Failure::invalid(format!("no tools array ({e})")))?;
        }
        Expect::Contents => {
            serde_json::from_str::<Contents>(json)
                .map_err(|e| Failure::invalid(format!("no contents array ({e})")))?;
        }
        Expect::Any => {
            if !json.trim_start().starts_with('{') {
                return Err(Failure::invalid("the result is not an object"));
            }
        }
    }
    Ok(())
}

/// At most `QUOTE_CHARS` characters of `bytes`, on one line.
pub fn quote(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim();
    if text.is_empty() {
        return "(empty body)".to_owned();
    }
    let mut quoted: String = text
        .chars()
        .take(QUOTE_CHARS)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if text.chars().nth(QUOTE_CHARS).is_some() {
        quoted.push('…');
    }
    quoted
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use http::StatusCode;
    use tokio::time::Instant;

    fn reply(status: u16, content_type: &str, message: Option<&str>, other: &str) -> Reply {
        Reply {
            status: StatusCode::from_u16(status).unwrap(),
            content_type: content_type.to_owned(),
            session_id: None,
            message: message.map(|m| Bytes::from(m.to_owned())),
            other: Bytes::from(other.to_owned()),
            answered: Instant::now(),
            left_open: false,
        }
    }

    fn json(message: &str) -> Reply {
        reply(200, "application/json", Some(message), "")
    }

    const ECHO: Expect = Expect::Echo {
        text: "hello",
        check: EchoCheck::Exact,
    };

    #[test]
    fn a_correct_echo_passes() {
        let ok = json(
            r#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"hello"}],"isError":false}}"#,
        );
        assert!(check(&ok, "7", ECHO).is_ok());
        let tools = json(r#"{"jsonrpc":"2.0","id":7,"result":{"tools":[]}}"#);
        assert!(check(&tools, "7", Expect::Tools).is_ok());
        let read =
            json(r#"{"jsonrpc":"2.0","id":7,"result":{"contents":[{"uri":"a://b","text":"x"}]}}"#);
        assert!(check(&read, "7", Expect::Contents).is_ok());
    }

    #[test]
    fn each_kind_of_bad_answer_is_told_apart() {
        let kind = |r: &Reply, e: Expect| check(r, "7", e).unwrap_err().kind;
        let not_found = reply(404, "text/plain", None, "no such page");
        assert_eq!(kind(&not_found, ECHO), ErrorKind::HttpStatus(404));
        let error = json(r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32602,"message":"no tool"}}"#);
        assert_eq!(kind(&error, ECHO), ErrorKind::JsonRpc(-32602));
        let tool_error = json(
            r#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"boom"}],"isError":true}}"#,
        );
        assert_eq!(kind(&tool_error, ECHO), ErrorKind::ToolError);
        for bad in [
            r#"{"jsonrpc":"2.0","id":8,"result":{"content":[{"type":"text","text":"hello"}]}}"#,
            r#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"hell"}]}}"#,
            r#"{"id":7,"result":{"content":[{"type":"text","text":"hello"}]}}"#,
            r#"{"jsonrpc":"2.0","id":7}"#,
            "<html>",
        ] {
            assert_eq!(kind(&json(bad), ECHO), ErrorKind::Invalid, "{bad}");
        }
        let no_tools = json(r#"{"jsonrpc":"2.0","id":7,"result":{}}"#);
        assert_eq!(kind(&no_tools, Expect::Tools), ErrorKind::Invalid);
        assert_eq!(kind(&no_tools, Expect::Contents), ErrorKind::Invalid);
        let html = reply(200, "text/html", None, "<p>hi</p>");
        assert_eq!(kind(&html, ECHO), ErrorKind::Invalid);
    }

    #[test]
    fn an_sse_stream_without_the_response_says_so() {
        let stream = reply(
            200,
            "Text/Event-Stream; charset=utf-8",
            None,
            "data: {}\n\n",
        );
        let failure = check(&stream, "7", ECHO).unwrap_err();
        assert_eq!(failure.kind, ErrorKind::Invalid);
        assert!(
            failure
                .detail
                .starts_with("the SSE stream ended without the response to id 7"),
            "{}",
            failure.detail
        );
    }

    #[test]
    fn echo_checks_can_be_relaxed() {
        let decorated = json(
            r#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"Echo: hello"}]}}"#,
        );
        let with = |check| Expect::Echo {
            text: "hello",
            check,
        };
        assert!(check(&decorated, "7", with(EchoCheck::Exact)).is_err());
        assert!(check(&decorated, "7", with(EchoCheck::Contains)).is_ok());
        assert!(check(&decorated, "7", with(EchoCheck::Off)).is_ok());
    }

    #[test]
    fn failures_quote_what_came_back_briefly() {
        let long = "x".repeat(1000);
        let failure = check(&reply(502, "text/plain", None, &long), "1", ECHO).unwrap_err();
        assert!(
            failure
                .detail
                .starts_with("HTTP 502 Bad Gateway (text/plain): xxx"),
            "{}",
            failure.detail
        );
        assert!(failure.detail.chars().count() < 360, "{}", failure.detail);
        assert_eq!(quote(b"  a\nb  "), "a b");
        assert_eq!(quote(b""), "(empty body)");
    }
}
