//! Switchyard: an MCP gateway. It connects, as an MCP client, to many upstream MCP servers
//! (local processes over stdio, remote servers over streamable HTTP or the legacy HTTP+SSE
//! transport) and serves their merged, server-prefixed catalog of tools, prompts and resources
//! as one streamable-HTTP MCP endpoint.
//!
//! # Layout
//!
//! The module tree follows the path of a request:
//!
//! | module     | owns                                                                          |
//! |------------|-------------------------------------------------------------------------------|
//! | `front`    | the HTTP listener: the MCP endpoint (rmcp's streamable-HTTP service), `/healthz` |
//! | `session`  | one rmcp `ServerHandler` per downstream session, and that session's upstream sessions |
//! | `router`   | exposed name or URI → owning upstream; forwarding with the original name restored |
//! | `catalog`  | the merged, immutable catalog snapshot and the reversible naming scheme       |
//! | `upstream` | per-upstream state, transports (stdio, streamable HTTP, legacy SSE), discovery, supervision, limits |
//!
//! Beside the path: `config` (parse → validate → runtime types), `gateway` (the shared state:
//! config, upstreams, catalog in an `ArcSwap`), `oauth` (Switchyard as the OAuth client of
//! upstreams: discovery, tokens per principal, the encrypted store; its HTTP endpoints are in
//! `front`), `principal` (whom a request is made for), `error` (errors by side, mapped to
//! JSON-RPC in one place), `names` (identifier newtypes), `demo` (the server the default
//! configuration serves, also the upstream fixture of benches), `bench` (the load and soak
//! tool `switchyard bench`, and its baseline proxy `switchyard bare-hop`) and `conformance`
//! (what the official conformance suite runs against: a fixture server, directly and through
//! the gateway, and an OAuth client built on the gateway).
//!
//! # The life of a `tools/call`
//!
//! 1. `front`: hyper accepts the POST; axum hands it to `McpEndpoint`, which passes it to rmcp's
//!    `StreamableHttpService`. rmcp checks Host/Origin, headers and the session id, parses the
//!    JSON-RPC message and dispatches it to the session's handler task.
//! 2. `session::SessionHandler::call_tool` picks the connection source: the session's own
//!    upstream sessions, or the shared ones for stateless (2026-07-28) requests.
//! 3. `router::call_tool` loads the catalog snapshot (no lock), looks up the exposed name, copies
//!    out the route (upstream name and original tool name, both shared pointers) and lets go of
//!    the snapshot.
//! 4. The source returns the connection: the upstream's shared one, or the session's own, opened
//!    on first use (`session::SessionUpstreams`).
//! 5. The router restores the original name, takes a place under the upstream's
//!    `max_concurrent_requests` (only if one is set), and sends the request on the rmcp `Peer`
//!    of that connection, racing the client's cancellation token, the request's timeout (which
//!    the upstream's progress notifications extend) and the supervisor finding the upstream
//!    gone. What the upstream sends meanwhile (progress, log messages, requests for sampling,
//!    elicitation, roots) reaches this client through the connection's relay.
//! 6. `upstream`: the request goes out over the child's stdin, or as an HTTP POST whose headers
//!    the connection's `RequestHook` fills in (for an OAuth upstream, with the principal's
//!    access token, renewed first if it is due).
//! 7. The result comes back unchanged (but for the URIs of resources it links, mapped like
//!    listed ones); an upstream JSON-RPC error passes through, a transport failure becomes an
//!    error naming the upstream (`error::GatewayError`). A 2026-07-28 server's `input_required`
//!    goes to a 2026-07-28 client as it is; for a session client the router asks the client
//!    and sends the call again with the answers.

pub mod bench;
pub mod catalog;
pub mod config;
pub mod conformance;
pub mod demo;
pub mod error;
pub mod front;
pub mod gateway;
pub mod names;
pub mod oauth;
pub mod principal;
pub mod router;
pub mod session;
pub mod upstream;

pub use gateway::Gateway;
