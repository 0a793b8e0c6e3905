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
}
