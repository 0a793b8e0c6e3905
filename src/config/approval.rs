//! `[[policy]] approval`: the tool calls of a rule's users that wait for a person's approval,
//! as written and as checked (`policy::Approval` is what the runtime uses).

use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::{
    keys::{Checker, Entries},
    kinds::Seconds,
};
use crate::policy::{Approval, Approver};

/// How long a call waits for a decision, by default.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

/// `approval = { … }` as written.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[schemars(rename = "Approval")]
pub struct RawApproval {
    /// Upstreams all of whose tool calls wait for approval.
    pub upstreams: Option<Vec<String>>,
    /// Tools whose calls wait for approval, as `UPSTREAM:TOOL` (the upstream's own name).
    /// Default, with `upstreams` left out too: every tool call.
    pub tools: Option<Vec<String>>,
    /// Only calls whose arguments hold these values: each named (top-level) argument equal to
    /// the value given, or to one of a list of values.
    pub arguments: Option<Entries<Value>>,
    /// `user`: the calling user, asked through elicitation when their client supports it,
    /// else an operator (admin API, status page, event stream); `operator`: always an
    /// operator.
    #[schemars(extend("enum" = ["user", "operator"], "default" = "user"))]
    pub by: Option<String>,
    /// How long a call waits for a decision before it is refused. Seconds.
    #[schemars(with = "Option<Seconds>", extend("default" = DEFAULT_TIMEOUT.as_secs()))]
    pub timeout_seconds: Option<f64>,
    /// Arguments (by name, at any depth) shown as `"…"` to whoever decides.
    pub mask: Option<Vec<String>>,
}

impl Checker<'_> {
    /// `key` is the rule's (`policy[N]`).
    pub(super) fn approval(&mut self, key: &str, raw: &RawApproval) -> Approval {
        let at = |field: &str| format!("{key}.approval.{field}");
        let calls = self.calls(
            &format!("{key}.approval"),
            raw.upstreams.as_ref(),
            raw.tools.as_ref(),
        );
        let arguments = raw
            .arguments
            .iter()
            .flat_map(Entries::iter)
            .map(|(name, wanted)| {
                let values = match wanted {
                    Value::Array(values) => values.clone(),
                    value => vec![value.clone()],
                };
                (name.to_owned(), values)
            })
            .collect();
        let by = match raw.by.as_deref() {
            None | Some("user") => Approver::User,
            Some("operator") => Approver::Operator,
            Some(other) => {
                self.problem(
                    at("by"),
                    format!("`{other}` is not one of `user`, `operator`"),
                );
                Approver::User
            }
        };
        Approval {
            calls,
            arguments,
            by,
            timeout: self.seconds(&at("timeout_seconds"), raw.timeout_seconds, DEFAULT_TIMEOUT),
            mask: raw.mask.clone().unwrap_or_default(),
        }
    }
}
