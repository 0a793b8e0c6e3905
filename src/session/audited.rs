//! The audit record of a routed request (`tools/call`, `prompts/get`, `resources/read`): who
//! asked what of which upstream, how it ended and how long it took, with the arguments as the
//! upstream's audit setting (or `[audit]`'s) says. A request refused before it was routed (an
//! unknown name, or one the caller may not see: the same to the caller) is recorded too.

use std::{sync::Arc, time::Instant};

use bytes::Bytes;

use super::Session;
use crate::{
    audit::{Audit, Record},
    config::AuditArguments,
    request::Request,
    router::Target,
    wire,
};

/// What a routed request went to, as its record names it.
pub(super) struct Subject {
    upstream: String,
    item: String,
    arguments: Option<AuditArguments>,
}

impl Subject {
    pub fn of(target: &Target) -> Self {
        Self {
            upstream: target.upstream.name().to_string(),
            item: target.original.clone(),
            arguments: target.upstream.config().items.audit_arguments,
        }
    }
}

/// Records how `request` (routed to `subject`, or refused) ended: `answer`, `started` when.
pub(super) fn record(
    audit: &Audit,
    request: &Request,
    session: Option<&Arc<Session>>,
    subject: Option<&Subject>,
    answer: &Bytes,
    started: Instant,
) {
    if !audit.is_on() {
        return;
    }
    let (outcome, code) = match wire::parse(answer) {
        Ok(wire::Message::Response { result, .. }) if wire::reports_failure(result) => {
            ("tool_error", None)
        }
        Ok(wire::Message::Response { .. }) => ("ok", None),
        Ok(wire::Message::Error { error, .. }) => {
            let code = wire::Fields::of(error)
                .and_then(|fields| fields.get("code"))
                .and_then(|code| code.get().parse().ok());
            // An unknown name (unrouted) and a call beyond a quota are refused; the rest failed.
            let refused =
                subject.is_none() || code == Some(i64::from(crate::quota::QUOTA_EXCEEDED));
            (if refused { "refused" } else { "error" }, code)
        }
        _ => ("error", None),
    };
    let session = session.map(|session| super::short_hash(session.id()));
    let params = request.message.params();
    let item = match subject {
        Some(subject) => Some(subject.item.clone()),
        None => params
            .and_then(|params| params.get("name").or_else(|| params.get("uri")))
            .and_then(wire::string)
            .map(|name| name.into_owned()),
    };
    let arguments = audit.arguments(
        subject.and_then(|subject| subject.arguments),
        params.and_then(|params| params.get("arguments")),
    );
    audit.record(&Record {
        kind: request.method(),
        principal: request.caller.principal.as_str(),
        endpoint: request.caller.endpoint.as_virtual(),
        session: session.as_deref(),
        upstream: subject.map(|subject| subject.upstream.as_str()),
        item: item.as_deref(),
        outcome,
        code,
        duration_ms: Some(started.elapsed().as_secs_f64() * 1000.0),
        arguments,
        detail: None,
    });
}
