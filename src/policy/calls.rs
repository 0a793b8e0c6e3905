//! The tool calls a rule names (`approval`, `[[guardrail]]`): those of the upstreams it lists,
//! and the tools it lists; neither list: every tool call.

use super::{Glob, ItemPattern};

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Calls {
    /// Upstreams all of whose tools are named; `None`: not listed.
    pub upstreams: Option<Vec<Glob>>,
    /// Tools named as `UPSTREAM:TOOL`; `None`: not listed.
    pub tools: Option<Vec<ItemPattern>>,
}

impl Calls {
    /// Whether a call of tool `tool` (its own name) of `upstream` is named.
    pub fn covers(&self, upstream: &str, tool: &str) -> bool {
        match (&self.upstreams, &self.tools) {
            (None, None) => true,
            (upstreams, tools) => {
                (upstreams.iter().flatten()).any(|glob| glob.is_match(upstream))
                    || (tools.iter().flatten()).any(|pattern| pattern.is_match(upstream, tool))
            }
        }
    }

    /// Whether a call of some tool of `upstream` may be named: for a call whose tool is not
    /// known (a task's result, read later).
    pub fn may_cover(&self, upstream: &str) -> bool {
        match (&self.upstreams, &self.tools) {
            (None, None) => true,
            (upstreams, tools) => {
                (upstreams.iter().flatten()).any(|glob| glob.is_match(upstream))
                    || (tools.iter().flatten()).any(|pattern| pattern.upstream_matches(upstream))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_of_an_unknown_tool_may_be_covered_by_any_rule_naming_its_upstream() {
        let calls = Calls {
            upstreams: Some(vec![Glob::new("mail-*").unwrap()]),
            tools: Some(vec![ItemPattern::new("github:create_*").unwrap()]),
        };
        assert!(calls.covers("github", "create_issue") && !calls.covers("github", "list_issues"));
        assert!(calls.may_cover("github") && calls.may_cover("mail-eu"));
        assert!(!calls.may_cover("jira"));
        assert!(
            Calls::default().may_cover("jira"),
            "a rule naming nothing covers every call"
        );
    }
}
