//! JSON-RPC and server-sent events on the wire, without a typed round trip: the hot path reads
//! only a message's envelope and the fields it must change, and writes messages around JSON
//! text it passes on unchanged. The typed model (rmcp's) is for the slow paths.

mod answer;
mod depth;
pub mod envelope;
pub mod media;
pub mod object;
pub mod parsed;
mod split;
pub mod sse;
pub mod write;

pub use answer::{Answer, Outcome};
pub use depth::nested_deeper_than;
pub use envelope::{EnvelopeError, Message, Notification, Request, parse, string};
pub use object::{Edit, Fields};

use bytes::Bytes;

/// `bytes` as `Bytes`, without the bookkeeping allocation `Bytes` makes for a vector with
/// room to spare (shrinking a buffer's allocation in place costs less than that).
pub fn freeze(bytes: Vec<u8>) -> Bytes {
    Bytes::from(bytes.into_boxed_slice())
}
pub use parsed::{Parsed, ParsedRequest};

/// Whether `answer`, a JSON-RPC response as Switchyard writes them (`jsonrpc`, `id`, then
/// `result` or `error`), is an error. Only its head is looked at: inside the id, a string,
/// `,"` cannot occur unescaped. (An id of over 200 bytes hides the answer's kind: taken as
/// a result.)
pub fn is_error_answer(answer: &[u8]) -> bool {
    let answer = &answer[..answer.len().min(256)];
    let error = memchr::memmem::find(answer, br#","error":"#);
    let result = memchr::memmem::find(answer, br#","result":"#);
    match (error, result) {
        (Some(error), Some(result)) => error < result,
        (Some(_), None) => true,
        _ => false,
    }
}

/// Whether a tool's answer says the tool failed (`"isError":true`, as JSON writers put it,
/// found from the end, where serializers write it).
pub fn reports_tool_failure(answer: &[u8]) -> bool {
    // The searcher is built once: building it costs more than searching a small answer.
    static IS_ERROR: std::sync::LazyLock<memchr::memmem::FinderRev<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::FinderRev::new(br#""isError":"#));
    IS_ERROR.rfind(answer).is_some_and(|at| {
        answer[at + 10..]
            .iter()
            .find(|b| !b.is_ascii_whitespace())
            .is_some_and(|b| *b == b't')
    })
}

/// Whether a tool call's `result` says the tool failed (its own `isError: true`).
pub fn reports_failure(result: &serde_json::value::RawValue) -> bool {
    Fields::of(result)
        .and_then(|fields| fields.get("isError"))
        .is_some_and(|flag| flag.get() == "true")
}

#[cfg(test)]
mod tests;
