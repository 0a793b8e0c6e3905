//! Policy hooks (`[[guardrail]] hook`): an HTTP service asked about a tool call before it is
//! sent, and about its result, which allows, denies or rewrites it. A question names the
//! caller, the upstream and the tool, never a credential; a hook that gives no readable answer
//! in time has failed, and its guardrail's `failure` decides what happens to the call.

use std::{fmt, time::Duration};

use http::{HeaderName, HeaderValue};
use serde_json::{Map, Value};
use url::Url;

/// The largest answer read from a hook.
pub const MAX_ANSWER_BYTES: usize = 1024 * 1024;
/// The longest reason of a denial kept (the rest is cut): it is shown to the client and
/// written in the audit log.
const MAX_REASON_CHARS: usize = 500;

/// The hook of one `[[guardrail]]`.
#[derive(Clone, PartialEq)]
pub struct Hook {
    /// Where questions are POSTed.
    pub url: Url,
    /// How long a question may take, answer read included.
    pub timeout: Duration,
    pub failure: Failure,
    /// Asked before a call is sent.
    pub before: bool,
    /// Asked about a call's result.
    pub after: bool,
    /// Sent with every question (their values may be secrets: never shown).
    pub headers: Vec<(HeaderName, HeaderValue)>,
}

impl fmt::Debug for Hook {
    /// Neither the headers' values nor the URL's query (either may hold a secret).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.headers.iter().map(|(name, _)| name.as_str()).collect();
        f.debug_struct("Hook")
            .field(
                "url",
                &format_args!(
                    "{}{}",
                    self.url.origin().ascii_serialization(),
                    self.url.path()
                ),
            )
            .field("timeout", &self.timeout)
            .field("failure", &self.failure)
            .field("before", &self.before)
            .field("after", &self.after)
            .field("headers", &names)
            .finish()
    }
}

/// What happens to a call when its hook has failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The call is refused.
    Closed,
    /// The call goes on as if the hook had allowed it (and a warning is logged).
    Open,
}

/// Which question a hook is asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Before the call is sent: about its arguments.
    Call,
    /// After: about its result.
    Result,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Call => "call",
            Phase::Result => "result",
        }
    }
}

/// A call, as its hook is told of it.
#[derive(Debug, Clone, Copy)]
pub struct Question<'a> {
    /// The calling principal.
    pub user: &'a str,
    pub upstream: &'a str,
    /// The tool, as its upstream names it; `None` for a task's result read later (which call
    /// made the task is not known then).
    pub tool: Option<&'a str>,
    /// The arguments, as they are sent (or were, for a result).
    pub arguments: &'a Value,
    /// The tool result, for `Phase::Result`.
    pub result: Option<&'a Value>,
}

impl Question<'_> {
    /// The JSON body of the question.
    pub fn body(&self) -> Value {
        let mut body = Map::new();
        let phase = match self.result {
            Some(_) => Phase::Result,
            None => Phase::Call,
        };
        body.insert("phase".into(), phase.name().into());
        body.insert("user".into(), self.user.into());
        body.insert("upstream".into(), self.upstream.into());
        body.insert("tool".into(), self.tool.into());
        body.insert("arguments".into(), self.arguments.clone());
        if let Some(result) = self.result {
            body.insert("result".into(), result.clone());
        }
        Value::Object(body)
    }
}

/// A hook's decision.
#[derive(Debug, PartialEq)]
pub enum Verdict {
    Allow,
    /// Refused, with the hook's reason.
    Deny(String),
    /// The arguments (an object), or the result (an object with a `content` array), to go on
    /// with instead.
    Rewrite(Value),
}

/// Why a hook gave no decision. Never names its URL or its headers.
#[derive(Debug, thiserror::Error)]
pub enum HookFailure {
    #[error("it did not answer within {} s", .0.as_secs_f64())]
    TimedOut(Duration),
    #[error("it could not be reached ({0})")]
    Unreachable(String),
    #[error("it answered HTTP {0}")]
    Status(u16),
    #[error("its answer is larger than {MAX_ANSWER_BYTES} bytes")]
    TooLarge,
    #[error("its answer cannot be read: {0}")]
    Unreadable(String),
    #[error("there is no HTTP client to ask it with ({0})")]
    NoClient(String),
}

/// The HTTP client every hook is asked through: one for the gateway, made at its start (its
/// connections to a hook are kept alive between calls).
#[derive(Clone)]
pub struct HookClient {
    /// The client, or why it could not be made (then every question fails, saying so).
    http: Result<reqwest::Client, String>,
}

impl Default for HookClient {
    fn default() -> Self {
        Self::new()
    }
}

impl HookClient {
    pub fn new() -> Self {
        // No redirects: one could take the question, and the hook's headers, elsewhere.
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|error| {
                tracing::error!(%error, "cannot make the HTTP client of policy hooks; every hook will fail");
                error.to_string()
            });
        Self { http }
    }

    /// Asks `hook` `question`: its decision, or why it gave none.
    pub async fn ask(&self, hook: &Hook, question: &Question<'_>) -> Result<Verdict, HookFailure> {
        let http = (self.http.as_ref()).map_err(|reason| HookFailure::NoClient(reason.clone()))?;
        let mut request = http.post(hook.url.clone()).json(&question.body());
        for (name, value) in &hook.headers {
            request = request.header(name, value);
        }
        let exchange = async {
            let response = request.send().await.map_err(unreachable)?;
            if !response.status().is_success() {
                return Err(HookFailure::Status(response.status().as_u16()));
            }
            limited_body(response).await
        };
        let body = tokio::time::timeout(hook.timeout, exchange)
            .await
            .map_err(|_| HookFailure::TimedOut(hook.timeout))??;
        verdict(question.result.is_some(), &body)
    }
}

/// A failed request, in words that name neither the URL nor a header.
fn unreachable(error: reqwest::Error) -> HookFailure {
    let mut text = String::new();
    let mut source: Option<&dyn std::error::Error> = Some(&error.without_url());
    // The innermost causes say what went wrong (refused, reset, no such host).
    while let Some(cause) = source {
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    HookFailure::Unreachable(text)
}

async fn limited_body(mut response: reqwest::Response) -> Result<Vec<u8>, HookFailure> {
    if (response.content_length()).is_some_and(|n| n > MAX_ANSWER_BYTES as u64) {
        return Err(HookFailure::TooLarge);
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(unreachable)? {
        if body.len() + chunk.len() > MAX_ANSWER_BYTES {
            return Err(HookFailure::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The decision in a hook's answer `body`, about a result if `of_result`, else about a call.
pub fn verdict(of_result: bool, body: &[u8]) -> Result<Verdict, HookFailure> {
    let unreadable = |why: &str| HookFailure::Unreadable(why.to_owned());
    let mut answer: Value =
        serde_json::from_slice(body).map_err(|error| HookFailure::Unreadable(error.to_string()))?;
    match answer.get("decision").and_then(Value::as_str) {
        Some("allow") => Ok(Verdict::Allow),
        Some("deny") => {
            let reason = answer.get("reason").and_then(Value::as_str);
            let reason = reason.filter(|reason| !reason.trim().is_empty());
            Ok(Verdict::Deny(reason.map_or_else(
                || "no reason was given".to_owned(),
                |reason| {
                    crate::text::printable(reason)
                        .chars()
                        .take(MAX_REASON_CHARS)
                        .collect()
                },
            )))
        }
        Some("rewrite") if of_result => match answer.get_mut("result").map(Value::take) {
            Some(result) if result.get("content").is_some_and(Value::is_array) => {
                Ok(Verdict::Rewrite(result))
            }
            _ => Err(unreadable(
                "a rewritten result must be an object with a `content` array",
            )),
        },
        Some("rewrite") => match answer.get_mut("arguments").map(Value::take) {
            Some(arguments @ Value::Object(_)) => Ok(Verdict::Rewrite(arguments)),
            _ => Err(unreadable("rewritten `arguments` must be an object")),
        },
        _ => Err(unreadable(
            "`decision` must be `allow`, `deny` or `rewrite`",
        )),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn read(of_result: bool, answer: Value) -> Result<Verdict, String> {
        verdict(of_result, answer.to_string().as_bytes()).map_err(|e| e.to_string())
    }

    #[test]
    fn answers_are_read_as_decisions_and_anything_else_is_a_failure() {
        assert_eq!(
            read(false, json!({"decision": "allow"})),
            Ok(Verdict::Allow)
        );
        assert_eq!(
            read(false, json!({"decision": "deny", "reason": "no\nway"})),
            Ok(Verdict::Deny("no\\nway".into())),
            "a reason is made printable"
        );
        assert_eq!(
            read(true, json!({"decision": "deny"})),
            Ok(Verdict::Deny("no reason was given".into()))
        );
        assert_eq!(
            read(false, json!({"decision": "rewrite", "arguments": {"a": 1}})),
            Ok(Verdict::Rewrite(json!({"a": 1})))
        );
        let result = json!({"content": [{"type": "text", "text": "x"}]});
        assert_eq!(
            read(true, json!({"decision": "rewrite", "result": result})),
            Ok(Verdict::Rewrite(result))
        );
        for (of_result, bad) in [
            (false, json!({"decision": "rewrite", "arguments": [1]})),
            (false, json!({"decision": "rewrite"})),
            (
                true,
                json!({"decision": "rewrite", "result": {"text": "x"}}),
            ),
            (true, json!({"decision": "maybe"})),
            (false, json!("allow")),
        ] {
            let failure = read(of_result, bad.clone()).unwrap_err();
            assert!(
                failure.starts_with("its answer cannot be read"),
                "{bad}: {failure}"
            );
        }
        assert!(verdict(false, b"<html>").is_err());
    }

    #[test]
    fn a_long_reason_is_cut() {
        let long = "x".repeat(2 * MAX_REASON_CHARS);
        let Ok(Verdict::Deny(reason)) = read(false, json!({"decision": "deny", "reason": long}))
        else {
            panic!("a denial")
        };
        assert_eq!(reason.chars().count(), MAX_REASON_CHARS);
    }

    #[test]
    fn a_question_names_the_call_and_a_result_question_holds_the_result() {
        let arguments = json!({"path": "/a"});
        let result = json!({"content": []});
        let mut question = Question {
            user: "alice",
            upstream: "files",
            tool: Some("read"),
            arguments: &arguments,
            result: None,
        };
        assert_eq!(
            question.body(),
            json!({"phase": "call", "user": "alice", "upstream": "files", "tool": "read", "arguments": {"path": "/a"}})
        );
        question.result = Some(&result);
        assert_eq!(question.body()["phase"], "result");
        assert_eq!(question.body()["result"], result);
        // A task's result, read later: which call made it is not known.
        question.tool = None;
        assert_eq!(question.body()["tool"], Value::Null);
    }

    #[test]
    fn debug_shows_neither_header_values_nor_the_query() {
        let mut value = HeaderValue::from_static("Bearer s3cret");
        value.set_sensitive(true);
        let hook = Hook {
            url: Url::parse("https://policy.example/check?token=q5ecret").unwrap(),
            timeout: Duration::from_secs(1),
            failure: Failure::Closed,
            before: true,
            after: false,
            headers: vec![(http::header::AUTHORIZATION, value)],
        };
        let shown = format!("{hook:?}");
        assert!(shown.contains("https://policy.example/check") && shown.contains("authorization"));
        assert!(
            !shown.contains("s3cret") && !shown.contains("q5ecret"),
            "{shown}"
        );
    }
}
