//! Facts of the MCP protocol that every layer needs: the two eras a peer may speak, the
//! versions Switchyard knows, the `_meta` keys of the 2026-07-28 per-request lifecycle, and how
//! its SEP-2243 headers carry text.

use base64::{Engine, engine::general_purpose::STANDARD};
use http::{HeaderName, HeaderValue};
use rmcp::model::ProtocolVersion;

/// The protocol era of a peer or a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Era {
    /// `initialize` and a session (2024-11-05 … 2025-11-25).
    Legacy,
    /// `server/discover` and self-contained requests (2026-07-28).
    Modern,
}

impl Era {
    /// The era of protocol version `version`.
    pub fn of(version: &str) -> Self {
        // ISO dates compare as strings in date order.
        if version >= MODERN.as_str() {
            Era::Modern
        } else {
            Era::Legacy
        }
    }
}

/// The first version of the modern era.
pub const MODERN: ProtocolVersion = ProtocolVersion::V_2026_07_28;

/// Whether Switchyard knows protocol version `version`.
pub fn is_known_version(version: &str) -> bool {
    ProtocolVersion::KNOWN_VERSIONS
        .iter()
        .any(|known| known.as_str() == version)
}

/// The session a request belongs to (before 2026-07-28).
pub const MCP_SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");
/// The protocol version a request is made in.
pub const MCP_PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
/// SEP-2243: the method of a 2026-07-28 request, and what it names.
pub const MCP_METHOD: HeaderName = HeaderName::from_static("mcp-method");
pub const MCP_NAME: HeaderName = HeaderName::from_static("mcp-name");
/// How a SEP-2243 header value says it is Base64: `=?base64?…?=`.
const BASE64_OPEN: &str = "=?base64?";
const BASE64_CLOSE: &str = "?=";

/// `text` as a SEP-2243 header (`Mcp-Name`, `Mcp-Param-*`) carries it: as it is, unless it has
/// a space or tab at either end, a character outside visible ASCII (a line break among them),
/// or the shape of the Base64 form itself; then in the Base64 form.
pub fn header_text(text: &str) -> HeaderValue {
    let bytes = text.as_bytes();
    let padded =
        matches!(bytes.first(), Some(b' ' | b'\t')) || matches!(bytes.last(), Some(b' ' | b'\t'));
    let looks_wrapped = text.starts_with(BASE64_OPEN) && text.ends_with(BASE64_CLOSE);
    let plain = !padded && !looks_wrapped && bytes.iter().all(|b| (0x20..0x7f).contains(b));
    if plain && let Ok(value) = HeaderValue::from_str(text) {
        return value;
    }
    let wrapped = format!("{BASE64_OPEN}{}{BASE64_CLOSE}", STANDARD.encode(text));
    HeaderValue::try_from(wrapped).expect("Base64 is visible ASCII")
}

/// The text a SEP-2243 header value carries, the Base64 form decoded; `None` when that form
/// holds no valid Base64 (standard alphabet, padded) of UTF-8 text.
pub fn read_header_text(value: &str) -> Option<String> {
    match value
        .strip_prefix(BASE64_OPEN)
        .and_then(|inner| inner.strip_suffix(BASE64_CLOSE))
    {
        Some(inner) => String::from_utf8(STANDARD.decode(inner).ok()?).ok(),
        None => Some(value.to_owned()),
    }
}

/// The last event a client saw on a stream it resumes.
pub const LAST_EVENT_ID: HeaderName = HeaderName::from_static("last-event-id");

/// The prefix of the `_meta` keys of the 2026-07-28 per-request lifecycle.
pub const META_PREFIX: &str = "io.modelcontextprotocol/";
/// The protocol version a 2026-07-28 request is made in.
pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// What a 2026-07-28 client can do, declared on each request.
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// The log messages a 2026-07-28 request asks for.
pub const META_LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
/// The client's progress token, in any era.
pub const META_PROGRESS_TOKEN: &str = "progressToken";
/// The tasks extension of 2026-07-28 (SEP-2663), as capabilities name it.
pub const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// Switchyard's JSON-RPC error code of a call beyond a quota (answered with HTTP 429 and
/// `Retry-After` where it can be).
pub const QUOTA_EXCEEDED: i32 = -32029;
/// The `_meta` key that ties a message to the task it concerns (2025-11-25).
pub const META_RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eras_follow_the_version_dates() {
        assert_eq!(Era::of("2025-11-25"), Era::Legacy);
        assert_eq!(Era::of("2024-11-05"), Era::Legacy);
        assert_eq!(Era::of("2026-07-28"), Era::Modern);
        assert!(is_known_version("2025-03-26"));
        assert!(!is_known_version("1999-01-01"));
    }

    #[test]
    fn header_text_is_plain_where_it_can_be_and_always_reads_back() {
        for plain in ["eu-west-1", "a b", "", "x=?base64?y"] {
            assert_eq!(header_text(plain), plain);
        }
        for wrapped in [
            " lead",
            "trail\t",
            "Zürich",
            "eu\r\nX-Injected: 1",
            "del\u{7f}",
            "=?base64?ZXU=?=",
        ] {
            let value = header_text(wrapped);
            let text = value.to_str().unwrap();
            assert!(text.starts_with(BASE64_OPEN), "{wrapped:?} → {text}");
            assert_eq!(read_header_text(text).as_deref(), Some(wrapped));
        }
        assert_eq!(header_text("Hello"), "Hello");
        assert_eq!(
            read_header_text("=?base64?SGVsbG8=?=").as_deref(),
            Some("Hello")
        );
        assert_eq!(read_header_text("=?base64?SGVsbG8?="), None, "unpadded");
        assert_eq!(read_header_text("=?base64?/w==?="), None, "not UTF-8");
    }
}
