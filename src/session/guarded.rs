//! The guardrails of a tool call's result (detectors screening `results`, policy hooks asked
//! `after`), in `guardrail::order`, whether it comes at once or later, as a task's; and how every guardrail decision, here and in `screened`,
//! is audited (`guardrail`: kinds and counts found, or a hook's decision and reason; never a
//! value, an argument or a header), counted and logged. Calls no rule covers are not looked at.

use bytes::Bytes;
use serde_json::Value;

use super::serve::Serving;
use crate::{
    guardrail::{
        Action, Check, Guardrail,
        hook::{Failure, Hook, Phase, Question, Verdict},
        order, screen, withheld, withheld_because,
    },
    router::TaskMethod,
    wire::{Answer, Outcome},
};

/// What the guardrails did to a result.
enum Guarded {
    Kept,
    /// Redacted or rewritten.
    Changed,
    /// Replaced by the result that says it was withheld.
    Withheld,
}

/// Whether `value` is a tool result (not, say, the task a task-augmented call created).
fn is_tool_result(value: &Value) -> bool {
    value.get("content").is_some_and(Value::is_array)
}

/// What asking a policy hook came to.
pub(super) enum Asked {
    /// Allowed, or the hook failed and its guardrail fails open.
    Go,
    /// Go on with this instead (the arguments, or the result).
    Rewrite(Value),
    /// Refused, saying why.
    Refuse(String),
}

impl Serving<'_> {
    /// Whether some guardrail is configured at all (no call is looked at otherwise).
    pub(super) fn guards(&self) -> bool {
        !self.request.live.config.guardrails.is_empty()
    }

    /// `answer`, the result of tool `tool` of `upstream`, as the guardrails covering it leave
    /// it.
    pub(super) async fn guarded(&self, upstream: &str, tool: &str, answer: Answer) -> Answer {
        let rules = self.guardrails(Phase::Result, |rule| rule.calls.covers(upstream, tool));
        if rules.is_empty() || !matches!(answer.outcome, Outcome::Result | Outcome::ToolError) {
            return answer;
        }
        let Ok(mut message) = serde_json::from_slice::<Value>(&answer.message) else {
            return answer;
        };
        // Not a tool result: the task a task-augmented call created (its result, read later,
        // is screened then: `guarded_task`).
        let Some(result) = message.get_mut("result").filter(|r| is_tool_result(r)) else {
            return answer;
        };
        match self
            .guard_result(&rules, (upstream, Some(tool)), result)
            .await
        {
            Guarded::Kept => answer,
            Guarded::Withheld => Answer {
                message: Bytes::from(message.to_string()),
                outcome: Outcome::ToolError,
            },
            // A rewritten result may say, or stop saying, that the tool failed.
            Guarded::Changed => Answer::tool_result(Bytes::from(message.to_string())),
        }
    }

    /// `answer` to `method` about a task of `upstream`, with the tool result it holds (a
    /// 2025-11-25 `tasks/result`, or the completed 2026-07-28 `tasks/get`) as the guardrails
    /// leave it. Which tool made the task is not known when its result is read (on another
    /// replica, or after a restart, nothing recalls it), so every rule that covers any tool of
    /// the upstream screens it: running a tool as a task is no way around a guardrail.
    pub(super) async fn guarded_task(
        &self,
        upstream: &str,
        method: TaskMethod,
        answer: Answer,
    ) -> Answer {
        let rules = self.guardrails(Phase::Result, |rule| rule.calls.may_cover(upstream));
        if rules.is_empty() || answer.outcome != Outcome::Result {
            return answer;
        }
        let Ok(mut message) = serde_json::from_slice::<Value>(&answer.message) else {
            return answer;
        };
        let found = match method {
            TaskMethod::Result => message.get_mut("result"),
            TaskMethod::Get => message
                .get_mut("result")
                .and_then(|task| task.get_mut("result")),
            TaskMethod::Update | TaskMethod::Cancel | TaskMethod::List => None,
        };
        let Some(result) = found.filter(|r| is_tool_result(r)) else {
            return answer;
        };
        match self.guard_result(&rules, (upstream, None), result).await {
            Guarded::Kept => answer,
            Guarded::Changed | Guarded::Withheld if method == TaskMethod::Result => {
                Answer::tool_result(Bytes::from(message.to_string()))
            }
            Guarded::Changed | Guarded::Withheld => Answer::read(Bytes::from(message.to_string())),
        }
    }

    /// The guardrails of `phase` (on calls, or on results) that `covers` picks, in
    /// `guardrail::order`.
    pub(super) fn guardrails(
        &self,
        phase: Phase,
        covers: impl Fn(&Guardrail) -> bool,
    ) -> Vec<&Guardrail> {
        let of_phase = |rule: &Guardrail| match phase {
            Phase::Call => rule.on_calls(),
            Phase::Result => rule.on_results(),
        };
        let mut rules: Vec<&Guardrail> = (self.request.live.config.guardrails.iter())
            .filter(|rule| of_phase(rule) && covers(rule))
            .collect();
        rules.sort_by_key(|rule| order(rule));
        rules
    }

    /// `result` (of a call of `tool` of `upstream`) as `rules` leave it, changed in place.
    async fn guard_result(
        &self,
        rules: &[&Guardrail],
        (upstream, tool): (&str, Option<&str>),
        result: &mut Value,
    ) -> Guarded {
        let mut changed = false;
        // Read only if a hook asks.
        let mut arguments = None;
        for rule in rules {
            let by = (*rule, (upstream, tool));
            match self.guard_result_by(by, result, &mut arguments).await {
                Ok(rewrote) => changed |= rewrote,
                Err(held) => {
                    *result = held;
                    return Guarded::Withheld;
                }
            }
        }
        if changed {
            Guarded::Changed
        } else {
            Guarded::Kept
        }
    }

    /// What `rule` makes of `result` (changed in place), that of a call of `tool` of
    /// `upstream` with `arguments` (read on first use): whether it changed it, or the result
    /// that stands for it withheld.
    async fn guard_result_by(
        &self,
        (rule, (upstream, tool)): (&Guardrail, (&str, Option<&str>)),
        result: &mut Value,
        arguments: &mut Option<Value>,
    ) -> Result<bool, Value> {
        match &rule.check {
            Check::Detect {
                detectors, action, ..
            } => {
                let findings = screen(result, detectors, *action == Action::Redact);
                if findings.is_empty() {
                    return Ok(false);
                }
                let detail = format!("guardrail {}: {}", rule.name, findings.summary());
                self.decided(
                    rule,
                    Phase::Result,
                    (upstream, tool),
                    action.done(),
                    &detail,
                );
                match action {
                    Action::Block => Err(withheld(&rule.name, &findings)),
                    Action::Flag => Ok(false),
                    Action::Redact => Ok(true),
                }
            }
            Check::Hook(hook) => {
                // A task's result is read by a request of its own: the arguments that made
                // the task are not known then.
                let arguments = match tool {
                    Some(_) => arguments.get_or_insert_with(|| self.arguments()),
                    None => arguments.get_or_insert(Value::Null),
                };
                let question = Question {
                    user: self.request.caller.principal.as_str(),
                    upstream,
                    tool,
                    arguments,
                    result: Some(result),
                };
                match self.ask_hook(rule, hook, question).await {
                    Asked::Go => Ok(false),
                    Asked::Rewrite(rewritten) => {
                        *result = rewritten;
                        Ok(true)
                    }
                    Asked::Refuse(reason) => Err(withheld_because(&format!(
                        "guardrail `{}` refused it: {reason}",
                        rule.name
                    ))),
                }
            }
        }
    }

    /// Asks `hook` (of `rule`) `question`, and records its decision, or its failure and what
    /// was done then.
    pub(super) async fn ask_hook(
        &self,
        rule: &Guardrail,
        hook: &Hook,
        question: Question<'_>,
    ) -> Asked {
        let phase = match question.result {
            Some(_) => Phase::Result,
            None => Phase::Call,
        };
        let (outcome, said, asked) = match self.gateway.hooks().ask(hook, &question).await {
            Ok(Verdict::Allow) => ("allowed", None, Asked::Go),
            Ok(Verdict::Deny(reason)) => (
                "denied",
                Some(reason.clone()),
                Asked::Refuse(format!("its policy hook denied it: {reason}")),
            ),
            Ok(Verdict::Rewrite(rewritten)) => ("rewritten", None, Asked::Rewrite(rewritten)),
            Err(failure) => {
                // The hook's own trouble, whichever side is taken: operators should hear of it.
                tracing::warn!(guardrail = %rule.name, phase = phase.name(), %failure, failure_mode = ?hook.failure, "a policy hook failed");
                match hook.failure {
                    Failure::Open => ("failed_open", Some(failure.to_string()), Asked::Go),
                    Failure::Closed => (
                        "failed_closed",
                        Some(failure.to_string()),
                        Asked::Refuse(format!("its policy hook could not be asked: {failure}")),
                    ),
                }
            }
        };
        let detail = match said {
            Some(said) => format!("guardrail {}, {} hook: {said}", rule.name, phase.name()),
            None => format!("guardrail {}, {} hook", rule.name, phase.name()),
        };
        let (upstream, tool) = (question.upstream, question.tool);
        self.decided(rule, phase, (upstream, tool), outcome, &detail);
        asked
    }

    /// Records what `rule` did in `phase` to a call of `tool` of `upstream`: `outcome`, and
    /// `detail` (which names no value); audited, counted and logged.
    pub(super) fn decided(
        &self,
        rule: &Guardrail,
        phase: Phase,
        (upstream, tool): (&str, Option<&str>),
        outcome: &str,
        detail: &str,
    ) {
        tracing::info!(guardrail = %rule.name, upstream, tool, phase = phase.name(), outcome, detail, "a guardrail acted on a tool call");
        (self.gateway.metrics()).guardrail_decided(&rule.name, phase.name(), outcome);
        self.gateway.audit().record(&crate::audit::Record {
            kind: "guardrail",
            principal: self.request.caller.principal.as_str(),
            endpoint: self.request.caller.endpoint.as_virtual(),
            upstream: Some(upstream),
            item: tool,
            outcome,
            detail: Some(detail),
            ..Default::default()
        });
    }
}
