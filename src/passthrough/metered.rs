//! A pass-through call counted and recorded as the MCP endpoint's are. Where `[[quota]]` or the
//! audit log is on, a POST's body (read whole by the proxy) is read once for its method
//! and name: a routed call (`tools/call`, `prompts/get`, `resources/read`) spends what the
//! quotas covering it ask, and is refused with 429 before the upstream sees its body if it is
//! beyond one; its place under `concurrent` is held until its answer has gone by. When it
//! ends, it is audited, its outcome read from the first part of the answer (JSON, or the
//! event stream's messages). With neither on, nothing is held back, read or kept.

use std::time::Instant;

use axum::body::Body;
use bytes::{Bytes, BytesMut};
use http::{Response, StatusCode};

use crate::{
    audit::Record,
    config::AuditArguments,
    front::{beyond_quota, refusal},
    gateway::Gateway,
    policy::Kind,
    principal::Principal,
    quota::{Ask, Granted},
    upstream::Upstream,
    wire::{self, Fields},
};

/// The most of an answer read for the audit record's outcome.
const MOST_READ: usize = 64 * 1024;

/// What is counted and recorded of one pass-through request.
pub struct Metered {
    principal: Principal,
    upstream: String,
    arguments: Option<AuditArguments>,
    /// The routed call the body turned out to be, once read.
    call: Option<Call>,
    /// Its place under `concurrent` quotas, until the request is done.
    _granted: Option<Granted>,
    /// The first part of the answer, and whether it is an event stream.
    answer: BytesMut,
    event_stream: bool,
}

/// How a call ended, as its record says.
enum Outcome {
    /// With this answer (JSON-RPC) from the upstream, or Switchyard's refusal.
    Read(Bytes),
    /// With an answer that was not read whole.
    Unread,
    /// Without an answer: the upstream failed or could not be reached.
    Failed,
}

/// A routed call, as its audit record names it.
struct Call {
    method: &'static str,
    item: Option<String>,
    arguments: Option<serde_json::Value>,
    started: Instant,
}

impl Metered {
    /// The metering of a request of `principal` to `upstream`, if there is any to do.
    pub fn of(gateway: &Gateway, principal: &Principal, upstream: &Upstream) -> Option<Self> {
        let live = gateway.live();
        if live.config.quotas.is_empty() && !gateway.audit().is_on() {
            return None;
        }
        Some(Self {
            principal: principal.clone(),
            upstream: upstream.name().to_string(),
            arguments: upstream.config().items.audit_arguments,
            call: None,
            _granted: None,
            answer: BytesMut::new(),
            event_stream: false,
        })
    }

    /// Reads the request's whole body and, for a routed call, spends what it costs; or gives
    /// the answer refusing it.
    pub async fn body(&mut self, gateway: &Gateway, whole: &[u8]) -> Result<(), Response<Body>> {
        let Ok(wire::Message::Request(request)) = wire::parse(whole) else {
            return Ok(());
        };
        let (method, kind, field) = match request.method {
            "tools/call" => ("tools/call", Kind::Tool, "name"),
            "prompts/get" => ("prompts/get", Kind::Prompt, "name"),
            "resources/read" => ("resources/read", Kind::Resource, "uri"),
            _ => return Ok(()),
        };
        let params = request.params.and_then(Fields::of);
        let item = params
            .as_ref()
            .and_then(|params| params.get(field))
            .and_then(wire::string)
            .map(|item| item.into_owned());
        let audit = gateway.audit();
        let arguments = audit.arguments(
            self.arguments,
            params.as_ref().and_then(|params| params.get("arguments")),
        );
        self.call = Some(Call {
            method,
            item: item.clone(),
            arguments,
            started: Instant::now(),
        });
        if audit.refuses() {
            return Err(refusal(
                StatusCode::SERVICE_UNAVAILABLE,
                "Service Unavailable: the audit log cannot keep up, and calls are refused \
                 until it does (fail_closed)",
            ));
        }
        let rules = &gateway.live().config.quotas;
        if rules.is_empty() {
            return Ok(());
        }
        let item = item.unwrap_or_default();
        let ask = Ask::of_quotas(rules, &self.principal, kind, &self.upstream, &item);
        match gateway.quotas().take(ask).await {
            Ok(granted) => {
                self._granted = Some(granted);
                Ok(())
            }
            Err(exceeded) => {
                let answer = exceeded.answer(request.id.get());
                self.record(gateway, Outcome::Read(answer.message.clone()));
                self.call = None;
                Err(beyond_quota(&answer)
                    .unwrap_or_else(|| refusal(StatusCode::TOO_MANY_REQUESTS, "Too Many Requests")))
            }
        }
    }

    /// The answer begins: whether it is an event stream.
    pub fn answered(&mut self, event_stream: bool) {
        self.event_stream = event_stream;
    }

    /// Takes one piece of the answer's body, up to what the record's outcome needs.
    pub fn answer(&mut self, body: Option<&Bytes>) {
        if self.call.is_none() {
            return;
        }
        if let Some(piece) = body {
            let room = MOST_READ.saturating_sub(self.answer.len());
            self.answer
                .extend_from_slice(&piece[..piece.len().min(room)]);
        }
    }

    /// Records the call (if the request was one) as it ended: `status`, the answer's HTTP
    /// status if one was written.
    pub fn finish(&mut self, gateway: &Gateway, status: Option<u16>) {
        if self.call.is_none() {
            return;
        }
        let outcome = match (status, self.message()) {
            (Some(200), Some(message)) => Outcome::Read(message),
            // It went through, but its answer was not read whole.
            (Some(200), None) => Outcome::Unread,
            _ => Outcome::Failed,
        };
        self.record(gateway, outcome);
        self.call = None;
    }

    /// The answer's JSON-RPC message, from what was read of it.
    fn message(&self) -> Option<Bytes> {
        if !self.event_stream {
            let whole = Bytes::copy_from_slice(&self.answer);
            return wire::parse(&whole).is_ok().then_some(whole);
        }
        let text = std::str::from_utf8(&self.answer).ok()?;
        text.split("\n\n").find_map(|event| {
            let data: Vec<&str> = event
                .lines()
                .filter_map(|line| line.strip_prefix("data:"))
                .map(|data| data.strip_prefix(' ').unwrap_or(data))
                .collect();
            let data = data.join("\n");
            matches!(
                wire::parse(data.as_bytes()),
                Ok(wire::Message::Response { .. } | wire::Message::Error { .. })
            )
            .then(|| Bytes::from(data))
        })
    }

    /// Writes the call's audit record, as `outcome` says it ended.
    fn record(&self, gateway: &Gateway, outcome: Outcome) {
        let audit = gateway.audit();
        let Some(call) = &self.call else {
            return;
        };
        if !audit.is_on() {
            return;
        }
        let (outcome, code, detail) = match &outcome {
            Outcome::Read(answer) => {
                let (outcome, code) = crate::audit::outcome_of(told(answer), true);
                (outcome, code, "pass-through")
            }
            Outcome::Unread => ("ok", None, "pass-through; its answer was not read whole"),
            Outcome::Failed => ("error", None, "pass-through; it failed on its way"),
        };
        audit.record(&Record {
            kind: call.method,
            principal: self.principal.as_str(),
            upstream: Some(&self.upstream),
            item: call.item.as_deref(),
            outcome,
            code,
            duration_ms: Some(call.started.elapsed().as_secs_f64() * 1000.0),
            arguments: call.arguments.clone(),
            detail: Some(detail),
            ..Default::default()
        });
    }
}

/// What an upstream's answer, passed through as it came, says.
fn told(answer: &Bytes) -> wire::Outcome {
    match wire::parse(answer) {
        Ok(wire::Message::Response { result, .. }) if wire::reports_failure(result) => {
            wire::Outcome::ToolError
        }
        _ => wire::Answer::read(answer.clone()).outcome,
    }
}
