//! What 2026-07-28 asks of requests and answers. A request's `_meta` must carry the lifecycle
//! (version and capabilities), checked here for the requests rmcp's handler does not see.
//! A 2026-07-28 client's answer is in its era's shape, whichever era the upstream that answered
//! speaks: every result says its `resultType` (`"complete"` where an upstream of an earlier era
//! says none), and a resource read carries the caching hints 2026-07-28 requires of it
//! (`ttlMs`, `cacheScope`; as the lists say, nothing is cached, and nothing shared across
//! users). A result that names the server that made it (`_meta`'s serverInfo, as a 2026-07-28
//! upstream's do) names Switchyard, the server the client talks to. Applied once, to the
//! answer the request is given, whichever path made it.

use bytes::Bytes;
use rmcp::model::ProtocolVersion;

use crate::{
    protocol::{META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION},
    wire::{self, Edit, Fields},
};

/// The `_meta` key of the server that made a result.
const SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

/// `answer` (to a request of `method`) with what 2026-07-28 requires of it that it lacks; the
/// same bytes when it lacks nothing (an error, or a result already in shape).
pub fn shaped(method: &str, answer: wire::Answer) -> wire::Answer {
    if answer.failed() {
        return answer;
    }
    answer.map(|message| reshaped(method, &message).unwrap_or(message))
}

/// The answer in shape, if it must change.
fn reshaped(method: &str, answer: &[u8]) -> Option<Bytes> {
    let Ok(wire::Message::Response { id, result }) = wire::parse(answer) else {
        return None;
    };
    let fields = Fields::of(result)?;
    let mut added: smallvec::SmallVec<[(&str, &str); 3]> = smallvec::SmallVec::new();
    if fields.get("resultType").is_none() {
        added.push(("resultType", "\"complete\""));
    }
    let meta = fields.get("_meta").and_then(Fields::of);
    let named = meta.as_ref().and_then(|meta| meta.get(SERVER_INFO));
    let mut meta_text = Vec::new();
    if let (Some(meta), Some(named)) = (&meta, named)
        && named.get() != crate::gateway::identity_json()
    {
        meta.write(
            &mut meta_text,
            |key| match key {
                SERVER_INFO => Edit::Value(crate::gateway::identity_json()),
                _ => Edit::Keep,
            },
            &[],
        );
    }
    if method == "resources/read" {
        if fields.get("ttlMs").is_none() {
            added.push(("ttlMs", "0"));
        }
        if fields.get("cacheScope").is_none() {
            added.push(("cacheScope", "\"private\""));
        }
    }
    if added.is_empty() && meta_text.is_empty() {
        return None;
    }
    let meta_text = std::str::from_utf8(&meta_text).ok()?;
    let mut out = Vec::with_capacity(result.get().len() + 64);
    fields.write(
        &mut out,
        |key| match key {
            "_meta" if !meta_text.is_empty() => Edit::Value(meta_text),
            _ => Edit::Keep,
        },
        &added,
    );
    let result = std::str::from_utf8(&out).ok()?;
    Some(wire::write::response(id.get(), result))
}

/// The error for a 2026-07-28 request whose `_meta` lacks what the protocol requires, or names
/// a version Switchyard does not speak.
pub(super) struct MetaError {
    code: i32,
    message: String,
    data: Option<serde_json::Value>,
}

impl MetaError {
    pub(super) fn answer(self, id: &str) -> wire::Answer {
        wire::Answer::error_with(id, self.code, &self.message, self.data.as_ref())
    }
}

/// What rmcp's handler checks of every 2026-07-28 request, for the requests that do not go
/// through it.
pub(super) fn check_meta(meta: Option<&Fields<'_>>) -> Result<(), MetaError> {
    let missing = missing_meta(meta);
    if !missing.is_empty() {
        return Err(MetaError {
            code: -32602,
            message: format!(
                "request _meta is missing or has malformed required fields: {}",
                missing.join(", ")
            ),
            data: None,
        });
    }
    let version = meta_version(meta).unwrap_or_default();
    if !crate::protocol::is_known_version(&version) {
        let supported: Vec<&str> = ProtocolVersion::KNOWN_VERSIONS
            .iter()
            .map(|v| v.as_str())
            .collect();
        return Err(MetaError {
            code: -32022,
            message: "Unsupported protocol version".into(),
            data: Some(serde_json::json!({ "requested": version, "supported": supported })),
        });
    }
    Ok(())
}

/// Whether `meta` holds a complete 2026-07-28 request lifecycle (version and capabilities).
pub fn has_modern_meta(meta: Option<&Fields<'_>>) -> bool {
    missing_meta(meta).is_empty()
}

/// The keys of the 2026-07-28 lifecycle that `meta` lacks (or has malformed).
fn missing_meta(meta: Option<&Fields<'_>>) -> Vec<&'static str> {
    let version = meta
        .and_then(|meta| meta.get(META_PROTOCOL_VERSION))
        .filter(|value| value.get().starts_with('"'));
    let capabilities = meta
        .and_then(|meta| meta.get(META_CLIENT_CAPABILITIES))
        .filter(|value| value.get().starts_with('{'));
    let mut missing = Vec::new();
    if version.is_none() {
        missing.push(META_PROTOCOL_VERSION);
    }
    if capabilities.is_none() {
        missing.push(META_CLIENT_CAPABILITIES);
    }
    missing
}

/// The version a 2026-07-28 request names in its `_meta`.
pub fn meta_version<'a>(meta: Option<&Fields<'a>>) -> Option<std::borrow::Cow<'a, str>> {
    meta.and_then(|meta| meta.get(META_PROTOCOL_VERSION))
        .and_then(wire::string)
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn result_of(answer: &wire::Answer) -> Value {
        serde_json::from_slice::<Value>(&answer.message).unwrap()["result"].clone()
    }

    fn result(text: &'static str) -> wire::Answer {
        wire::Answer::read(Bytes::from(text))
    }

    #[test]
    fn an_earlier_eras_results_gain_what_2026_requires() {
        let call = result(r#"{"jsonrpc":"2.0","id":7,"result":{"content":[]}}"#);
        let shaped_call = shaped("tools/call", call);
        assert_eq!(
            result_of(&shaped_call),
            json!({"content": [], "resultType": "complete"})
        );
        assert_eq!(
            serde_json::from_slice::<Value>(&shaped_call.message).unwrap()["id"],
            7
        );
        let read = result(r#"{"jsonrpc":"2.0","id":"r","result":{"contents":[]}}"#);
        assert_eq!(
            result_of(&shaped("resources/read", read)),
            json!({"contents": [], "resultType": "complete", "ttlMs": 0, "cacheScope": "private"})
        );
        let empty = result(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
        assert_eq!(
            result_of(&shaped("ping", empty)),
            json!({"resultType": "complete"})
        );
    }

    #[test]
    fn a_result_names_switchyard_as_the_server_that_made_it() {
        let call = result(
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"mcp-time","version":"1"},"kept":true}}}"#,
        );
        let meta = &result_of(&shaped("tools/call", call))["_meta"];
        assert_eq!(
            meta["io.modelcontextprotocol/serverInfo"]["name"],
            "switchyard"
        );
        assert_eq!(meta["kept"], true, "the rest of `_meta` as it was");
    }

    #[test]
    fn what_is_in_shape_and_errors_go_as_they_are() {
        for (method, answer) in [
            (
                "tools/call",
                r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","inputRequests":{}}}"#,
            ),
            (
                "resources/read",
                r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","contents":[],"ttlMs":5,"cacheScope":"public"}}"#,
            ),
            (
                "tools/call",
                r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"no"}}"#,
            ),
        ] {
            let answer = result(answer);
            let shaped = shaped(method, answer.clone());
            assert_eq!(shaped.message, answer.message);
            assert_eq!(shaped.outcome, answer.outcome);
        }
    }
}
