//! The approval a tool call waits for, where a `[[policy]]` rule of its user wants one (the
//! first such rule, in file order): the calling user is asked through elicitation where the
//! rule lets them decide and their client can be asked; otherwise the call waits in the
//! operators' queue (`approval`). A call that is denied, or not decided in time, is not sent
//! on: the client gets the tool's failure, saying why. Every decision is audited
//! (`approval`), with who made it.

use std::time::Duration;

use rmcp::model::{
    ClientResult, ElicitRequest, ElicitRequestParams, ElicitationAction, ElicitationSchema,
    ServerRequest,
};
use serde_json::Value;

use super::serve::Serving;
use crate::{
    approval::{Decision, Pending},
    downstream::{Downstream, ask_client, check_capability},
    error::GatewayError,
    policy::{Approval, Approver, Rule},
    router::{Call, ConnectionSource, Target},
    wire::Answer,
};

/// What the arguments of a call waiting for approval come to.
struct Asked<'a> {
    rule: &'a Rule,
    approval: &'a Approval,
    target: &'a Target,
    /// As whoever decides sees them.
    shown: Value,
    sha256: String,
}

impl Serving<'_> {
    /// Whether some rule of the caller's may want approval for a call (no call is looked
    /// at more closely otherwise).
    pub(super) fn may_want_approval(&self) -> bool {
        let principal = &self.request.caller.principal;
        (self.request.live.config.policy.iter())
            .any(|rule| rule.approval.is_some() && rule.who.matches(principal))
    }

    /// The first rule of the caller's whose approval covers this call of `target`, whose
    /// arguments are `arguments`.
    fn approval_rule(&self, target: &Target, arguments: &Value) -> Option<(&Rule, &Approval)> {
        let request = self.request;
        let upstream = target.upstream.name().as_str();
        request.live.config.policy.iter().find_map(|rule| {
            let approval = rule.approval.as_ref()?;
            (rule.who.matches(&request.caller.principal)
                && approval.covers(upstream, &target.original, arguments.as_object()))
            .then_some((rule, approval))
        })
    }

    /// Waits for the approval the call of `target` needs: `Ok` once given, else the answer
    /// refusing the call.
    pub(super) async fn approved<S: ConnectionSource>(
        &self,
        call: &Call<'_, S>,
        target: &Target,
    ) -> Result<(), Answer> {
        let params = self.request.message.params();
        let raw = (params.and_then(|params| params.get("arguments"))).map_or("", |raw| raw.get());
        let arguments: Value = serde_json::from_str(raw).unwrap_or(Value::Null);
        let Some((rule, approval)) = self.approval_rule(target, &arguments) else {
            return Ok(());
        };
        let asked = Asked {
            rule,
            approval,
            target,
            shown: approval.shown(&arguments),
            sha256: crate::audit::sha256_hex(raw.as_bytes()),
        };
        let decision = match ask_of(&call.downstream, &asked) {
            Some(question) => self.ask_user(call, &asked, question).await,
            None => self.ask_operator(call, &asked).await,
        };
        let Some(decision) = decision else {
            return Err(call.failed(GatewayError::Cancelled));
        };
        self.audit_decision(&asked, &decision);
        if decision.allowed {
            return Ok(());
        }
        let reason = decision.reason.unwrap_or_else(|| "it was denied".into());
        // The tool as the client named it.
        let named = (params.and_then(|params| params.get("name"))).and_then(crate::wire::string);
        Err(call.failed(GatewayError::NotApproved {
            tool: named.map_or_else(|| target.original.clone(), |name| name.into_owned()),
            reason,
        }))
    }

    /// Asks the calling user, within the rule's time; `None` if the client cancelled.
    async fn ask_user<S: ConnectionSource>(
        &self,
        call: &Call<'_, S>,
        asked: &Asked<'_>,
        question: ServerRequest,
    ) -> Option<Decision> {
        let timeout = asked.approval.timeout;
        let answered =
            tokio::time::timeout(timeout, ask_client(&call.downstream, question, call.ct)).await;
        if call.ct.is_cancelled() {
            return None;
        }
        let by = "the user (elicitation)".to_owned();
        let (allowed, reason) = match answered {
            Err(_) => (false, format!("no answer came within {}", seconds(timeout))),
            Ok(Err(error)) => (
                false,
                format!("the client could not be asked: {}", error.message),
            ),
            Ok(Ok(ClientResult::ElicitResult(result))) => match result.action {
                ElicitationAction::Accept
                    if result
                        .content
                        .as_ref()
                        .and_then(|content| content.get("allow"))
                        == Some(&Value::Bool(true)) =>
                {
                    (true, String::new())
                }
                ElicitationAction::Accept => (false, "the user did not allow it".into()),
                ElicitationAction::Decline => (false, "the user declined it".into()),
                _ => (false, "the user cancelled it".into()),
            },
            Ok(Ok(_)) => (
                false,
                "the client's answer was not an elicitation result".into(),
            ),
        };
        Some(Decision {
            allowed,
            by,
            reason: (!allowed).then_some(reason),
        })
    }

    /// Puts the call in the operators' queue and waits for their decision within the rule's
    /// time; `None` if the client cancelled.
    async fn ask_operator<S: ConnectionSource>(
        &self,
        call: &Call<'_, S>,
        asked: &Asked<'_>,
    ) -> Option<Decision> {
        let now = crate::clock::now_seconds();
        let timeout = asked.approval.timeout;
        let pending = Pending {
            id: String::new(),
            principal: self.request.caller.principal.to_string(),
            upstream: asked.target.upstream.name().to_string(),
            tool: asked.target.original.clone(),
            rule: asked.rule.name.clone(),
            arguments: asked.shown.clone(),
            arguments_sha256: asked.sha256.clone(),
            requested_at: now,
            expires_at: now + timeout.as_secs(),
        };
        let (_ticket, decided) = self.gateway.approvals().enqueue(pending);
        tokio::select! {
            decision = decided => Some(decision.unwrap_or_else(|_| Decision {
                allowed: false,
                by: "switchyard".into(),
                reason: Some("its entry was taken out of the queue".into()),
            })),
            _ = tokio::time::sleep(timeout) => Some(Decision {
                allowed: false,
                by: "switchyard".into(),
                reason: Some(format!("no operator decided within {}", seconds(timeout))),
            }),
            _ = call.ct.cancelled() => None,
        }
    }

    fn audit_decision(&self, asked: &Asked<'_>, decision: &Decision) {
        let detail = match &decision.reason {
            Some(reason) => format!("by {}: {reason}", decision.by),
            None => format!("by {}", decision.by),
        };
        self.gateway.audit().record(&crate::audit::Record {
            kind: "approval",
            principal: self.request.caller.principal.as_str(),
            endpoint: self.request.caller.endpoint.as_virtual(),
            upstream: Some(asked.target.upstream.name().as_str()),
            item: Some(&asked.target.original),
            outcome: if decision.allowed {
                "allowed"
            } else {
                "denied"
            },
            detail: Some(&detail),
            ..Default::default()
        });
    }
}

/// The elicitation asking the user about the call, if the rule lets them decide and their
/// client can be asked (a client that cannot never decides its own call: an operator does).
fn ask_of(downstream: &Downstream, asked: &Asked<'_>) -> Option<ServerRequest> {
    if asked.approval.by != Approver::User
        || (downstream.asks.is_none() && downstream.bridge.is_none())
    {
        return None;
    }
    let shown = serde_json::to_string_pretty(&asked.shown).unwrap_or_default();
    let message = format!(
        "Switchyard asks for your approval (rule `{}`) before it calls the tool `{}` of `{}` \
         with these arguments:\n{shown}",
        asked.rule.name,
        asked.target.original,
        asked.target.upstream.name(),
    );
    let schema = ElicitationSchema::builder()
        .required_bool_with("allow", |allow| {
            allow
                .title("Allow this call once")
                .description("Yes runs this one call; anything else refuses it.")
        })
        .build()
        .ok()?;
    let question = ServerRequest::ElicitRequest(ElicitRequest::new(
        ElicitRequestParams::FormElicitationParams {
            meta: None,
            message,
            requested_schema: schema,
        },
    ));
    check_capability(&downstream.capabilities, &question).ok()?;
    Some(question)
}

fn seconds(duration: Duration) -> String {
    format!("{} s", duration.as_secs_f64())
}
