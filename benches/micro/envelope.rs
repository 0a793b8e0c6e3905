//! How much CPU does the raw path spend on one `tools/call`'s bytes: reading the client's
//! request (the envelope, then the params' top-level fields), writing the upstream's request
//! (name restored, everything else copied), and turning the upstream's answer into the
//! client's (its id put back)? Compared with rmcp's typed model doing the same round trip,
//! for arguments of 256 B, 4 KiB and 64 KiB.

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use serde_json::json;
use switchyard::{
    catalog::NameScheme,
    names::UpstreamName,
    protocol::Era,
    router::{Rewrite, Routed, client_answer, upstream_request},
    wire::{self, Fields},
};

fn request(size: usize) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "jsonrpc": "2.0", "id": 42, "method": "tools/call",
        "params": {"name": "demo__echo", "arguments": {"text": "x".repeat(size)}}
    }))
    .unwrap()
}

fn answer(size: usize) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "jsonrpc": "2.0", "id": 4294967296u64,
        "result": {"content": [{"type": "text", "text": "x".repeat(size)}], "isError": false}
    }))
    .unwrap()
}

/// The raw path: what `router::raw` does with a request and its answer.
fn raw_round_trip(request: &[u8], answer: &[u8], upstream: &UpstreamName) -> usize {
    let Ok(wire::Message::Request(parsed)) = wire::parse(request) else {
        unreachable!()
    };
    let params = Fields::of(parsed.params.unwrap()).unwrap();
    let name = params.get("name").and_then(wire::string).unwrap();
    let rewrite = Rewrite {
        era: Era::Legacy,
        has_progress: false,
        trace: None,
    };
    let sent = upstream_request(
        Routed::Tool.method(),
        Routed::Tool.field(),
        1 << 32,
        &name[6..],
        &params,
        rewrite,
        &[],
    );
    let Ok(wire::Message::Response { result, .. }) = wire::parse(answer) else {
        unreachable!()
    };
    let scheme = NameScheme::prefixed("__");
    let back = client_answer(
        Routed::Tool,
        parsed.id.get(),
        result.get(),
        &scheme,
        upstream,
        Era::Legacy,
    );
    sent.len() + back.len()
}

/// rmcp's typed model: parse the request, serialize it again; parse the answer, serialize it.
fn typed_round_trip(request: &[u8], answer: &[u8]) -> usize {
    let message: ClientJsonRpcMessage = serde_json::from_slice(request).unwrap();
    let sent = serde_json::to_vec(&message).unwrap();
    let answer: ServerJsonRpcMessage = serde_json::from_slice(answer).unwrap();
    let back = serde_json::to_vec(&answer).unwrap();
    sent.len() + back.len()
}

pub fn request_and_answer(c: &mut Criterion) {
    let upstream = UpstreamName::new("demo").unwrap();
    let mut group = c.benchmark_group("envelope");
    for size in [256, 4096, 65536] {
        let (request, answer) = (request(size), answer(size));
        group.throughput(Throughput::Bytes((request.len() + answer.len()) as u64));
        group.bench_with_input(BenchmarkId::new("raw", size), &size, |b, _| {
            b.iter(|| raw_round_trip(black_box(&request), black_box(&answer), &upstream))
        });
        group.bench_with_input(BenchmarkId::new("typed", size), &size, |b, _| {
            b.iter(|| typed_round_trip(black_box(&request), black_box(&answer)))
        });
    }
    group.finish();
}
