//! One JSON-RPC message read without a typed round trip: the envelope (`id`, `method`) is parsed,
//! and `params`, `result` and `error` stay borrowed slices of the bytes they came in, so what a
//! request carries can be passed on as it is.

use std::{borrow::Cow, fmt};

use serde::{
    Deserialize, Deserializer,
    de::{self, MapAccess, Visitor},
};
use serde_json::value::RawValue;

use super::object::CowStr;

/// What is wrong with a message, as a JSON-RPC error code and a message for the sender.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvelopeError {
    /// Not JSON at all (-32700).
    #[error("parse error: {0}")]
    Parse(String),
    /// JSON, but not one JSON-RPC 2.0 message (-32600).
    #[error("invalid request: {0}")]
    Invalid(&'static str),
}

impl EnvelopeError {
    /// The JSON-RPC error code.
    pub fn code(&self) -> i32 {
        match self {
            Self::Parse(_) => -32700,
            Self::Invalid(_) => -32600,
        }
    }
}

/// One JSON-RPC 2.0 message, borrowing from the bytes it was read from.
#[derive(Debug, Clone, Copy)]
pub enum Message<'a> {
    Request(Request<'a>),
    Notification(Notification<'a>),
    /// A successful answer to a request of the other side.
    Response {
        id: &'a RawValue,
        result: &'a RawValue,
    },
    /// A failed answer; `id` is `None` when the failed request could not be read.
    Error {
        id: Option<&'a RawValue>,
        error: &'a RawValue,
    },
}

#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// A JSON string or integer, as it was written.
    pub id: &'a RawValue,
    pub method: &'a str,
    pub params: Option<&'a RawValue>,
}

#[derive(Debug, Clone, Copy)]
pub struct Notification<'a> {
    pub method: &'a str,
    pub params: Option<&'a RawValue>,
}

/// The fields of a message as they come; `parse` checks how they combine.
#[derive(Default)]
struct Fields<'a> {
    jsonrpc: Option<CowStr<'a>>,
    id: Option<&'a RawValue>,
    method: Option<CowStr<'a>>,
    params: Option<&'a RawValue>,
    result: Option<&'a RawValue>,
    error: Option<&'a RawValue>,
}

impl<'de> Deserialize<'de> for Fields<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(FieldsVisitor)
    }
}

/// Reads the envelope's fields by name as they come, and skips any other (cheaper than a
/// derived visitor on the hot path).
struct FieldsVisitor;

impl<'de> Visitor<'de> for FieldsVisitor {
    type Value = Fields<'de>;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("a JSON-RPC message")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        fn once<T, E: de::Error>(
            slot: &mut Option<T>,
            value: Option<T>,
            name: &'static str,
        ) -> Result<(), E> {
            if slot.is_some() {
                return Err(E::duplicate_field(name));
            }
            *slot = value;
            Ok(())
        }
        let mut fields = Fields::default();
        while let Some(CowStr(key)) = map.next_key()? {
            match key.as_ref() {
                "jsonrpc" => once(&mut fields.jsonrpc, Some(map.next_value()?), "jsonrpc")?,
                "id" => once(&mut fields.id, map.next_value()?, "id")?,
                "method" => once(&mut fields.method, Some(map.next_value()?), "method")?,
                "params" => once(&mut fields.params, map.next_value()?, "params")?,
                "result" => once(&mut fields.result, map.next_value()?, "result")?,
                "error" => once(&mut fields.error, map.next_value()?, "error")?,
                _ => {
                    map.next_value::<de::IgnoredAny>()?;
                }
            }
        }
        Ok(fields)
    }
}

/// Method names never need escapes; one that has them (and so cannot be borrowed) is refused.
const ESCAPED_METHOD: &str = "the method name must be a plain string";

/// Reads one JSON-RPC message from `bytes`.
pub fn parse(bytes: &[u8]) -> Result<Message<'_>, EnvelopeError> {
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
    match first {
        None => return Err(EnvelopeError::Parse("the body is empty".into())),
        Some(b'[') => {
            return Err(EnvelopeError::Invalid(
                "batches are not supported (JSON-RPC batching was removed from MCP)",
            ));
        }
        Some(b'{') => {}
        Some(_) => {
            // Tell valid JSON of the wrong shape from no JSON at all.
            return Err(match serde_json::from_slice::<&RawValue>(bytes) {
                Ok(_) => EnvelopeError::Invalid("a message must be a JSON object"),
                Err(error) => EnvelopeError::Parse(error.to_string()),
            });
        }
    }
    // Checked as UTF-8 once: read from a `str`, serde_json borrows strings and raw values
    // without checking each of them again.
    let text = std::str::from_utf8(bytes)
        .map_err(|_| EnvelopeError::Parse("the message is not UTF-8 text".into()))?;
    let fields: Fields<'_> = serde_json::from_str(text).map_err(|error| {
        if error.is_data() {
            EnvelopeError::Invalid("a field of the message has the wrong type")
        } else {
            EnvelopeError::Parse(error.to_string())
        }
    })?;
    if fields.jsonrpc.as_ref().map(|v| v.0.as_ref()) != Some("2.0") {
        return Err(EnvelopeError::Invalid(r#"`jsonrpc` must be "2.0""#));
    }
    let id = match fields.id {
        Some(id) if !is_valid_id(id) => {
            return Err(EnvelopeError::Invalid(
                "`id` must be a string or an integer",
            ));
        }
        id => id,
    };
    let method = match fields.method {
        Some(CowStr(Cow::Borrowed(method))) => Some(method),
        Some(CowStr(Cow::Owned(_))) => return Err(EnvelopeError::Invalid(ESCAPED_METHOD)),
        None => None,
    };
    match (method, id, fields.result, fields.error) {
        (Some(method), Some(id), None, None) => Ok(Message::Request(Request {
            id,
            method,
            params: fields.params,
        })),
        (Some(method), None, None, None) => Ok(Message::Notification(Notification {
            method,
            params: fields.params,
        })),
        (None, Some(id), Some(result), None) => Ok(Message::Response { id, result }),
        (None, id, None, Some(error)) => Ok(Message::Error { id, error }),
        (Some(_), _, _, _) => Err(EnvelopeError::Invalid(
            "a request cannot carry `result` or `error`",
        )),
        (None, None, Some(_), _) => Err(EnvelopeError::Invalid("a response needs an `id`")),
        (None, _, Some(_), Some(_)) => Err(EnvelopeError::Invalid(
            "a response carries `result` or `error`, not both",
        )),
        (None, _, None, None) => Err(EnvelopeError::Invalid(
            "a message needs a `method`, a `result` or an `error`",
        )),
    }
}

/// JSON-RPC ids are strings or numbers; MCP excludes fractions (and `null`, read as absent).
fn is_valid_id(id: &RawValue) -> bool {
    let text = id.get();
    match text.as_bytes().first() {
        Some(b'"') => true,
        Some(b'-' | b'0'..=b'9') => !text.bytes().any(|b| matches!(b, b'.' | b'e' | b'E')),
        _ => false,
    }
}

/// The text of a JSON string value, if `value` is one; borrowed when it has no escapes.
pub fn string<'a>(value: &'a RawValue) -> Option<Cow<'a, str>> {
    let text = value.get().trim_ascii();
    if !text.starts_with('"') {
        return None;
    }
    if !text.contains('\\') {
        // A JSON string without escapes is its text between the quotes.
        return Some(Cow::Borrowed(&text[1..text.len() - 1]));
    }
    serde_json::from_str::<CowStr<'a>>(text).ok().map(|s| s.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(text: &str) -> Request<'_> {
        match parse(text.as_bytes()) {
            Ok(Message::Request(request)) => request,
            other => panic!("not a request: {other:?}"),
        }
    }

    #[test]
    fn a_request_keeps_its_id_and_params_as_written() {
        let text = r#"{"jsonrpc":"2.0","id":"a-1","method":"tools/call","params":{"name":"x","arguments":{"k":[1, 2]}}}"#;
        let request = request(text);
        assert_eq!(request.id.get(), r#""a-1""#);
        assert_eq!(request.method, "tools/call");
        assert_eq!(
            request.params.unwrap().get(),
            r#"{"name":"x","arguments":{"k":[1, 2]}}"#
        );
        let numbered = self::request(r#"{"method":"ping","id":7,"jsonrpc":"2.0"}"#);
        assert_eq!(numbered.id.get(), "7");
        assert!(numbered.params.is_none());
    }

    #[test]
    fn notifications_responses_and_errors_are_told_apart() {
        assert!(matches!(
            parse(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
            Ok(Message::Notification(Notification {
                method: "notifications/initialized",
                ..
            }))
        ));
        assert!(matches!(
            parse(br#"{"jsonrpc":"2.0","id":3,"result":{}}"#),
            Ok(Message::Response { .. })
        ));
        assert!(matches!(
            parse(br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}"#),
            Ok(Message::Error { id: None, .. })
        ));
    }

    #[test]
    fn malformed_messages_get_the_right_code() {
        let code = |text: &str| parse(text.as_bytes()).unwrap_err().code();
        assert_eq!(code(""), -32700);
        assert_eq!(code("{\"jsonrpc\":"), -32700);
        assert_eq!(code("not json"), -32700);
        let not_utf8 = parse(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\"}");
        assert_eq!(not_utf8.unwrap_err().code(), -32700);
        assert_eq!(code("42"), -32600);
        assert_eq!(
            code(r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#),
            -32600
        );
        assert_eq!(code(r#"{"id":1,"method":"ping"}"#), -32600);
        assert_eq!(code(r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#), -32600);
        assert_eq!(code(r#"{"jsonrpc":"2.0","id":{},"method":"ping"}"#), -32600);
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#),
            -32600
        );
        assert_eq!(code(r#"{"jsonrpc":"2.0","id":1,"method":7}"#), -32600);
        assert_eq!(code(r#"{"jsonrpc":"2.0","id":1}"#), -32600);
        assert_eq!(code(r#"{"jsonrpc":"2.0","result":{}}"#), -32600);
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":1,"method":"ping","result":{}}"#),
            -32600
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":1,"method":"ping","id":2}"#),
            -32600
        );
    }

    #[test]
    fn strings_are_borrowed_unless_escaped() {
        let plain = RawValue::from_string(r#""demo__echo""#.into()).unwrap();
        assert!(matches!(string(&plain), Some(Cow::Borrowed("demo__echo"))));
        let escaped = RawValue::from_string(r#""a\u0041""#.into()).unwrap();
        assert_eq!(string(&escaped).as_deref(), Some("aA"));
        let number = RawValue::from_string("1".into()).unwrap();
        assert_eq!(string(&number), None);
        let empty = RawValue::from_string(r#""""#.into()).unwrap();
        assert!(matches!(string(&empty), Some(Cow::Borrowed(""))));
        let padded = RawValue::from_string(" \"x\"\n".into()).unwrap();
        assert_eq!(string(&padded).as_deref(), Some("x"));
    }
}
