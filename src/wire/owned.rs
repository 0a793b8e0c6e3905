//! A JSON-RPC request that owns the bytes it came in, with its parts located once, so that it
//! can be handed to the work that answers it without being parsed again.

use std::ops::Range;

use bytes::Bytes;

use super::envelope::Request;

/// A request and the body it was read from.
#[derive(Debug, Clone)]
pub struct OwnedRequest {
    body: Bytes,
    id: Range<usize>,
    method: Range<usize>,
    params: Option<Range<usize>>,
}

impl OwnedRequest {
    /// `request`, which was parsed from `body`.
    pub fn new(body: Bytes, request: &Request<'_>) -> Self {
        let range = |part: &str| {
            let start = part.as_ptr() as usize - body.as_ptr() as usize;
            start..start + part.len()
        };
        Self {
            id: range(request.id.get()),
            method: range(request.method),
            params: request.params.map(|params| range(params.get())),
            body,
        }
    }

    fn text(&self, range: &Range<usize>) -> &str {
        // The ranges were cut from text serde_json read as UTF-8, at character boundaries.
        std::str::from_utf8(&self.body[range.clone()]).unwrap_or_default()
    }

    /// The id, as the client wrote it (a JSON string or number).
    pub fn id(&self) -> &str {
        self.text(&self.id)
    }

    pub fn method(&self) -> &str {
        self.text(&self.method)
    }

    /// The params as JSON text, if there are any.
    pub fn params(&self) -> Option<&str> {
        self.params.as_ref().map(|range| self.text(range))
    }

    /// The whole message.
    pub fn body(&self) -> &Bytes {
        &self.body
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{Message, parse};

    #[test]
    fn parts_are_found_again_in_the_owned_body() {
        let body = Bytes::from_static(
            br#"{"jsonrpc":"2.0","id":"x-1","method":"tools/call","params":{"name":"a"}}"#,
        );
        let Ok(Message::Request(request)) = parse(&body) else {
            panic!("a request")
        };
        let owned = OwnedRequest::new(body.clone(), &request);
        assert_eq!(owned.id(), r#""x-1""#);
        assert_eq!(owned.method(), "tools/call");
        assert_eq!(owned.params(), Some(r#"{"name":"a"}"#));
    }
}
