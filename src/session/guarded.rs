//! The guardrails of a tool call's answer (`[[guardrail]]`): its result screened by each rule
//! that covers the tool, blocking rules first (they see the result as the upstream gave it),
//! then flagging, then redacting ones. Each rule that found something is audited
//! (`guardrail`: its name, what it did, and the kinds and counts found, never a value). Calls
//! no rule covers are not looked at.

use bytes::Bytes;
use serde_json::Value;

use super::serve::Serving;
use crate::{
    guardrail::{Action, Findings, Guardrail, screen, withheld},
    wire::{Answer, Outcome},
};

impl Serving<'_> {
    /// Whether some guardrail screens results at all (no call is looked at otherwise).
    pub(super) fn guards(&self) -> bool {
        !self.request.live.config.guardrails.is_empty()
    }

    /// `answer`, the result of tool `tool` of `upstream`, as the guardrails covering it leave
    /// it.
    pub(super) fn guarded(&self, upstream: &str, tool: &str, answer: Answer) -> Answer {
        let mut rules: Vec<&Guardrail> = (self.request.live.config.guardrails.iter())
            .filter(|rule| rule.calls.covers(upstream, tool))
            .collect();
        if rules.is_empty() || !matches!(answer.outcome, Outcome::Result | Outcome::ToolError) {
            return answer;
        }
        rules.sort_by_key(|rule| match rule.action {
            Action::Block => 0,
            Action::Flag => 1,
            Action::Redact => 2,
        });
        let Ok(mut message) = serde_json::from_slice::<Value>(&answer.message) else {
            return answer;
        };
        let Some(result) = message.get_mut("result") else {
            return answer;
        };
        let mut redacted = false;
        for rule in rules {
            let findings = screen(result, &rule.detectors, rule.action == Action::Redact);
            if findings.is_empty() {
                continue;
            }
            self.audit_finding(rule, upstream, tool, &findings);
            match rule.action {
                Action::Block => {
                    *result = withheld(&rule.name, &findings);
                    return Answer {
                        message: Bytes::from(message.to_string()),
                        outcome: Outcome::ToolError,
                    };
                }
                Action::Flag => {}
                Action::Redact => redacted = true,
            }
        }
        if !redacted {
            return answer;
        }
        Answer {
            message: Bytes::from(message.to_string()),
            outcome: answer.outcome,
        }
    }

    fn audit_finding(&self, rule: &Guardrail, upstream: &str, tool: &str, findings: &Findings) {
        let detail = format!("guardrail {}: {}", rule.name, findings.summary());
        tracing::info!(guardrail = %rule.name, upstream, tool, found = %findings.summary(), action = rule.action.done(), "a guardrail found something in a tool result");
        self.gateway.audit().record(&crate::audit::Record {
            kind: "guardrail",
            principal: self.request.caller.principal.as_str(),
            endpoint: self.request.caller.endpoint.as_virtual(),
            upstream: Some(upstream),
            item: Some(tool),
            outcome: rule.action.done(),
            detail: Some(&detail),
            ..Default::default()
        });
    }
}
