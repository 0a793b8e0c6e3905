//! Who sees what: `[[policy]]` rules per principal and `[endpoints.NAME]` virtual endpoints,
//! as configured, and how they decide what a viewer sees (`catalog::Access` compiles them).
//!
//! A request sees the catalog through a *view*: the endpoint it came to (the main one, or a
//! virtual one serving a subset of upstreams and items, with tools renamed or described anew)
//! and the rules whose `who` matches its principal. An item is visible when the endpoint
//! admits it and the rules do: no applying rule denies it and, where applying rules allow only
//! some items of its kind (or some upstreams), one of them allows it. Denied items are simply
//! absent, so calling one is answered as calling an unknown one. The catalog builds one view
//! per (endpoint, applying rules) and per snapshot, on first use (`catalog::view`).
//!
//! A rule may also name calls that wait for a person's approval (`approval`), which the
//! serving of a call asks for before it sends the call on (`session::approve`).

mod approval;
mod calls;
mod pattern;
mod uri;
mod who;

use std::{collections::HashMap, sync::Arc};

pub use approval::{Approval, Approver};
pub use calls::Calls;
pub use pattern::{Glob, ItemPattern};
pub use uri::{UriRefusal, normalize_uri};
pub use who::Who;

use crate::{names::PrefixMode, principal::Principal};

/// What kind of item a pattern or a question is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Tool,
    Prompt,
    /// Resources, resource templates and URIs read or subscribed to.
    Resource,
}

/// Patterns by kind; `None` where a list was not written (which is not the same as an empty
/// list: an empty `allow` list allows nothing).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Items {
    pub upstreams: Option<Vec<Glob>>,
    pub tools: Option<Vec<ItemPattern>>,
    pub prompts: Option<Vec<ItemPattern>>,
    pub resources: Option<Vec<ItemPattern>>,
}

impl Items {
    fn of(&self, kind: Kind) -> Option<&[ItemPattern]> {
        match kind {
            Kind::Tool => self.tools.as_deref(),
            Kind::Prompt => self.prompts.as_deref(),
            Kind::Resource => self.resources.as_deref(),
        }
    }

    fn has_upstream(&self, upstream: &str) -> Option<bool> {
        let globs = self.upstreams.as_deref()?;
        Some(globs.iter().any(|glob| glob.is_match(upstream)))
    }

    fn has_item(&self, kind: Kind, upstream: &str, item: &str) -> Option<bool> {
        let patterns = self.of(kind)?;
        Some(patterns.iter().any(|p| p.is_match(upstream, item)))
    }

    /// Whether these lists take in an item: nothing listed takes in everything; otherwise
    /// its upstream is listed or it matches a pattern of its kind.
    pub fn covers(&self, kind: Kind, upstream: &str, item: &str) -> bool {
        self.is_empty()
            || self.has_upstream(upstream) == Some(true)
            || self.has_item(kind, upstream, item) == Some(true)
    }

    fn is_empty(&self) -> bool {
        self.upstreams.is_none()
            && self.tools.is_none()
            && self.prompts.is_none()
            && self.resources.is_none()
    }
}

/// What one rule or endpoint lets through.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Gate {
    pub allow: Items,
    pub deny: Items,
}

impl Gate {
    pub fn is_open(&self) -> bool {
        self.allow.is_empty() && self.deny.is_empty()
    }

    /// Whether it says anything of single tools, prompts or resources (not only upstreams).
    pub fn names_items(&self) -> bool {
        [&self.allow, &self.deny].iter().any(|items| {
            items.tools.is_some() || items.prompts.is_some() || items.resources.is_some()
        })
    }
}

/// Whether `gates` together admit upstream `upstream`: none denies it, and if any lists the
/// upstreams it allows, one of those lists has it.
pub fn admits_upstream<'a>(gates: impl Iterator<Item = &'a Gate> + Clone, upstream: &str) -> bool {
    if gates
        .clone()
        .any(|gate| gate.deny.has_upstream(upstream) == Some(true))
    {
        return false;
    }
    allowed(gates.map(|gate| gate.allow.has_upstream(upstream)))
}

/// Whether `gates` together admit the item: its upstream, then the item as for upstreams.
pub fn admits<'a>(
    gates: impl Iterator<Item = &'a Gate> + Clone,
    kind: Kind,
    upstream: &str,
    item: &str,
) -> bool {
    if !admits_upstream(gates.clone(), upstream) {
        return false;
    }
    if gates
        .clone()
        .any(|gate| gate.deny.has_item(kind, upstream, item) == Some(true))
    {
        return false;
    }
    allowed(gates.map(|gate| gate.allow.has_item(kind, upstream, item)))
}

/// Given whether each gate's allow list has an item (`None`: no list), whether it is allowed:
/// by one of the lists, or by having no list against it.
fn allowed(answers: impl Iterator<Item = Option<bool>>) -> bool {
    let mut listed = false;
    for answer in answers.flatten() {
        if answer {
            return true;
        }
        listed = true;
    }
    !listed
}

/// One `[[policy]]` entry: for the principals `who` matches, what they may see.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    /// For logs and the admin API: the rule's `name`, or `policy[N]`.
    pub name: String,
    pub who: Who,
    pub gate: Gate,
    /// The calls of its users that wait for a person's approval.
    pub approval: Option<Approval>,
}

/// A tool as one endpoint shows it: another name, another description.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolShape {
    pub name: Option<String>,
    pub description: Option<String>,
}

/// `[endpoints.NAME]`: another endpoint path serving a subset of the catalog.
#[derive(Debug, Clone, PartialEq)]
pub struct EndpointSettings {
    pub name: Arc<str>,
    pub path: String,
    /// `None`: as `[catalog] prefix_mode`, counting only the upstreams this endpoint admits.
    pub prefix_mode: Option<PrefixMode>,
    pub gate: Gate,
    /// By (upstream, the upstream's tool name).
    pub tools: HashMap<(String, String), ToolShape>,
    /// `None`: as `[catalog] tool_search`.
    pub tool_search: Option<ToolSearch>,
    /// With inlining: how many bytes of linked resources one tool result may have inlined,
    /// whichever upstream it came from.
    pub inline_resources: Option<u64>,
}

/// Whether clients get the tools themselves in `tools/list`, or tools to search them with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolSearch {
    Off,
    On,
    /// On when the caller sees more tools than this.
    Above(usize),
}

impl ToolSearch {
    /// Whether a caller who sees `tools` tools gets search.
    pub fn applies(self, tools: usize) -> bool {
        match self {
            ToolSearch::Off => false,
            ToolSearch::On => true,
            ToolSearch::Above(threshold) => tools > threshold,
        }
    }
}

/// The endpoint a request came to: the main one, or a virtual one by name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct EndpointName(Option<Arc<str>>);

impl EndpointName {
    /// The main endpoint (`server.endpoint_path`).
    pub const MAIN: Self = Self(None);

    pub fn named(name: Arc<str>) -> Self {
        Self(Some(name))
    }

    pub fn as_virtual(&self) -> Option<&str> {
        self.0.as_deref()
    }
}

/// Whom a catalog view is for: a principal at an endpoint.
#[derive(Debug, Clone, Copy)]
pub struct Viewer<'a> {
    pub endpoint: &'a EndpointName,
    pub principal: &'a Principal,
}
