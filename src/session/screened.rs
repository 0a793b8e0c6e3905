//! The guardrails of a tool call before it is sent: its arguments screened, then its policy
//! hooks asked, in `guardrail::order`. A refused call gets the tool's failure naming the
//! guardrail; a call whose arguments changed goes on as a request of its own, so that all that
//! follows (schema check, approval, cache, raw or typed path, audit) sees what is sent.

use std::{sync::Arc, time::Instant};

use serde_json::{Map, Value};

use super::{audited::Subject, guarded::Asked, serve::Serving};
use crate::{
    error::GatewayError,
    guardrail::{
        Action, Check, Guardrail,
        hook::{Phase, Question},
        screen_arguments,
    },
    request::Request,
    router::{Call, ConnectionSource, Routed, Target},
    wire::{self, Answer, Edit},
};

impl Serving<'_> {
    /// A tool call the guardrails see before it is sent: refused, sent as it came, or sent
    /// with the arguments they left, as a request of its own (checked against the tool's
    /// schema again, as the client's arguments were), which then goes the way of any other.
    pub(super) async fn guarded_call<S: ConnectionSource>(
        &self,
        call: &Call<'_, S>,
        target: Target,
        subject: Option<Subject>,
        started: Instant,
    ) -> Answer {
        let rewritten = match self.screened_call(&target).await {
            Ok(None) => {
                return self
                    .routed(call, (target, Routed::Tool), subject, started)
                    .await;
            }
            Ok(Some(rewritten)) => Arc::new(rewritten),
            Err(error) => {
                let answer = call.failed(error);
                self.audit(subject.as_ref(), &answer, started);
                return answer;
            }
        };
        let serving = Serving {
            request: &rewritten,
            ..*self
        };
        let call = Call {
            request: &rewritten,
            store: call.store,
            source: call.source,
            downstream: call.downstream.clone(),
            ct: call.ct,
            held: Default::default(),
        };
        match Target::of(&rewritten, Routed::Tool) {
            Ok(target) => {
                let routed = (target, Routed::Tool);
                serving.routed(&call, routed, subject, started).await
            }
            Err(error) => {
                let answer = call.failed(error);
                serving.audit(subject.as_ref(), &answer, started);
                answer
            }
        }
    }

    /// The call of `target` as the guardrails covering it leave it: `None` if as it came, or
    /// the request with its new arguments; or why it is refused.
    async fn screened_call(&self, target: &Target) -> Result<Option<Request>, GatewayError> {
        let (upstream, tool) = (target.upstream.name().as_str(), target.original.as_str());
        let rules = self.guardrails(Phase::Call, |rule| rule.calls.covers(upstream, tool));
        if rules.is_empty() {
            return Ok(None);
        }
        let mut arguments = self.arguments();
        let mut changed = false;
        for rule in rules {
            match self
                .screen_call_by(rule, (upstream, tool), &mut arguments)
                .await
            {
                Ok(rewrote) => changed |= rewrote,
                Err(reason) => {
                    return Err(GatewayError::Refused {
                        tool: self.named_tool(target),
                        guardrail: rule.name.clone(),
                        reason,
                    });
                }
            }
        }
        if !changed {
            return Ok(None);
        }
        with_arguments(self.request, &arguments).map(Some)
    }

    /// What `rule` makes of a call of `tool` of `upstream` with `arguments` (changed in
    /// place): whether it changed them, or why it refuses the call.
    async fn screen_call_by(
        &self,
        rule: &Guardrail,
        (upstream, tool): (&str, &str),
        arguments: &mut Value,
    ) -> Result<bool, String> {
        match &rule.check {
            Check::Detect {
                detectors, action, ..
            } => {
                let findings = screen_arguments(arguments, detectors, *action == Action::Redact);
                if findings.is_empty() {
                    return Ok(false);
                }
                let summary = findings.summary();
                let detail = format!("guardrail {}, on the arguments: {summary}", rule.name);
                self.decided(
                    rule,
                    Phase::Call,
                    (upstream, Some(tool)),
                    action.done(),
                    &detail,
                );
                match action {
                    Action::Block => Err(format!("its arguments hold {summary}")),
                    Action::Flag => Ok(false),
                    Action::Redact => Ok(true),
                }
            }
            Check::Hook(hook) => {
                let question = Question {
                    user: self.request.caller.principal.as_str(),
                    upstream,
                    tool: Some(tool),
                    arguments,
                    result: None,
                };
                match self.ask_hook(rule, hook, question).await {
                    Asked::Go => Ok(false),
                    Asked::Rewrite(rewritten) => {
                        *arguments = rewritten;
                        Ok(true)
                    }
                    Asked::Refuse(reason) => Err(reason),
                }
            }
        }
    }

    /// The call's arguments (an empty object if it has none, or none that can be read).
    pub(super) fn arguments(&self) -> Value {
        let params = self.request.message.params();
        (params.and_then(|params| params.get("arguments")))
            .and_then(|raw| serde_json::from_str(raw.get()).ok())
            .unwrap_or_else(|| Value::Object(Map::new()))
    }

    /// The tool as the client named it.
    fn named_tool(&self, target: &Target) -> String {
        let params = self.request.message.params();
        (params.and_then(|params| params.get("name")))
            .and_then(wire::string)
            .map_or_else(|| target.original.clone(), |name| name.into_owned())
    }
}

/// `request` (a `tools/call`) with `arguments` in place of its own; every other field as it
/// came.
fn with_arguments(request: &Request, arguments: &Value) -> Result<Request, GatewayError> {
    let text = arguments.to_string();
    let mut params = Vec::with_capacity(request.message.body().len() + text.len());
    match request.message.params() {
        Some(fields) => {
            let added: &[(&str, &str)] = match fields.get("arguments") {
                Some(_) => &[],
                None => &[("arguments", &text)],
            };
            let edit = |key: &str| match key {
                "arguments" => Edit::Value(&text),
                _ => Edit::Keep,
            };
            fields.write(&mut params, edit, added);
        }
        None => {
            return Err(GatewayError::InvalidParams(
                "params must be an object".into(),
            ));
        }
    }
    Request::within(request, request.method(), &params)
        .ok_or_else(|| GatewayError::Internal("the call with new arguments cannot be read".into()))
}
