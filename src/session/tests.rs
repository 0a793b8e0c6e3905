//! A guard on the work of one routed call: the heap allocations a 2026-07-28 `tools/call`
//! makes while the gateway serves it (to the demo server over streamable HTTP), and the most
//! bytes it holds at once, counted by the unit tests' allocator while the call's work is
//! polled. A change that adds work to the path raises them and fails here, without a timing.
//! (What hyper's connection tasks do on the way is not counted.)

use std::{path::Path, sync::Arc, time::Duration};

use bytes::Bytes;

use super::{Client, Parked, Served, serve};
use crate::{
    alloc_meter::measure_polls,
    config::{ProcessVars, parse_str},
    gateway::Gateway,
    policy::EndpointName,
    principal::Principal,
    protocol::Era,
    request::{Caller, Request},
    wire::Parsed,
};

/// The most allocations the serving of one call may make (42 or 43 when this was set).
const MOST_ALLOCATIONS: u64 = 50;
/// The most bytes it may hold allocated at once (25.2 KB when this was set).
const MOST_BYTES: u64 = 32 * 1024;

fn call(id: u32) -> Bytes {
    Bytes::from(format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"demo__echo","arguments":{{"text":"guarded"}},"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{}}}}}}}}"#
    ))
}

#[tokio::test(flavor = "current_thread")]
async fn a_routed_call_allocates_within_its_ceiling() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(crate::demo::serve_http(listener, Default::default()));
    let state = tempfile::tempdir().unwrap();
    let text = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n[admin]\nenabled = false\n[store]\nkind = \"memory\"\n\
         [oauth]\nstate_dir = {:?}\n[upstreams.demo]\nurl = {url:?}\n",
        state.path().display().to_string()
    );
    let config = parse_str(Path::new("guard.toml"), &text, &ProcessVars).unwrap();
    let gateway = Gateway::start(config);
    for _ in 0..200 {
        if !gateway.live().catalog.tools().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(
        !gateway.live().catalog.tools().is_empty(),
        "the demo server is served"
    );
    let parked = Arc::new(Parked::default());
    let mut counts = Vec::new();
    // The first calls open connections; the last ones show the path's steady cost.
    for id in 1..=5 {
        let message = Parsed::read(call(id)).unwrap().into_request().ok().unwrap();
        let caller = Caller {
            principal: Principal::anonymous(),
            endpoint: EndpointName::MAIN,
        };
        let request = Request::new(
            gateway.live(),
            caller,
            Era::Modern,
            message,
            Default::default(),
        );
        let Served { work, messages } =
            serve(&gateway, request, Client::Alone(parked.clone()), None);
        let (answer, measured) = measure_polls(work).await;
        drop(messages);
        let answer = String::from_utf8_lossy(&answer).into_owned();
        assert!(answer.contains("guarded"), "{answer}");
        counts.push((measured.allocations, measured.peak_bytes));
    }
    let allocations = counts[2..].iter().map(|(n, _)| *n).max().unwrap();
    let bytes = counts[2..].iter().map(|(_, bytes)| *bytes).max().unwrap();
    assert!(
        allocations <= MOST_ALLOCATIONS && bytes <= MOST_BYTES,
        "one routed call made {allocations} allocations, {bytes} bytes at most at once \
         (ceilings {MOST_ALLOCATIONS} and {MOST_BYTES}; (allocations, bytes) of each call: \
         {counts:?})"
    );
}
