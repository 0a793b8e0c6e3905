//! A message read once and kept with the bytes it came in: its envelope, and the top-level
//! fields of its params and of their `_meta`, all borrowed from the body, which travels with
//! them. The front reads a message this way and every layer below uses what it read.

use bytes::Bytes;
use self_cell::self_cell;

use super::{EnvelopeError, Fields, Message, Request, parse};

/// What is read of a message.
pub struct Read<'a> {
    pub message: Message<'a>,
    /// The params' fields, where they are an object.
    pub params: Option<Fields<'a>>,
    /// The fields of `params._meta`, where it is an object.
    pub meta: Option<Fields<'a>>,
}

self_cell!(
    /// A message and the body it was read from.
    pub struct Parsed {
        owner: Bytes,
        #[covariant]
        dependent: Read,
    }
);

impl Parsed {
    /// Reads the JSON-RPC message in `body`.
    pub fn read(body: Bytes) -> Result<Self, EnvelopeError> {
        Self::try_new(body, |body| {
            let message = parse(body)?;
            let params = match message {
                Message::Request(Request { params, .. })
                | Message::Notification(super::Notification { params, .. }) => {
                    params.and_then(Fields::of)
                }
                Message::Response { .. } | Message::Error { .. } => None,
            };
            let meta = params
                .as_ref()
                .and_then(|params| params.get("_meta"))
                .and_then(Fields::of);
            Ok(Read {
                message,
                params,
                meta,
            })
        })
    }

    pub fn message(&self) -> &Message<'_> {
        &self.borrow_dependent().message
    }

    pub fn params(&self) -> Option<&Fields<'_>> {
        self.borrow_dependent().params.as_ref()
    }

    pub fn meta(&self) -> Option<&Fields<'_>> {
        self.borrow_dependent().meta.as_ref()
    }

    /// The whole message.
    pub fn body(&self) -> &Bytes {
        self.borrow_owner()
    }

    /// The message, as a request if it is one.
    pub fn into_request(self) -> Result<ParsedRequest, Self> {
        match self.message() {
            Message::Request(_) => Ok(ParsedRequest(self)),
            _ => Err(self),
        }
    }
}

/// A parsed message that is a request.
pub struct ParsedRequest(Parsed);

impl ParsedRequest {
    fn request(&self) -> &Request<'_> {
        match self.0.message() {
            Message::Request(request) => request,
            // `into_request` made it of a request only.
            _ => unreachable!("a parsed request holds a request"),
        }
    }

    /// The id, as the client wrote it (a JSON string or number).
    pub fn id(&self) -> &str {
        self.request().id.get()
    }

    pub fn method(&self) -> &str {
        self.request().method
    }

    /// The params as JSON text, if there are any.
    pub fn params_text(&self) -> Option<&str> {
        self.request().params.map(|params| params.get())
    }

    /// The params' fields, where they are an object.
    pub fn params(&self) -> Option<&Fields<'_>> {
        self.0.params()
    }

    /// Whether there are params that are not an object.
    pub fn params_malformed(&self) -> bool {
        self.request().params.is_some() && self.0.params().is_none()
    }

    /// The fields of `params._meta`, where it is an object.
    pub fn meta(&self) -> Option<&Fields<'_>> {
        self.0.meta()
    }

    /// The whole message.
    pub fn body(&self) -> &Bytes {
        self.0.body()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_read_once_with_its_params_and_meta() {
        let body = Bytes::from_static(
            br#"{"jsonrpc":"2.0","id":"x-1","method":"tools/call","params":{"name":"a","_meta":{"progressToken":7}}}"#,
        );
        let Ok(request) = Parsed::read(body).unwrap().into_request() else {
            panic!("a request")
        };
        assert_eq!(request.id(), r#""x-1""#);
        assert_eq!(request.method(), "tools/call");
        let name = request.params().and_then(|p| p.get("name")).unwrap();
        assert_eq!(name.get(), r#""a""#);
        let token = request.meta().and_then(|m| m.get("progressToken")).unwrap();
        assert_eq!(token.get(), "7");
        assert!(!request.params_malformed());
    }

    #[test]
    fn params_that_are_not_an_object_are_told_apart_from_none() {
        let read = |text: &'static str| {
            let Ok(request) = Parsed::read(Bytes::from_static(text.as_bytes()))
                .unwrap()
                .into_request()
            else {
                panic!("a request")
            };
            request.params_malformed()
        };
        assert!(read(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":[1]}"#
        ));
        assert!(!read(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#));
    }

    #[test]
    fn a_notification_is_not_a_request() {
        let body = Bytes::from_static(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        assert!(Parsed::read(body).unwrap().into_request().is_err());
    }
}
