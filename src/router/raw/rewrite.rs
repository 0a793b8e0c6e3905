//! The bytes of the raw path: the upstream's request written from the client's (name or URI
//! restored, `_meta` rewritten only where it must be), and the client's answer from the
//! upstream's (id put back, URIs mapped, shaped for the client's era). Only what must change
//! is parsed; the rest is copied.

use bytes::Bytes;
use rmcp::model::ErrorCode;
use serde_json::value::RawValue;

use super::{Routed, uris};
use crate::{
    catalog::NameScheme,
    names::UpstreamName,
    protocol::{Era, META_PREFIX, META_PROGRESS_TOKEN},
    telemetry::{Passed, TRACEPARENT, TRACESTATE},
    wire::{self, Answer, Edit, Fields, object::write_string},
};

/// The answer to request `id` (JSON text) of a client of `era`, from the `result` (JSON
/// text) an upstream gave: its resource URIs mapped as the catalog maps them, and in the shape
/// of the client's era. Only what must change is parsed; the rest is copied.
pub fn client_answer(
    kind: Routed,
    id: &str,
    result: &str,
    scheme: &NameScheme,
    upstream: &UpstreamName,
    era: Era,
) -> Bytes {
    let mapped = uris::expose_raw(scheme, upstream, kind, result);
    let result = mapped.as_deref().unwrap_or(result);
    let shaped = shape_for(result, era);
    wire::write::response(id, shaped.as_deref().unwrap_or(result))
}

/// What a routed request's `_meta` must lose, or gain, on its way upstream.
#[derive(Debug, Clone, Copy)]
pub struct Rewrite<'a> {
    /// The era of the upstream session: a legacy one must not see the 2026-07-28 lifecycle keys
    /// (it announced its client at `initialize`).
    pub era: Era,
    /// The client asked for progress: its token is replaced by the request's own id, so that
    /// progress comes back under a token no other client uses.
    pub has_progress: bool,
    /// The trace context the upstream is given in `_meta` (replacing the client's).
    pub trace: Option<&'a Passed>,
}

/// The upstream request `number` of `method` whose params are the client's `params`, as they
/// came but for `field` (the name, URI or task id), which is the upstream's `original`, and
/// `_meta`, rewritten as `rewrite` says; `added` fields are appended. Written into one buffer.
pub fn upstream_request(
    method: &str,
    field: &str,
    number: i64,
    original: &str,
    params: &Fields<'_>,
    rewrite: Rewrite<'_>,
    added: &[(&str, &str)],
) -> Bytes {
    let mut id = itoa::Buffer::new();
    let id = id.format(number);
    let meta = params.get("_meta");
    let trace = rewrite.trace.map(trace_fields);
    let rewrite_meta = meta.is_some_and(|meta| {
        rewrite.has_progress
            || trace.is_some()
            || (rewrite.era == Era::Legacy && meta.get().contains(META_PREFIX))
    });
    let new_meta = rewrite_meta
        .then(|| meta.and_then(|meta| rewritten_meta(meta, rewrite.era, id, trace.as_deref())))
        .flatten();
    // A `_meta` of the trace context alone, where the client sent none.
    let trace_meta = match (meta, &trace) {
        (None, Some(trace)) => Some(meta_of(trace)),
        _ => None,
    };
    let mut appended: smallvec::SmallVec<[(&str, &str); 2]> = added.iter().copied().collect();
    if let Some(trace_meta) = &trace_meta {
        appended.push(("_meta", trace_meta));
    }
    let size: usize = params
        .iter()
        .map(|(k, v)| k.len() + v.get().len() + 4)
        .sum();
    let mut out = Vec::with_capacity(size + original.len() + 64);
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    out.extend_from_slice(id.as_bytes());
    out.extend_from_slice(br#","method":"#);
    write_string(&mut out, method);
    out.extend_from_slice(br#","params":"#);
    params.write(
        &mut out,
        |key| match key {
            key if key == field => Edit::String(original),
            "_meta" => match &new_meta {
                Some(meta) => Edit::Value(meta),
                None if rewrite_meta => Edit::Drop,
                None => Edit::Keep,
            },
            _ => Edit::Keep,
        },
        &appended,
    );
    out.push(b'}');
    wire::freeze(out)
}

/// `trace`'s `_meta` keys with their values as JSON strings.
fn trace_fields(trace: &Passed) -> Vec<(&'static str, String)> {
    trace
        .fields()
        .map(|(key, value)| {
            let mut text = Vec::with_capacity(value.len() + 2);
            write_string(&mut text, value);
            (key, String::from_utf8(text).unwrap_or_default())
        })
        .collect()
}

/// A `_meta` object of `fields` alone.
fn meta_of(fields: &[(&'static str, String)]) -> String {
    let mut out = Vec::new();
    Fields::default().write(&mut out, |_| Edit::Keep, &pairs(fields));
    String::from_utf8(out).unwrap_or_default()
}

fn pairs<'a>(fields: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    fields.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

/// `_meta` for the upstream: the progress token is the request's own id (so that progress
/// comes back under it), and on a legacy session the lifecycle keys are left out. `None` if
/// nothing remains.
fn rewritten_meta(
    meta: &RawValue,
    era: Era,
    id_text: &str,
    trace: Option<&[(&'static str, String)]>,
) -> Option<String> {
    let fields = Fields::of(meta)?;
    let mut out = Vec::with_capacity(meta.get().len());
    let trace = trace.unwrap_or_default();
    fields.write(
        &mut out,
        |key| match key {
            META_PROGRESS_TOKEN => Edit::Value(id_text),
            key if era == Era::Legacy && key.starts_with(META_PREFIX) => Edit::Drop,
            // The client's context gives way to the gateway's (written after the rest).
            TRACEPARENT | TRACESTATE if !trace.is_empty() => Edit::Drop,
            _ => Edit::Keep,
        },
        &pairs(trace),
    );
    (out.len() > 2).then(|| String::from_utf8(out).unwrap_or_default())
}

/// The upstream's error, for the client: as it came, but for the 2026-07-28 code of a missing
/// resource.
pub(in crate::router) fn relay_error(
    id: &str,
    error: &str,
    upstream: &UpstreamName,
    era: Era,
) -> Answer {
    let code = Fields::of_text(error)
        .and_then(|fields| fields.get("code"))
        .and_then(|code| code.get().parse::<i32>().ok());
    tracing::debug!(side = "upstream", %upstream, code, "request failed: the upstream answered with an error");
    if era == Era::Modern && code == Some(ErrorCode::RESOURCE_NOT_FOUND.0) {
        let fields = Fields::of_text(error);
        if let Some(fields) = fields {
            let mut out = Vec::with_capacity(error.len());
            let invalid = ErrorCode::INVALID_PARAMS.0.to_string();
            fields.write(
                &mut out,
                |key| match key {
                    "code" => Edit::Value(&invalid),
                    _ => Edit::Keep,
                },
                &[],
            );
            let message =
                wire::write::error_raw(Some(id), std::str::from_utf8(&out).unwrap_or("{}"));
            return Answer::failure(message, ErrorCode::INVALID_PARAMS.0);
        }
    }
    let message = wire::write::error_raw(Some(id), error);
    Answer::failure(message, code.unwrap_or(ErrorCode::INTERNAL_ERROR.0))
}

/// The result as a client of `era` expects it, if it must change: a legacy client gets no
/// `resultType: "complete"`. (A 2026-07-28 client's answer is put in its era's shape once, by
/// `session::modern`, whatever path made it.)
fn shape_for(result: &str, era: Era) -> Option<String> {
    match era {
        Era::Legacy if result.contains("\"resultType\"") => {
            let fields = Fields::of_text(result)?;
            let complete = fields
                .get("resultType")
                .is_some_and(|t| t.get() == "\"complete\"");
            if !complete {
                return None;
            }
            let mut out = Vec::with_capacity(result.len());
            fields.write(
                &mut out,
                |key| match key {
                    "resultType" => Edit::Drop,
                    _ => Edit::Keep,
                },
                &[],
            );
            String::from_utf8(out).ok()
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;
    use serde_json::{Value, json};

    use super::{Rewrite, upstream_request};
    use crate::{protocol::Era, telemetry::Passed, wire::Fields};

    fn written(params: &Value, trace: Option<&Passed>) -> Value {
        let text = params.to_string();
        let params = Fields::of_text(&text).unwrap();
        let rewrite = Rewrite {
            era: Era::Legacy,
            has_progress: false,
            trace,
        };
        let body = upstream_request("tools/call", "name", 9, "echo", &params, rewrite, &[]);
        serde_json::from_slice(&body).unwrap()
    }

    #[test]
    fn the_gateways_trace_context_replaces_the_clients_and_nothing_else() {
        let gateway = Passed {
            traceparent: HeaderValue::from_static(
                "00-4bf92f3577b34da6a3ce929d0e0e4736-1111111111111111-01",
            ),
            tracestate: None,
            into_meta: true,
        };
        let params = json!({"name": "web__echo", "arguments": {"a": 1}, "_meta": {
            "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "tracestate": "vendor=x",
            "com.example/k": [1, 2]
        }});
        let sent = written(&params, Some(&gateway));
        assert_eq!(
            sent["params"],
            json!({"name": "echo", "arguments": {"a": 1}, "_meta": {
                "com.example/k": [1, 2],
                "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-1111111111111111-01"
            }})
        );
        // Without a `_meta` of the client's, one holds the context alone.
        let sent = written(&json!({"name": "web__echo"}), Some(&gateway));
        assert_eq!(
            sent["params"]["_meta"],
            json!({"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-1111111111111111-01"})
        );
        // Untraced, the client's `_meta` goes on as it came.
        let sent = written(&params, None);
        assert_eq!(sent["params"]["_meta"], params["_meta"]);
        assert_eq!(sent["id"], 9);
    }
}
