//! MCP requests of both eras, serialized once: per request only the JSON-RPC id changes
//! (`setup` uses them for the handshake and its queries, `load` on the hot path).
//!
//! Session era: `initialize` (2025-11-25) → `Mcp-Session-Id` → `notifications/initialized` →
//! requests with `Mcp-Session-Id` and `MCP-Protocol-Version` → DELETE. Stateless era
//! (2026-07-28): every request carries `_meta` (protocol version, client capabilities, client
//! info) and the `MCP-Protocol-Version`, `Mcp-Method` and, for calls and reads, `Mcp-Name`
//! headers.

use base64::Engine as _;
use bytes::{BufMut, Bytes, BytesMut};
use http::{HeaderName, HeaderValue};
use serde_json::{Value, json};

use super::{
    args::{Era, Kind},
    wire::SESSION_ID,
};

pub const SESSION_VERSION: &str = "2025-11-25";
pub const STATELESS_VERSION: &str = "2026-07-28";
pub const CLIENT_NAME: &str = "switchyard-bench";
const BODY_PREFIX: &[u8] = br#"{"jsonrpc":"2.0","id":"#;

pub const PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
const MCP_METHOD: HeaderName = HeaderName::from_static("mcp-method");
const MCP_NAME: HeaderName = HeaderName::from_static("mcp-name");

// === Context ===

/// What every request of one client carries beyond the endpoint's own headers: the protocol
/// version, and in the session era the session id (if the server gave one).
#[derive(Clone, Debug)]
pub struct Context {
    pub era: Era,
    pub session: Option<HeaderValue>,
    pub version: HeaderValue,
}

impl Context {
    pub fn stateless() -> Self {
        Self {
            era: Era::Stateless,
            session: None,
            version: HeaderValue::from_static(STATELESS_VERSION),
        }
    }

    pub fn headers(&self) -> Vec<(HeaderName, HeaderValue)> {
        let mut headers = vec![(PROTOCOL_VERSION, self.version.clone())];
        if let Some(session) = &self.session {
            headers.push((SESSION_ID, session.clone()));
        }
        headers
    }
}

// === Template ===

/// A request serialized once; `body(id)` splices in the id.
#[derive(Clone, Debug)]
pub struct Template {
    /// `,"method":…,"params":…}`: the body after the id.
    suffix: Bytes,
    pub headers: Vec<(HeaderName, HeaderValue)>,
}

impl Template {
    /// `method` with `params` (plus `_meta` when stateless); `name` is the tool name or
    /// resource URI that 2026-07-28 mirrors in `Mcp-Name`.
    pub fn new(context: &Context, method: &str, params: Option<Value>, name: Option<&str>) -> Self {
        let mut headers = context.headers();
        let params = match context.era {
            Era::Session => params,
            Era::Stateless => {
                headers.push((
                    MCP_METHOD,
                    HeaderValue::from_str(method).unwrap_or(HeaderValue::from_static("invalid")),
                ));
                if let Some(name) = name {
                    headers.push((MCP_NAME, mcp_name(name)));
                }
                let mut params = params.unwrap_or_else(|| json!({}));
                if let Some(object) = params.as_object_mut() {
                    object.insert("_meta".to_owned(), request_meta());
                }
                Some(params)
            }
        };
        let message = match params {
            Some(params) => json!({"method": method, "params": params}),
            None => json!({"method": method}),
        };
        let text = message.to_string();
        let mut suffix = BytesMut::with_capacity(text.len());
        suffix.put_u8(b',');
        suffix.put_slice(&text.as_bytes()[1..]);
        Self {
            suffix: suffix.freeze(),
            headers,
        }
    }

    /// The request `kind` of the load, for `tool` (called with `payload` as its `argument`)
    /// and `resource`.
    pub fn for_kind(
        context: &Context,
        kind: Kind,
        (tool, argument): (&str, &str),
        payload: &str,
        resource: &str,
    ) -> Self {
        match kind {
            Kind::Call => Self::new(
                context,
                kind.method(),
                Some(json!({"name": tool, "arguments": {argument: payload}})),
                Some(tool),
            ),
            Kind::List => Self::new(context, kind.method(), None, None),
            Kind::Read => Self::new(
                context,
                kind.method(),
                Some(json!({"uri": resource})),
                Some(resource),
            ),
        }
    }

    /// The body with `id` (its decimal text).
    pub fn body(&self, id: &str) -> Bytes {
        let mut body = BytesMut::with_capacity(BODY_PREFIX.len() + id.len() + self.suffix.len());
        body.put_slice(BODY_PREFIX);
        body.put_slice(id.as_bytes());
        body.put_slice(&self.suffix);
        body.freeze()
    }
}

/// The `_meta` a 2026-07-28 request carries in place of the handshake.
fn request_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": STATELESS_VERSION,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": CLIENT_NAME, "version": env!("CARGO_PKG_VERSION")},
    })
}

/// An `Mcp-Name` value: the name as is when it is plain visible ASCII, else the
/// `=?base64?…?=` form (also for a name that looks like that form).
pub fn mcp_name(name: &str) -> HeaderValue {
    let sentinel = name.starts_with("=?base64?") && name.ends_with("?=");
    let plain = !name.is_empty()
        && name.bytes().all(|b| (0x20..=0x7e).contains(&b))
        && !name.starts_with(' ')
        && !name.ends_with(' ')
        && !sentinel;
    let text = if plain {
        name.to_owned()
    } else {
        let encoded = base64::engine::general_purpose::STANDARD.encode(name.as_bytes());
        format!("=?base64?{encoded}?=")
    };
    HeaderValue::from_str(&text).unwrap_or(HeaderValue::from_static("invalid"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_splice_the_id_into_a_fixed_body() {
        let call = ("demo__echo", "text");
        let template = Template::for_kind(&Context::stateless(), Kind::Call, call, "abc", "");
        let body: Value = serde_json::from_slice(&template.body("42")).unwrap();
        assert_eq!(body["id"], 42);
        assert_eq!(body["method"], "tools/call");
        assert_eq!(body["params"]["arguments"]["text"], "abc");
        let elsewhere = ("echo", "message");
        let other = Template::for_kind(&Context::stateless(), Kind::Call, elsewhere, "x", "");
        let other: Value = serde_json::from_slice(&other.body("1")).unwrap();
        assert_eq!(
            other["params"]["arguments"],
            serde_json::json!({"message": "x"})
        );
        let meta = &body["params"]["_meta"];
        assert_eq!(
            meta["io.modelcontextprotocol/protocolVersion"],
            STATELESS_VERSION
        );
        assert!(meta["io.modelcontextprotocol/clientCapabilities"].is_object());
        assert_eq!(
            meta["io.modelcontextprotocol/clientInfo"]["name"],
            CLIENT_NAME
        );
        let headers: Vec<_> = template
            .headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.to_str().unwrap()))
            .collect();
        assert_eq!(
            headers,
            [
                ("mcp-protocol-version", STATELESS_VERSION),
                ("mcp-method", "tools/call"),
                ("mcp-name", "demo__echo")
            ]
        );

        let session = Context {
            era: Era::Session,
            session: Some(HeaderValue::from_static("s1")),
            version: HeaderValue::from_static(SESSION_VERSION),
        };
        let list = Template::for_kind(&session, Kind::List, ("", "text"), "", "");
        assert_eq!(
            &list.body("7")[..],
            br#"{"jsonrpc":"2.0","id":7,"method":"tools/list"}"#
        );
        let names: Vec<_> = list.headers.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["mcp-protocol-version", "mcp-session-id"]);
    }

    #[test]
    fn unsafe_names_are_base64_encoded() {
        assert_eq!(mcp_name("demo+demo://about"), "demo+demo://about");
        assert_eq!(mcp_name("Hello, 世界"), "=?base64?SGVsbG8sIOS4lueVjA==?=");
        assert_eq!(mcp_name(" padded "), "=?base64?IHBhZGRlZCA=?=");
        assert_eq!(
            mcp_name("=?base64?literal?="),
            "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="
        );
    }
}
