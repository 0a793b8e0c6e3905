//! A request's trace: the W3C trace context its client sent (a `traceparent` header, or
//! `params._meta.traceparent`), the decision to trace it, its server span, and what its
//! upstream calls pass on — the context of the gateway's own upstream-call span when the
//! request is traced, else the client's as it came.

use std::{cell::Cell, sync::OnceLock};

use http::{HeaderMap, HeaderName, HeaderValue};
use opentelemetry::{
    propagation::{Extractor, TextMapPropagator},
    trace::TraceContextExt,
};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use super::{TARGET, on, ratio};
use crate::wire::Fields;

pub const TRACEPARENT: &str = "traceparent";
pub const TRACESTATE: &str = "tracestate";
const TRACEPARENT_HEADER: HeaderName = HeaderName::from_static(TRACEPARENT);
const TRACESTATE_HEADER: HeaderName = HeaderName::from_static(TRACESTATE);

/// What a request knows of its trace.
pub struct Trace {
    /// The request's server span; disabled when the request is not traced.
    span: tracing::Span,
    /// The client's context, as it sent it.
    client: Option<Passed>,
    /// What upstream calls pass on, once an upstream call span exists.
    call: OnceLock<Passed>,
}

/// The trace context passed to an upstream.
#[derive(Debug, Clone)]
pub struct Passed {
    pub traceparent: HeaderValue,
    pub tracestate: Option<HeaderValue>,
    /// It goes into `params._meta` too (the request's `_meta` does not carry it already).
    pub into_meta: bool,
}

impl Passed {
    /// The `_meta` keys it is written as (`traceparent`, and `tracestate` if any).
    pub fn fields(&self) -> impl Iterator<Item = (&'static str, &str)> {
        let traceparent = self.traceparent.to_str().ok().map(|v| (TRACEPARENT, v));
        let tracestate = (self.tracestate.as_ref())
            .and_then(|v| v.to_str().ok())
            .map(|v| (TRACESTATE, v));
        traceparent.into_iter().chain(tracestate)
    }

    /// The headers it is sent as to an HTTP upstream.
    pub fn headers(&self) -> impl Iterator<Item = (http::HeaderName, HeaderValue)> + '_ {
        let traceparent = (TRACEPARENT_HEADER, self.traceparent.clone());
        let tracestate = (self.tracestate.clone()).map(|v| (TRACESTATE_HEADER, v));
        std::iter::once(traceparent).chain(tracestate)
    }
}

/// What a request's server span is named by, as it arrives.
pub struct Arriving<'a> {
    pub method: &'a str,
    /// The protocol version, where it is known.
    pub era: Option<&'a str>,
    pub id: &'a str,
    pub principal: &'a str,
    pub endpoint: &'a str,
}

impl Trace {
    /// A request with no trace (one Switchyard makes itself).
    pub fn none() -> Self {
        Self {
            span: tracing::Span::none(),
            client: None,
            call: OnceLock::new(),
        }
    }

    /// The trace of a request arriving with `headers` and `meta`: traced if its client's
    /// context says it is sampled, or (without one) at the configured ratio.
    pub fn of(headers: &HeaderMap, meta: Option<&Fields<'_>>, arriving: &Arriving<'_>) -> Self {
        // Only what W3C trace context allows goes on: a client cannot have Switchyard send an
        // upstream arbitrary text in these headers.
        // Looked up by prebuilt names: a name given as text is parsed again at each lookup.
        let header = |name: &HeaderName| {
            headers
                .get(name)
                .filter(|value| well_formed(name.as_str(), value))
                .cloned()
        };
        if !on() {
            // Not a participant: an HTTP upstream gets the client's headers as they came.
            return Self {
                client: header(&TRACEPARENT_HEADER).map(|traceparent| Passed {
                    traceparent,
                    tracestate: header(&TRACESTATE_HEADER),
                    into_meta: false,
                }),
                ..Self::none()
            };
        }
        let from_meta = |name| {
            meta.and_then(|meta| meta.get(name))
                .and_then(crate::wire::string)
                .and_then(|value| HeaderValue::try_from(value.as_ref()).ok())
                .filter(|value| well_formed(name, value))
        };
        let client = match from_meta(TRACEPARENT) {
            Some(traceparent) => Some(Passed {
                traceparent,
                tracestate: from_meta(TRACESTATE),
                into_meta: false,
            }),
            None => header(&TRACEPARENT_HEADER).map(|traceparent| Passed {
                traceparent,
                tracestate: header(&TRACESTATE_HEADER),
                into_meta: true,
            }),
        };
        let parent = client
            .as_ref()
            .map(|client| TraceContextPropagator::new().extract(&Carrier(client)));
        let decided = parent
            .as_ref()
            .map(|parent| parent.span().span_context().clone())
            .filter(|context| context.is_valid());
        let traced = match &decided {
            Some(context) => context.is_sampled(),
            None => chance() < ratio(),
        };
        if !traced {
            return Self {
                span: tracing::Span::none(),
                client,
                call: OnceLock::new(),
            };
        }
        let span = tracing::trace_span!(
            target: TARGET,
            "request",
            otel.name = arriving.method,
            otel.kind = "server",
            otel.status_code = tracing::field::Empty,
            "mcp.method.name" = arriving.method,
            "mcp.protocol.version" = arriving.era,
            "jsonrpc.request.id" = arriving.id,
            "enduser.id" = arriving.principal,
            "switchyard.endpoint" = arriving.endpoint,
            "mcp.session.id" = tracing::field::Empty,
            "switchyard.upstream" = tracing::field::Empty,
            "gen_ai.tool.name" = tracing::field::Empty,
            "gen_ai.prompt.name" = tracing::field::Empty,
            "mcp.resource.uri" = tracing::field::Empty,
            "error.type" = tracing::field::Empty,
            "rpc.response.status_code" = tracing::field::Empty,
        );
        if let (Some(parent), Some(_)) = (parent, decided) {
            let _ = span.set_parent(parent);
        }
        Self {
            span,
            client,
            call: OnceLock::new(),
        }
    }

    /// The trace of a request made within this one's (a gateway tool's inner call): the same
    /// span and client context.
    pub fn nested(&self) -> Self {
        Self {
            span: self.span.clone(),
            client: self.client.clone(),
            call: OnceLock::new(),
        }
    }

    /// The request's server span (disabled when it is not traced).
    pub fn span(&self) -> &tracing::Span {
        &self.span
    }

    pub fn is_traced(&self) -> bool {
        !self.span.is_disabled()
    }

    /// Names the session the request belongs to (its short hash, never its id).
    pub fn session(&self, hash: &str) {
        self.span.record("mcp.session.id", hash);
    }

    /// Names where the request (of `method`) was routed: the upstream, and its tool, prompt
    /// or resource (as the client named it). Spans of tools and prompts are named after them.
    pub fn routed(&self, method: &str, upstream: &str, item: &str) {
        if !self.is_traced() {
            return;
        }
        self.span.record("switchyard.upstream", upstream);
        let attribute = match method {
            "resources/read" => "mcp.resource.uri",
            "prompts/get" => "gen_ai.prompt.name",
            _ => "gen_ai.tool.name",
        };
        self.span.record(attribute, item);
        if attribute != "mcp.resource.uri" {
            // The span has started (it was entered): renamed on the OpenTelemetry side.
            (self.span.context().span()).update_name(format!("{method} {item}"));
        }
    }

    /// Records how the request ended, from its answer.
    pub fn finish(&self, answer: &[u8]) {
        if !self.is_traced() {
            return;
        }
        let Ok(crate::wire::Message::Error { error, .. }) = crate::wire::parse(answer) else {
            return;
        };
        let code = Fields::of(error)
            .and_then(|fields| fields.get("code"))
            .map(|code| code.get().to_owned())
            .unwrap_or_default();
        self.span.record("otel.status_code", "ERROR");
        self.span.record("error.type", code.as_str());
        self.span.record("rpc.response.status_code", code.as_str());
    }

    /// The span of the request's call of `method` to `upstream` over `transport` (a client
    /// span: its context is what the upstream is given), or a disabled one when the request
    /// is not traced.
    pub fn upstream_call(
        &self,
        method: &str,
        upstream: &str,
        transport: &'static str,
    ) -> tracing::Span {
        if !self.is_traced() {
            return tracing::Span::none();
        }
        let call = tracing::trace_span!(
            target: TARGET,
            parent: &self.span,
            "upstream",
            otel.name = method,
            otel.kind = "client",
            "switchyard.upstream" = upstream,
            "network.transport" = transport,
        );
        let context = call.context();
        let span = context.span();
        let context = span.span_context();
        let traceparent = format!(
            "00-{}-{}-{:02x}",
            context.trace_id(),
            context.span_id(),
            context.trace_flags().to_u8()
        );
        let tracestate = context.trace_state().header();
        if let Ok(traceparent) = HeaderValue::try_from(traceparent) {
            let _ = self.call.set(Passed {
                traceparent,
                tracestate: (!tracestate.is_empty())
                    .then(|| HeaderValue::try_from(tracestate).ok())
                    .flatten(),
                into_meta: true,
            });
        }
        call
    }

    /// What an upstream call passes on: the upstream-call span's context when the request is
    /// traced, else the client's as it came; `None` without either.
    pub fn passed(&self) -> Option<&Passed> {
        self.call.get().or(self.client.as_ref())
    }
}

/// Whether `value` is a `traceparent` of the W3C format (`VV-TRACE32-SPAN16-FF`, lowercase
/// hex, the version not `ff`), or a `tracestate` of at most 512 printable characters.
fn well_formed(name: &str, value: &HeaderValue) -> bool {
    let bytes = value.as_bytes();
    if name == TRACESTATE {
        return bytes.len() <= 512 && bytes.iter().all(|b| (0x20..0x7f).contains(b));
    }
    let hex = |part: &[u8]| {
        part.iter()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
    };
    bytes.len() >= 55
        && bytes[2] == b'-'
        && bytes[35] == b'-'
        && bytes[52] == b'-'
        && hex(&bytes[..2])
        && &bytes[..2] != b"ff"
        && hex(&bytes[3..35])
        && hex(&bytes[36..52])
        && hex(&bytes[53..55])
        // Version 00 is exactly 55 characters; later versions may add fields after a dash.
        && (bytes.len() == 55 || (&bytes[..2] != b"00" && bytes[55] == b'-'))
}

/// The client's context as the propagator reads it.
struct Carrier<'a>(&'a Passed);

impl Extractor for Carrier<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        match key {
            TRACEPARENT => self.0.traceparent.to_str().ok(),
            TRACESTATE => self.0.tracestate.as_ref()?.to_str().ok(),
            _ => None,
        }
    }

    fn keys(&self) -> Vec<&str> {
        vec![TRACEPARENT, TRACESTATE]
    }
}

/// A number in [0, 1), different at every call: enough to sample by (not for secrets).
fn chance() -> f64 {
    thread_local! {
        static STATE: Cell<u64> = Cell::new({
            use std::hash::{BuildHasher, Hasher};
            let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
            hasher.write_u64(0x9e37_79b9_7f4a_7c15);
            hasher.finish() | 1
        });
    }
    STATE.with(|state| {
        // xorshift64*
        let mut x = state.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        state.set(x);
        (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    })
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::{TRACEPARENT, TRACESTATE, well_formed};

    #[test]
    fn only_w3c_trace_context_is_passed_on() {
        let ok = |name, text| well_formed(name, &HeaderValue::from_static(text));
        assert!(ok(
            TRACEPARENT,
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        ));
        assert!(ok(
            TRACEPARENT,
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-xyz"
        ));
        for bad in [
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "<script>alert(1)</script>",
            "",
        ] {
            assert!(!ok(TRACEPARENT, bad), "{bad}");
        }
        assert!(ok(TRACESTATE, "vendor=opaque,other=1"));
        assert!(!well_formed(
            TRACESTATE,
            &HeaderValue::from_bytes(&[b'a'; 600]).unwrap()
        ));
    }
}
