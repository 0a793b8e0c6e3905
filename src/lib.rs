//! Switchyard: an MCP gateway. It connects, as an MCP client, to many upstream MCP servers
//! (local processes over stdio, remote servers over streamable HTTP or the legacy HTTP+SSE
//! transport) and serves their merged, server-prefixed catalog of tools, prompts and resources
//! as one streamable-HTTP MCP endpoint.
//!
//! # Layout
//!
//! The module tree follows the path of a request, and imports run one way, down this table:
//! a module uses only those of the rows below its own (`tests/it/layers.rs` holds it to that,
//! and to this table).
//!
//! | modules      | own                                                                         |
//! |--------------|-----------------------------------------------------------------------------|
//! | `front`      | the HTTP listener and its Host guard; the MCP endpoint (`front::mcp`: the streamable HTTP transport, sessions ids, event streams), `/healthz`, the OAuth connect pages and callback |
//! | `auth`, `session` | who the caller is (JWTs, API keys, the admin token); client sessions (a small record each), and the serving of one request: raw, prepared lists, or rmcp's typed handler, with the calls of 2026-07-28 clients that wait for their answers |
//! | `router`     | exposed name or URI → owning upstream (the request's target, found once); forwarding on the raw path or the typed one |
//! | `request`    | one client request as the layers below the front see it: caller, endpoint, era, the message read once, what its client declared, the client's headers, the snapshot it is answered from |
//! | `gateway`    | the snapshot a reload or a rebuild swaps whole (`Live`: config, upstreams, their merged catalog, with its lookups) and the shared services: OAuth, the store, resource subscriptions, metrics |
//! | `upstream`   | per-upstream state, transports (stdio, streamable HTTP, legacy SSE), the raw HTTP exchange, discovery (with what tools need of clients), supervision, limits |
//! | `pins`       | the approved definitions of pinned tools |
//! | `approval`, `catalog`, `downstream`, `oauth`, `quota` | calls waiting for an operator's approval (`[[policy]] approval`); the merged, immutable catalog snapshot, its prepared list pages, the naming scheme, and its views per endpoint, policy and client features; the client side of a request (outlets, questions to the client, log levels); Switchyard as the OAuth client of upstreams (discovery, tokens per principal, the encrypted store, users' own tokens exchanged); what a call may spend (`[[quota]]` and the per-principal `[limits]`, counted in Redis or in the process) |
//! | `audit`, `error`, `store` | the hash-chained audit log; errors by side (in words, repeats counted); what outlives the process and what replicas share (which sessions are alive, their stream events, upstream sessions and subscriptions, in the embedded file or in Redis; private files) |
//! | `telemetry`  | OpenTelemetry traces: whether a request is traced, its spans, the trace context taken from the client and passed to upstreams |
//! | `config`, `events`, `hook`, `metrics`, `protocol`, `wire` | configuration (parse → validate → runtime types), what operators are told as it happens, the per-request header hook, Prometheus metrics, protocol facts, JSON-RPC, SSE and media types on the wire |
//! | `guardrail`  | guardrails: secrets and personal data found in tool results or call arguments, and what is done about them; the policy hooks asked about calls (HTTP) |
//! | `policy`     | who may see what: rules, virtual endpoints, name patterns |
//! | `clock`, `expiring`, `meaning`, `names`, `principal`, `text`, `wake` | Unix time, entries that expire, the sentence encoder of tool search and the vectors it made, identifier newtypes, whom a request is for, text from elsewhere made safe to show, the waker of a future polled again in place when it wakes itself |
//!
//! Beside the path, and above it (they may use any of it): `passthrough`
//! (`/servers/{name}/mcp`: one upstream proxied as it is over its pooled HTTP client, under
//! the same admission), `handover` (listening sockets handed to a new binary), `admin`, `reload` and
//! `startup` (what a person who started it is told). `cli` is the `switchyard` command, which
//! is all the binary calls (compiled here, so that the binary is only linked); only it uses
//! `demo` (the server the default configuration serves, also the fast upstream of the benches)
//! and `import` (MCP clients' configurations read into one). The load generator of `switchyard bench` is a crate
//! of its own (`crates/bench`), and so is the test support the official conformance suite runs
//! against (`crates/conformance`). Below everything, `allocator` is the binary's allocator
//! (mimalloc) and `alloc_meter` the unit tests' (the system's, counting).
//!
//! # The life of a `tools/call`
//!
//! 1. `front`: hyper accepts the POST (on a connection whose task is polled again in place
//!    when it wakes itself, `front::repoll`) and hands it to `McpEndpoint`, which checks Host and
//!    Origin, authenticates the caller, checks what the client accepts and sends, reads the
//!    body (within its limit), and reads it once (`wire::Parsed`: the JSON-RPC envelope and the
//!    top-level fields of `params` and `_meta`, borrowed slices of the body, no typed model).
//!    The message's era decides the rest: a session's request (looked up by `Mcp-Session-Id` in
//!    a sharded table) is answered on an event stream; a 2026-07-28 request with JSON, or a
//!    stream if something comes before the answer. The front builds the `request::Request`:
//!    the caller, the era, the message, the headers and the gateway's snapshot, loaded once.
//! 2. `session::serve` starts the request's work, which runs inside the reply's body (a
//!    client that goes away takes it along), in phases: classify the method; route a routed
//!    request to its target (`router::Target`: the route in the caller's view, the upstream
//!    found serving), once for both eras; let the guardrails see a tool call (arguments
//!    screened, policy hooks asked; new arguments make a request of their own); admit it (the
//!    audit log keeping up, approval, `[[quota]]`);
//!    dispatch it on the raw or the typed path, chosen once (`tools/call` to a
//!    streamable-HTTP upstream takes the raw one), through the cache where a rule says so;
//!    finish the answer (linked resources inlined, the guardrails of the result, the audit
//!    record).
//! 3. `router::raw`: the upstream's limit (if any) admits it and its connection is found (the
//!    session's own, opened on first use, or the shared one).
//! 4. The upstream request is written from the client's bytes: the name restored, the id
//!    replaced by the gateway's own, `_meta` rewritten only if it holds a progress token or
//!    keys the upstream's era must not see; everything else is copied as it came.
//! 5. `upstream::exchange` posts it on the upstream session rmcp's worker opened, over a
//!    keep-alive connection, with the hook's headers (an OAuth token, renewed first if due) and,
//!    to a 2026-07-28 upstream, the SEP-2243 ones (`Mcp-Method`, `Mcp-Name`, and the
//!    `Mcp-Param-*` of a tool's annotated arguments, written from the arguments). A
//!    plain-HTTP upstream's connection is driven by the request's own task until its answer
//!    has ended (`upstream::raw_client`); an HTTPS one's by hyper's pooled client. The answer
//!    comes back as JSON or an event stream; progress and log messages on the way go straight
//!    to the client's outlet, and requests for the client (sampling, elicitation, roots) go
//!    through rmcp's handler of the connection, which the relay points at this request. Timeouts, the client's cancellation and an upstream outage end it, and the
//!    upstream is told to cancel.
//! 6. The answer goes back with the client's id put in front of the upstream's result bytes
//!    (resource URIs mapped where the catalog prefixes them); an upstream error passes
//!    through; a failure becomes an error naming the upstream (`error::GatewayError`).
//!
//! Other transports (stdio, legacy SSE), servers that speak only 2026-07-28 to session clients
//! (whose `input_required` Switchyard answers by asking the client), and the less frequent
//! methods take the typed path: rmcp's model and handler, one short-lived service per request.
//!
//! # Where more attaches
//!
//! - Traces: `request::Request` decides whether a request is traced as it is built
//!   (`telemetry::Trace`); `session::serve` runs it in its server span, `router` adds the
//!   routing, connection and upstream-call spans and passes the call's context on (a header on
//!   HTTP, `params._meta.traceparent` everywhere); OAuth refreshes and store calls add theirs.
//! - Metrics: `front::mcp` (requests by method and outcome, sessions, streams), `router::raw`
//!   and the typed `Call::send` (calls by upstream, tool and outcome), the supervisor (states,
//!   restarts) and the gateway's catalog rebuilds.
//! - Authentication: `front::mcp` asks `auth` who the caller is before `session::serve` (the
//!   principal goes into the request and the session record; a session answers
//!   only its own principal, and each request is judged by its own credentials). The admin
//!   token (`auth::AdminToken`) guards the admin listener and the operator's views. Upstream OAuth tokens are per (upstream, principal):
//!   per-client sessions carry their principal's, and where an upstream is shared each user
//!   gets their own connection (`upstream::principals`). Policy (`policy`) decides what
//!   each principal sees at each endpoint: the catalog snapshot builds one view per (endpoint,
//!   applying rules) on first use (`catalog::view`), and every request lists, routes and
//!   resolves URIs through its own view, so what it may not see is simply unknown to it.
//!   Upstreams with `discovery = "per_user"` are merged into each user's view from their own
//!   lists (`gateway::personal`).
//! - Hot reload: a new config swaps a new snapshot in (`gateway::Live`: config, upstreams and
//!   the catalog built for them, together), and sessions find upstreams by name in the
//!   snapshot of each request.

pub mod admin;
#[cfg(test)]
mod alloc_meter;
pub mod allocator;
pub mod approval;
pub mod audit;
pub mod auth;
pub mod catalog;
pub mod cli;
pub mod clock;
pub mod config;
pub mod demo;
pub mod downstream;
pub mod error;
pub mod events;
pub mod expiring;
pub mod front;
pub mod gateway;
pub mod guardrail;
pub mod handover;
pub mod hook;
pub mod import;
pub mod meaning;
pub mod metrics;
pub mod names;
pub mod oauth;
pub mod passthrough;
pub mod pins;
pub mod policy;
pub mod principal;
pub mod protocol;
pub mod quota;
pub mod reload;
pub mod request;
pub mod router;
pub mod session;
pub mod startup;
pub mod store;
pub mod telemetry;
pub mod text;
pub mod upstream;
pub mod wake;
pub mod wire;

pub use gateway::Gateway;
