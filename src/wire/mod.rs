//! JSON-RPC and server-sent events on the wire, without a typed round trip: the hot path reads
//! only a message's envelope and the fields it must change, and writes messages around JSON
//! text it passes on unchanged. The typed model (rmcp's) is for the slow paths.

pub mod envelope;
pub mod object;
pub mod owned;
pub mod sse;
pub mod write;

pub use envelope::{EnvelopeError, Message, Notification, Request, parse, string};
pub use object::{Edit, Fields};

use bytes::Bytes;

/// `bytes` as `Bytes`, without the bookkeeping allocation `Bytes` makes for a vector with
/// room to spare (shrinking a buffer's allocation in place costs less than that).
pub fn freeze(bytes: Vec<u8>) -> Bytes {
    Bytes::from(bytes.into_boxed_slice())
}
pub use owned::OwnedRequest;
