//! What a guardrail costs a call it covers, as the gateway pays it: the answer of about 4 KB
//! (a page of text, a few structured fields) read, screened by every detector, and written
//! again, with nothing found, and with a dozen findings redacted. A call no guardrail covers
//! is not looked at (nothing to measure).

use std::hint::black_box;

use criterion::Criterion;
use serde_json::{Value, json};
use switchyard::guardrail::{ALL, screen};

/// A JSON-RPC answer of about 4 KB: prose, plus `extra` in its last line.
fn answer(extra: &str) -> Vec<u8> {
    let prose = "The quarterly report lists every shipment by region, with its weight, \
                 its carrier and the day it left the warehouse. "
        .repeat(30);
    let result = json!({
        "content": [
            {"type": "text", "text": format!("{prose}\n{extra}")},
            {"type": "text", "text": "Shipments: 1,204. Regions: 7. Late: 3."}
        ],
        "structuredContent": {"shipments": 1204, "regions": ["north", "south", "east"], "note": "ok"}
    });
    json!({"jsonrpc": "2.0", "id": 7, "result": result})
        .to_string()
        .into_bytes()
}

/// What the gateway does with a covered answer: read, screen, written again.
fn guarded(answer: &[u8]) -> usize {
    let mut message: Value = serde_json::from_slice(answer).unwrap();
    let findings = screen(&mut message["result"], &ALL, true);
    black_box(findings);
    message.to_string().len()
}

pub fn screening(c: &mut Criterion) {
    let mut group = c.benchmark_group("guardrail");
    let clean = answer("");
    group.bench_function("4 KB, every detector, nothing found", |b| {
        b.iter(|| guarded(black_box(&clean)))
    });
    let leaky = answer(
        &"contact ada@example.org or +44 20 7946 0958, key AKIAIOSFODNN7EXAMPLE, card \
          4111 1111 1111 1111. "
            .repeat(3),
    );
    group.bench_function("4 KB, every detector, 12 findings redacted", |b| {
        b.iter(|| guarded(black_box(&leaky)))
    });
    group.finish();
}
