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

fn declared(headers: &HeaderMap, media: &str) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case(media))
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
    }
}
