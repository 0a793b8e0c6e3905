//! Writing JSON-RPC messages around parts that are already JSON text (an id as the client wrote
//! it, a result as the upstream sent it), so that nothing is parsed or serialized twice.

use bytes::Bytes;
use serde_json::Value;

use super::{freeze, object::write_string};

const VERSION: &[u8] = br#"{"jsonrpc":"2.0""#;

/// `{"jsonrpc":"2.0","id":ID,"result":RESULT}`, with `id` and `result` as JSON text.
pub fn response(id: &str, result: &str) -> Bytes {
    // Sized exactly, so that `freeze` neither grows nor shrinks it.
    let mut out =
        Vec::with_capacity(VERSION.len() + r#","id":,"result":}"#.len() + id.len() + result.len());
    out.extend_from_slice(VERSION);
    out.extend_from_slice(br#","id":"#);
    out.extend_from_slice(id.as_bytes());
    out.extend_from_slice(br#","result":"#);
    out.extend_from_slice(result.as_bytes());
    out.push(b'}');
    freeze(out)
}

/// `{"jsonrpc":"2.0","id":ID,"error":ERROR}`, with `error` as JSON text; `id` `None` is `null`.
pub fn error_raw(id: Option<&str>, error: &str) -> Bytes {
    let id = id.unwrap_or("null");
    let mut out =
        Vec::with_capacity(VERSION.len() + r#","id":,"error":}"#.len() + id.len() + error.len());
    out.extend_from_slice(VERSION);
    out.extend_from_slice(br#","id":"#);
    out.extend_from_slice(id.as_bytes());
    out.extend_from_slice(br#","error":"#);
    out.extend_from_slice(error.as_bytes());
    out.push(b'}');
    freeze(out)
}

/// A JSON-RPC error answer with `code`, `message` and optional `data`.
pub fn error(id: Option<&str>, code: i32, message: &str, data: Option<&Value>) -> Bytes {
    let mut error = Vec::with_capacity(message.len() + 48);
    error.extend_from_slice(br#"{"code":"#);
    error.extend_from_slice(itoa::Buffer::new().format(code).as_bytes());
    error.extend_from_slice(br#","message":"#);
    write_string(&mut error, message);
    if let Some(data) = data {
        error.extend_from_slice(br#","data":"#);
        // Writing a `Value` into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut error, data);
    }
    error.push(b'}');
    // The parts are UTF-8: ASCII, and what serde_json wrote.
    error_raw(id, std::str::from_utf8(&error).unwrap_or("{}"))
}

/// `{"jsonrpc":"2.0","id":ID,"method":METHOD,"params":PARAMS}` (no params when `None`).
pub fn request(id: &str, method: &str, params: Option<&[u8]>) -> Vec<u8> {
    let params_len = params.map_or(0, <[u8]>::len);
    let mut out = Vec::with_capacity(VERSION.len() + id.len() + method.len() + params_len + 32);
    out.extend_from_slice(VERSION);
    out.extend_from_slice(br#","id":"#);
    out.extend_from_slice(id.as_bytes());
    out.extend_from_slice(br#","method":"#);
    write_string(&mut out, method);
    if let Some(params) = params {
        out.extend_from_slice(br#","params":"#);
        out.extend_from_slice(params);
    }
    out.push(b'}');
    out
}

/// `{"jsonrpc":"2.0","method":METHOD,"params":PARAMS}` (no params when `None`).
pub fn notification(method: &str, params: Option<&str>) -> Bytes {
    let params_len = params.map_or(0, str::len);
    let mut out = Vec::with_capacity(VERSION.len() + method.len() + params_len + 24);
    out.extend_from_slice(VERSION);
    out.extend_from_slice(br#","method":"#);
    write_string(&mut out, method);
    if let Some(params) = params {
        out.extend_from_slice(br#","params":"#);
        out.extend_from_slice(params.as_bytes());
    }
    out.push(b'}');
    freeze(out)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn value(bytes: &[u8]) -> Value {
        serde_json::from_slice(bytes).unwrap()
    }

    #[test]
    fn messages_are_valid_json_rpc() {
        assert_eq!(
            value(&response(r#""a""#, r#"{"x":1}"#)),
            json!({"jsonrpc": "2.0", "id": "a", "result": {"x": 1}})
        );
        assert_eq!(
            value(&error(
                Some("7"),
                -32602,
                "bad \"name\"",
                Some(&json!({"name": "x"}))
            )),
            json!({"jsonrpc": "2.0", "id": 7, "error": {"code": -32602, "message": "bad \"name\"", "data": {"name": "x"}}})
        );
        assert_eq!(
            value(&error(None, -32700, "parse error", None)),
            json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "parse error"}})
        );
        assert_eq!(
            value(&request(r#""s-1""#, "tools/call", Some(br#"{"name":"e"}"#))),
            json!({"jsonrpc": "2.0", "id": "s-1", "method": "tools/call", "params": {"name": "e"}})
        );
        assert_eq!(
            value(&notification(
                "notifications/cancelled",
                Some(r#"{"requestId":1}"#)
            )),
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}})
        );
    }
}
