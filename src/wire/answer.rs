//! A request's answer on its way up to the front: the JSON-RPC message for the client, and what
//! it says, told once where the answer is made (the exchange that got it from the upstream,
//! the router or quota that refused the call). Metrics, the audit log, traces and the reply's
//! HTTP status read the outcome here, not the bytes.

use std::time::Duration;

use bytes::Bytes;

use super::{Fields, Message};

/// What an answer says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A result.
    Result,
    /// A tool's result that says the tool failed (`isError: true`).
    ToolError,
    /// A JSON-RPC error with this code; `retry_after`: a call refused beyond a quota, which
    /// may be made again after that long.
    Error {
        code: i32,
        retry_after: Option<Duration>,
    },
}

/// A JSON-RPC message answering a request, and what it says.
#[derive(Clone, Debug)]
pub struct Answer {
    pub message: Bytes,
    pub outcome: Outcome,
}

impl Answer {
    /// A result, `message`.
    pub fn result(message: Bytes) -> Self {
        Self {
            message,
            outcome: Outcome::Result,
        }
    }

    /// A tool's result, `message`, which says whether the tool failed.
    pub fn tool_result(message: Bytes) -> Self {
        let failed = super::reports_tool_failure(&message);
        Self {
            message,
            outcome: if failed {
                Outcome::ToolError
            } else {
                Outcome::Result
            },
        }
    }

    /// The JSON-RPC error `code` with `message`, answering request `id`.
    pub fn error(id: &str, code: i32, message: &str) -> Self {
        Self::error_with(id, code, message, None)
    }

    /// The JSON-RPC error `code` with `message` and `data`, answering request `id`.
    pub fn error_with(
        id: &str,
        code: i32,
        message: &str,
        data: Option<&serde_json::Value>,
    ) -> Self {
        Self::failure(super::write::error(Some(id), code, message, data), code)
    }

    /// `message`, a JSON-RPC error with `code` written elsewhere (an upstream's, relayed).
    pub fn failure(message: Bytes, code: i32) -> Self {
        Self {
            message,
            outcome: Outcome::Error {
                code,
                retry_after: None,
            },
        }
    }

    /// An answer made where nothing told what it says (rmcp's typed machinery, a task's
    /// stored result): read from its envelope, and for an error its code.
    pub fn read(message: Bytes) -> Self {
        if !super::is_error_answer(&message) {
            return Self::result(message);
        }
        let code = match super::parse(&message) {
            Ok(Message::Error { error, .. }) => Fields::of(error)
                .and_then(|fields| fields.get("code"))
                .and_then(|code| code.get().parse::<i32>().ok()),
            _ => None,
        };
        Self::failure(message, code.unwrap_or(-32603))
    }

    /// Whether the request failed (a JSON-RPC error; a tool reporting its own failure is a
    /// result).
    pub fn failed(&self) -> bool {
        matches!(self.outcome, Outcome::Error { .. })
    }

    /// The JSON-RPC error code, if it is an error.
    pub fn code(&self) -> Option<i32> {
        match self.outcome {
            Outcome::Error { code, .. } => Some(code),
            _ => None,
        }
    }

    /// The same outcome with the message rewritten (`_meta` shaped for an era, links
    /// inlined): what the answer says does not change.
    pub fn map(self, rewrite: impl FnOnce(Bytes) -> Bytes) -> Self {
        Self {
            message: rewrite(self.message),
            outcome: self.outcome,
        }
    }
}

impl From<Answer> for Bytes {
    fn from(answer: Answer) -> Bytes {
        answer.message
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_made_elsewhere_is_read_once() {
        let error = Answer::read(Bytes::from_static(
            br#"{"jsonrpc":"2.0","id":"x","error":{"code":-32601,"message":"no"}}"#,
        ));
        assert_eq!(error.code(), Some(-32601));
        assert!(error.failed());
        let result = Answer::read(Bytes::from_static(
            br#"{"jsonrpc":"2.0","id":1,"result":{"isError":true}}"#,
        ));
        assert_eq!(
            result.outcome,
            Outcome::Result,
            "only a tool's result says so"
        );
        let unreadable = Answer::read(Bytes::from_static(br#"{"jsonrpc":"2.0","error":7}"#));
        assert_eq!(unreadable.code(), Some(-32603));
    }

    #[test]
    fn a_tool_result_says_whether_the_tool_failed() {
        let failed = br#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"isError": true}}"#;
        let fine = br#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"isError":false}}"#;
        assert_eq!(
            Answer::tool_result(Bytes::from_static(failed)).outcome,
            Outcome::ToolError
        );
        assert_eq!(
            Answer::tool_result(Bytes::from_static(fine)).outcome,
            Outcome::Result
        );
        assert!(!Answer::tool_result(Bytes::from_static(failed)).failed());
    }

    #[test]
    fn a_rewritten_answer_says_what_it_said() {
        let answer = Answer::error("3", -32602, "bad");
        let rewritten = answer.map(|message| Bytes::from(message.to_vec()));
        assert_eq!(rewritten.code(), Some(-32602));
        let text = std::str::from_utf8(&rewritten.message).unwrap();
        assert!(text.contains(r#""id":3"#) && text.contains("bad"), "{text}");
    }
}
