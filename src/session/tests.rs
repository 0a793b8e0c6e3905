//! A guard on the work of one routed call: the heap allocations a `tools/call` (of a session,
//! and of a 2026-07-28 client) makes while the gateway serves it (to the demo server over streamable HTTP), and the most
//! bytes it holds at once, counted by the unit tests' allocator while the call's work is
//! polled. A change that adds work to the path raises them and fails here, without a timing.
//! (What hyper's connection tasks do on the way is not counted.)

use std::{path::Path, sync::Arc, time::Duration};

use bytes::Bytes;

use rmcp::model::{ClientCapabilities, Implementation, InitializeRequestParams, ProtocolVersion};

use super::{Client, Parked, Served, Session, serve};
use crate::{
    alloc_meter::measure_polls,
    config::{ProcessVars, parse_str},
    downstream::TaskSupport,
    gateway::Gateway,
    policy::EndpointName,
    principal::Principal,
    protocol::Era,
    request::{Caller, Request},
    wire::Parsed,
};

/// The most allocations the serving of one call of a session may make, and the most bytes it
/// may hold allocated at once (38 or 39, and 5.8 KB, when this was set).
const SESSION_CEILINGS: (u64, u64) = (45, 8 * 1024);
/// The same for a 2026-07-28 call (42 or 43, and 25.2 KB when this was set: most of it the
/// boxed work, which waits on its own if the upstream asks the client something).
const MODERN_CEILINGS: (u64, u64) = (50, 32 * 1024);

/// A `tools/call` of the demo server's `echo`, of `era`.
fn call(id: u32, era: Era) -> Bytes {
    let meta = match era {
        Era::Modern => {
            r#","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#
        }
        Era::Legacy => "",
    };
    Bytes::from(format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"demo__echo","arguments":{{"text":"guarded"}}{meta}}}}}"#
    ))
}

/// A gateway in front of the demo server over streamable HTTP, once it serves it; and the
/// directory of its state.
async fn in_front_of_the_demo_server() -> (Arc<Gateway>, tempfile::TempDir) {
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
    (gateway, state)
}

/// Serves five calls of `era` from `client` (the first ones open connections): the
/// allocations and the most bytes held at once of each.
async fn five_calls(
    gateway: &Arc<Gateway>,
    era: Era,
    client: impl Fn() -> Client,
) -> Vec<(u64, u64)> {
    let mut counts = Vec::new();
    for id in 1..=5 {
        let message = Parsed::read(call(id, era))
            .unwrap()
            .into_request()
            .ok()
            .unwrap();
        let caller = Caller {
            principal: Principal::anonymous(),
            endpoint: EndpointName::MAIN,
        };
        let mut headers = http::HeaderMap::new();
        if era == Era::Legacy {
            headers.insert(
                "mcp-protocol-version",
                http::HeaderValue::from_static("2025-11-25"),
            );
        }
        let request = Request::new(gateway.live(), caller, era, message, headers);
        let Served { work, messages } = serve(gateway, request, client(), None);
        let (answer, measured) = measure_polls(work).await;
        drop(messages);
        let answer = String::from_utf8_lossy(&answer.message).into_owned();
        assert!(answer.contains("guarded"), "{answer}");
        counts.push((measured.allocations, measured.peak_bytes));
    }
    counts
}

/// Fails if the calls after the first two (which open connections) went over the ceilings.
fn within_ceilings(counts: &[(u64, u64)], (most_allocations, most_bytes): (u64, u64)) {
    let allocations = counts[2..].iter().map(|(n, _)| *n).max().unwrap();
    let bytes = counts[2..].iter().map(|(_, bytes)| *bytes).max().unwrap();
    assert!(
        allocations <= most_allocations && bytes <= most_bytes,
        "one routed call made {allocations} allocations, {bytes} bytes at most at once \
         (ceilings {most_allocations} and {most_bytes}; (allocations, bytes) of each call: \
         {counts:?})"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_2026_call_allocates_within_its_ceiling() {
    let (gateway, _state) = in_front_of_the_demo_server().await;
    let parked = Arc::new(Parked::default());
    let counts = five_calls(&gateway, Era::Modern, || Client::Alone(parked.clone())).await;
    within_ceilings(&counts, MODERN_CEILINGS);
}

#[tokio::test(flavor = "current_thread")]
async fn a_session_call_allocates_within_its_ceiling() {
    let (gateway, _state) = in_front_of_the_demo_server().await;
    let client = InitializeRequestParams::new(
        ClientCapabilities::default(),
        Implementation::new("guard", "1"),
    );
    let session = Session::new(
        Arc::from("guard-session"),
        (client, TaskSupport::default()),
        ProtocolVersion::V_2025_11_25,
        Principal::anonymous(),
        EndpointName::MAIN,
        0,
        gateway.live().catalog.versions(),
    );
    let counts = five_calls(&gateway, Era::Legacy, || Client::Session(session.clone())).await;
    within_ceilings(&counts, SESSION_CEILINGS);
}
