//! A rule's `approval`: which tool calls wait for a person's approval before they run, who
//! gives it, how long it is waited for, and which arguments are shown masked.

use std::time::Duration;

use serde_json::{Map, Value};

use super::Calls;

/// `[[policy]] approval`: the calls it covers wait for approval.
#[derive(Debug, Clone, PartialEq)]
pub struct Approval {
    /// The calls it covers (by their arguments too, below).
    pub calls: Calls,
    /// Each named argument must hold one of its values for a call to be covered (none: any
    /// arguments).
    pub arguments: Vec<(String, Vec<Value>)>,
    pub by: Approver,
    /// How long a call waits for a decision before it is refused.
    pub timeout: Duration,
    /// Arguments (by name, at any depth) shown as `"…"` to whoever decides.
    pub mask: Vec<String>,
}

/// Who approves a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Approver {
    /// The calling user, asked through elicitation where their client can be asked; else an
    /// operator.
    User,
    /// An operator, always (the user never approves their own call).
    Operator,
}

impl Approver {
    pub fn as_str(self) -> &'static str {
        match self {
            Approver::User => "user",
            Approver::Operator => "operator",
        }
    }
}

impl Approval {
    /// Whether the call of tool `tool` of `upstream` (its own name) with `arguments` waits
    /// for approval under this rule.
    pub fn covers(
        &self,
        upstream: &str,
        tool: &str,
        arguments: Option<&Map<String, Value>>,
    ) -> bool {
        let listed = self.calls.covers(upstream, tool);
        listed
            && self.arguments.iter().all(|(name, values)| {
                arguments
                    .and_then(|arguments| arguments.get(name))
                    .is_some_and(|given| values.contains(given))
            })
    }

    /// `arguments` as whoever decides sees them: the masked ones replaced, at any depth.
    pub fn shown(&self, arguments: &Value) -> Value {
        match arguments {
            Value::Object(fields) => Value::Object(
                fields
                    .iter()
                    .map(|(name, value)| {
                        let shown = if self.mask.contains(name) {
                            Value::String("…".into())
                        } else {
                            self.shown(value)
                        };
                        (name.clone(), shown)
                    })
                    .collect(),
            ),
            Value::Array(items) => Value::Array(items.iter().map(|v| self.shown(v)).collect()),
            other => other.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::policy::ItemPattern;

    fn approval(tools: &[&str], arguments: Vec<(String, Vec<Value>)>) -> Approval {
        Approval {
            calls: Calls {
                upstreams: None,
                tools: Some(tools.iter().map(|t| ItemPattern::new(t).unwrap()).collect()),
            },
            arguments,
            by: Approver::User,
            timeout: Duration::from_secs(60),
            mask: vec!["password".into()],
        }
    }

    #[test]
    fn a_call_is_covered_by_its_tool_and_every_argument_named() {
        let rule = approval(&["repo:delete_*"], Vec::new());
        assert!(rule.covers("repo", "delete_branch", None));
        assert!(!rule.covers("repo", "create_branch", None));
        assert!(!rule.covers("other", "delete_branch", None));
        let forced = approval(
            &["repo:*"],
            vec![
                ("force".into(), vec![json!(true)]),
                ("branch".into(), vec![json!("main"), json!("prod")]),
            ],
        );
        let args = |v: Value| v.as_object().cloned().unwrap();
        assert!(forced.covers(
            "repo",
            "push",
            Some(&args(json!({"force": true, "branch": "prod"})))
        ));
        assert!(!forced.covers(
            "repo",
            "push",
            Some(&args(json!({"force": false, "branch": "prod"})))
        ));
        assert!(!forced.covers("repo", "push", Some(&args(json!({"force": true})))));
        assert!(!forced.covers("repo", "push", None));
    }

    #[test]
    fn masked_arguments_are_hidden_at_any_depth() {
        let rule = approval(&["*:*"], Vec::new());
        let shown =
            rule.shown(&json!({"user": "a", "password": "s3", "nested": [{"password": 1}]}));
        assert_eq!(
            shown,
            json!({"user": "a", "password": "…", "nested": [{"password": "…"}]})
        );
    }
}
