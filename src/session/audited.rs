//! The audit record of a routed request (`tools/call`, `prompts/get`, `resources/read`): who
//! asked what of which upstream, how it ended and how long it took, with the arguments as the
//! upstream's audit setting (or `[audit]`'s) says. A request refused before it was routed (an
//! unknown name, or one the caller may not see: the same to the caller) is recorded too. A
//! call that became a task is recorded as `task_created` with the task's id, and how a task
//! ended as its `tasks/result` or `tasks/cancel` answer says.

use std::{sync::Arc, time::Instant};

use bytes::Bytes;

use super::Session;
use crate::{
    audit::{Audit, Record},
    config::AuditArguments,
    request::Request,
    router::Target,
    wire::{self, Answer, Outcome},
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
    answer: &Answer,
    started: Instant,
) {
    if !audit.is_on() {
        return;
    }
    let (mut outcome, code) = crate::audit::outcome_of(answer.outcome, subject.is_some());
    let task = (answer.outcome == Outcome::Result && request.method() == "tools/call")
        .then(|| created_task(&answer.message))
        .flatten();
    if task.is_some() {
        outcome = "task_created";
    }
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
        detail: task.as_deref(),
        grant: None,
    });
}

/// Records the end of a task its client learnt (`tasks/result`) or asked for
/// (`tasks/cancel`): `answer` to `request`, `started` when.
pub(super) fn task_end(
    audit: &Audit,
    request: &Request,
    session: Option<&Arc<Session>>,
    answer: &Answer,
    started: Instant,
) {
    if !audit.is_on() {
        return;
    }
    let (mut outcome, code) = crate::audit::outcome_of(answer.outcome, true);
    if outcome == "ok" && request.method() == "tasks/cancel" {
        outcome = "cancelled";
    }
    let task = (request.message.params())
        .and_then(|params| params.get("taskId"))
        .and_then(wire::string);
    let session = session.map(|session| super::short_hash(session.id()));
    audit.record(&Record {
        kind: request.method(),
        principal: request.caller.principal.as_str(),
        endpoint: request.caller.endpoint.as_virtual(),
        session: session.as_deref(),
        item: task.as_deref(),
        outcome,
        code,
        duration_ms: Some(started.elapsed().as_secs_f64() * 1000.0),
        ..Default::default()
    });
}

/// The id of the task a call's `answer` created, if it created one.
fn created_task(answer: &Bytes) -> Option<String> {
    let wire::Message::Response { result, .. } = wire::parse(answer).ok()? else {
        return None;
    };
    let task = wire::Fields::of(result)?.get("task")?;
    let id = wire::Fields::of(task)?.get("taskId")?;
    wire::string(id).map(|id| id.into_owned())
}
