//! What a message's `Content-Type` says it is: JSON or an event stream (the media type's
//! essence, parameters and case aside).

use http::{HeaderMap, header};

pub const JSON: &str = "application/json";
pub const EVENT_STREAM: &str = "text/event-stream";

/// Whether the body is declared JSON.
pub fn is_json(headers: &HeaderMap) -> bool {
    declared(headers, JSON)
}

/// Whether the body is declared an event stream.
pub fn is_event_stream(headers: &HeaderMap) -> bool {
    declared(headers, EVENT_STREAM)
}

/// Read as bytes: a header value's other bytes cannot make an essence of ASCII match.
fn declared(headers: &HeaderMap, media: &str) -> bool {
    headers.get(header::CONTENT_TYPE).is_some_and(|value| {
        let value = value.as_bytes();
        let essence = memchr::memchr(b';', value).map_or(value, |end| &value[..end]);
        essence.trim_ascii().eq_ignore_ascii_case(media.as_bytes())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_essence_decides() {
        let with = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::CONTENT_TYPE, value.parse().unwrap());
            headers
        };
        assert!(is_json(&with("application/json")));
        assert!(is_json(&with(" Application/JSON ; charset=utf-8")));
        assert!(!is_json(&with("application/jsonl")));
        assert!(is_event_stream(&with("text/event-stream;charset=utf-8")));
        assert!(!is_event_stream(&with("text/plain")));
        assert!(!is_json(&HeaderMap::new()));
        // A parameter outside ASCII leaves the essence readable.
        let latin = http::HeaderValue::from_bytes(b"application/json; x=\xe9").unwrap();
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_TYPE, latin);
        assert!(is_json(&headers));
    }
}
