//! The JSON-RPC envelope parser every POST goes through (`wire::Parsed`, the envelope and the
//! fields of params and `_meta` kept with the body), with the nesting guard before it: any
//! bytes give a message or an error, never a panic, and what is read agrees with itself. The
//! params' fields, split from text already checked as JSON, are those serde_json reads.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchyard::wire::{self, Fields, Message, Parsed};

/// An object's fields as (key, value text), in order.
fn listed(fields: &Fields<'_>) -> Vec<(String, String)> {
    fields
        .iter()
        .map(|(key, value)| (key.to_owned(), value.get().to_owned()))
        .collect()
}

fuzz_target!(|input: &[u8]| {
    if wire::nested_deeper_than(input, 64) {
        return;
    }
    let body = bytes::Bytes::copy_from_slice(input);
    let Ok(parsed) = Parsed::read(body) else {
        return;
    };
    let method = match parsed.message() {
        Message::Request(request) => Some(request.method.to_owned()),
        _ => None,
    };
    if let (Some(split), Message::Request(wire::Request { params: Some(text), .. })) =
        (parsed.params(), parsed.message())
    {
        let read = Fields::of_text(text.get()).expect("split params are an object");
        assert_eq!(listed(split), listed(&read));
    }
    if parsed.meta().is_some() {
        assert!(parsed.params().is_some_and(|params| params.get("_meta").is_some()));
    }
    match parsed.into_request() {
        Ok(request) => {
            assert_eq!(Some(request.method()), method.as_deref());
            let _ = request.params_malformed();
        }
        Err(_) => assert!(method.is_none()),
    }
});
