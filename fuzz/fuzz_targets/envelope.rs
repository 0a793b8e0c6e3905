//! The JSON-RPC envelope parser every POST goes through (`wire::parse`), with the nesting
//! guard before it and the field reader and owned request after it: any bytes give a message
//! or an error, never a panic, and a request's params read back as fields.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchyard::wire::{self, Fields, Message, OwnedRequest};

fuzz_target!(|input: &[u8]| {
    if wire::nested_deeper_than(input, 64) {
        return;
    }
    // Parsed from the body it is kept with, as the endpoint does.
    let body = bytes::Bytes::copy_from_slice(input);
    let Ok(message) = wire::parse(&body) else {
        return;
    };
    match message {
        Message::Request(request) => {
            let _ = request.params.and_then(Fields::of);
            let owned = OwnedRequest::new(body.clone(), &request);
            assert_eq!(owned.method(), request.method);
        }
        Message::Notification(notification) => {
            let _ = notification.params.and_then(Fields::of);
        }
        Message::Response { .. } | Message::Error { .. } => {}
    }
});
