//! What one upstream listed at discovery, as the catalog is merged from it: its four lists
//! with its own names and URIs, what was left out, its tools' compiled input schemas, and
//! what it declared.

use std::{collections::HashMap, sync::Arc};

use rmcp::model::JsonObject;

use super::{
    ArgumentCheck, Features, ListHints, ListedPrompt, ListedResource, ListedTemplate, ListedTool,
    Rejected,
};

/// What one upstream listed at discovery, with its own names and URIs.
#[derive(Debug, Clone, Default)]
pub struct UpstreamCatalog {
    pub tools: Vec<ListedTool>,
    pub prompts: Vec<ListedPrompt>,
    pub resources: Vec<ListedResource>,
    pub templates: Vec<ListedTemplate>,
    /// Definitions left out because they could not be read or used, with why.
    pub rejected: Vec<Rejected>,
    /// Each tool's input schema, compiled (see `checked`), by the tool's own name.
    pub checks: HashMap<String, Arc<ArgumentCheck>>,
    pub instructions: Option<String>,
    /// The caching hints the upstream gave with each list, if it gave any.
    pub hints: ListHints,
    /// The upstream declared the 2026-07-28 tasks extension (its tools may answer with tasks).
    pub task_extension: bool,
    /// The settings of the MCP Apps extension, if the upstream declared it.
    pub ui_extension: Option<JsonObject>,
    /// What the tools that depend on a client feature need, by the tool's own name (the
    /// others need nothing).
    pub needs: HashMap<String, Features>,
}

impl UpstreamCatalog {
    /// These lists with every tool's input schema compiled, and the tools whose schema does
    /// not compile left out (and reported): a call of one could not be checked.
    pub fn checked(mut self) -> Self {
        let mut checks = HashMap::with_capacity(self.tools.len());
        let mut rejected = Vec::new();
        self.tools
            .retain(|tool| match ArgumentCheck::compile(&tool.input_schema) {
                Ok(check) => {
                    checks.insert(tool.name.to_string(), check);
                    true
                }
                Err(reason) => {
                    rejected.push(Rejected {
                        kind: "tool",
                        name: tool.name.to_string(),
                        reason,
                    });
                    false
                }
            });
        self.rejected.extend(rejected);
        self.checks = checks;
        self
    }
}
