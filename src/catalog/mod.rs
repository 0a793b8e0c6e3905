//! The merged catalog: one immutable snapshot of every ready upstream's tools, prompts, resources
//! and templates under the names clients see, with the tables that route a name back.
//!
//! A snapshot is built whole from the per-upstream lists and swapped in atomically (the gateway
//! holds it in an `ArcSwap`), so a request reads one consistent catalog without locking and
//! never copies it. Order is deterministic: upstreams in config order, each in its own order.
//! Each snapshot serves its lists from JSON prepared once per page (`lists`).

mod access;
pub mod apps;
mod arguments;
mod listed;
mod lists;
mod naming;
mod needs;
mod page;
mod params;
mod part;
mod search;
mod semantic;
mod synonyms;
mod template;
mod view;
mod words;

use std::{
    collections::HashMap,
    sync::{Arc, OnceLock},
};

use bytes::Bytes;
use foldhash::fast::RandomState;
use rmcp::model::JsonObject;

pub use access::{Access, ViewKey};
pub use apps::UI_EXTENSION;
pub use arguments::{ArgumentCheck, ArgumentError};
pub use lists::CacheHint;

pub use crate::meaning::{SearchModel, ToolVector};
pub use listed::{
    Listed, ListedPrompt, ListedResource, ListedTemplate, ListedTool, Rejected, TaskSupport,
};
use lists::PreparedList;
pub use naming::NameScheme;
pub use needs::Features;
pub use page::{Cursor, ListKind};
pub use params::{ParamHeader, header_values};
pub use part::UpstreamCatalog;
pub use semantic::nearest as nearest_by_meaning;
use template::TemplatePattern;
pub use view::PersonalParts;
use view::{Lens, Views};

use crate::{names::UpstreamName, policy::Kind, protocol::Era};

/// The page size of a catalog built without one (the configuration's default).
pub const DEFAULT_PAGE_SIZE: usize = 500;

/// The caching hints of an upstream's four lists (`None` where it gave none).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ListHints {
    pub tools: Option<CacheHint>,
    pub prompts: Option<CacheHint>,
    pub resources: Option<CacheHint>,
    pub templates: Option<CacheHint>,
}

/// Where an exposed tool or prompt lives upstream.
#[derive(Debug, Clone)]
pub struct Route {
    pub upstream: UpstreamName,
    /// The name the upstream knows it by.
    pub original: Arc<str>,
}

/// A tool's route, its position in the tool list, and the arguments its schema asks to see
/// as `Mcp-Param-*` headers (SEP-2243), if any.
#[derive(Debug, Clone)]
pub struct ToolRoute {
    pub route: Route,
    pub param_headers: Option<Arc<[ParamHeader]>>,
    /// Whether the tool runs as a task (`execution.taskSupport`).
    pub task_support: TaskSupport,
    /// Its input schema, compiled.
    pub check: Option<Arc<ArgumentCheck>>,
    index: usize,
}

/// Which lists a catalog snapshot changed, as counters bumped on every change of that list.
/// Sessions compare them with the ones they last announced to know what to notify.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ListVersions {
    pub tools: u64,
    pub prompts: u64,
    /// Resources and resource templates.
    pub resources: u64,
}

/// Lists an upstream announced as changed (`notifications/*/list_changed`). Clients are told
/// even when the merged list looks the same: the change may be one the gateway cannot see.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ListChanges {
    pub tools: bool,
    pub prompts: bool,
    pub resources: bool,
}

/// The upstream that owns a resource URI, and the URI as that upstream knows it.
#[derive(Debug, PartialEq, Eq)]
pub struct UriRoute<'a> {
    pub upstream: &'a str,
    pub original: &'a str,
}

/// One consistent view of everything the gateway serves.
#[derive(Debug)]
pub struct Catalog {
    scheme: NameScheme,
    upstreams: Vec<UpstreamName>,
    tools: Vec<ListedTool>,
    /// The upstreams with a tool shown that may run as a task, for clients of each era: per
    /// 2025-11-25 (a tool says so, `execution.taskSupport`), and for 2026-07-28 clients also
    /// per the extension (the upstream declared it), in config order.
    task_upstreams: [Vec<UpstreamName>; 2],
    tool_routes: HashMap<String, ToolRoute, RandomState>,
    prompts: Vec<ListedPrompt>,
    prompt_routes: HashMap<String, Route>,
    resources: Vec<ListedResource>,
    templates: Vec<ListedTemplate>,
    /// Unprefixed only: who listed each exact URI, and whose template matches a URI.
    resource_owners: HashMap<String, UpstreamName>,
    template_owners: Vec<(TemplatePattern, UpstreamName)>,
    instructions: Option<String>,
    /// The MCP Apps extension's settings, as the first upstream shown that declared it gave
    /// them.
    ui_extension: Option<JsonObject>,
    /// Increases with every snapshot; pagination cursors refer to it.
    generation: u64,
    versions: ListVersions,
    /// The four lists' pages (tools, prompts, resources, templates), prepared on first use.
    lists: [PreparedList; 4],
    /// Each upstream's hints, kept so that `paged` can prepare the lists again.
    hints: Vec<ListHints>,
    page_size: usize,
    /// What of the upstreams' lists this catalog shows: all of them, or a view's part.
    lens: Lens,
    /// The client features some tool here needs, and those whose tools this catalog leaves
    /// out (a view for clients that lack them).
    needed: Features,
    lacks: Features,
    /// The views of this snapshot that requests asked for (the whole catalog only).
    views: Views,
    /// The tools' search index, built when the snapshot is published where search is on,
    /// else on first use (`search`).
    search: OnceLock<search::SearchIndex>,
    /// The tools' vectors for the semantic score, where a search model is configured.
    meanings: semantic::Meanings,
}

impl Catalog {
    /// A catalog with nothing in it yet.
    pub fn empty(scheme: NameScheme) -> Self {
        Self::build(scheme, &[])
    }

    /// Merges `parts` (in config order) under `scheme`. When two entries would get the same
    /// exposed name or URI (possible only unprefixed), the first wins and the rest are logged.
    pub fn build(scheme: NameScheme, parts: &[(UpstreamName, Arc<UpstreamCatalog>)]) -> Self {
        Self::assemble(scheme, parts, Lens::Whole, Features::NONE).keeping(parts)
    }

    /// Merges what `lens` shows of `parts` under `scheme`, but for the tools that need a
    /// feature of `lacks`.
    fn assemble(
        scheme: NameScheme,
        parts: &[(UpstreamName, Arc<UpstreamCatalog>)],
        lens: Lens,
        lacks: Features,
    ) -> Self {
        let parts: Vec<_> = parts
            .iter()
            .filter(|(name, _)| lens.upstream(name.as_str()))
            .collect();
        let hints = parts.iter().map(|(_, part)| part.hints).collect();
        let mut catalog = Self {
            scheme,
            upstreams: parts.iter().map(|(name, _)| name.clone()).collect(),
            tools: Vec::new(),
            tool_routes: HashMap::default(),
            task_upstreams: Default::default(),
            prompts: Vec::new(),
            prompt_routes: HashMap::new(),
            resources: Vec::new(),
            templates: Vec::new(),
            resource_owners: HashMap::new(),
            template_owners: Vec::new(),
            instructions: merge_instructions(&parts),
            ui_extension: parts.iter().find_map(|(_, part)| part.ui_extension.clone()),
            generation: 0,
            versions: ListVersions::default(),
            lists: std::array::from_fn(|_| {
                PreparedList::new(ListKind::Tools, 0, 1, CacheHint::CAUTIOUS)
            }),
            hints,
            page_size: DEFAULT_PAGE_SIZE,
            lens,
            needed: Features::NONE,
            lacks,
            views: Views::default(),
            search: OnceLock::new(),
            meanings: semantic::Meanings::default(),
        };
        for (upstream, part) in parts {
            catalog.add_tools(upstream, part);
            let shows_tools = catalog
                .tool_routes
                .values()
                .any(|route| route.route.upstream == *upstream);
            let modern = &mut catalog.task_upstreams[Era::Modern as usize];
            if part.task_extension && shows_tools && !modern.contains(upstream) {
                modern.push(upstream.clone());
            }
            catalog.add_prompts(upstream, &part.prompts);
            catalog.add_resources(upstream, part);
        }
        catalog.paged(DEFAULT_PAGE_SIZE)
    }

    /// This catalog, serving its lists in pages of `page_size` entries.
    pub fn paged(mut self, page_size: usize) -> Self {
        self.page_size = page_size;
        let hint = |pick: fn(&ListHints) -> Option<CacheHint>| {
            CacheHint::merged(self.hints.iter().map(pick))
        };
        self.lists = [
            PreparedList::new(
                ListKind::Tools,
                self.tools.len(),
                page_size,
                hint(|h| h.tools),
            ),
            PreparedList::new(
                ListKind::Prompts,
                self.prompts.len(),
                page_size,
                hint(|h| h.prompts),
            ),
            PreparedList::new(
                ListKind::Resources,
                self.resources.len(),
                page_size,
                hint(|h| h.resources),
            ),
            PreparedList::new(
                ListKind::Templates,
                self.templates.len(),
                page_size,
                hint(|h| h.templates),
            ),
        ];
        self
    }

    /// The result JSON of the page of list `kind` that starts at `offset`, for a client of
    /// `era`. Written on first use, then served from the same bytes.
    pub fn list_page(&self, kind: ListKind, era: Era, offset: usize) -> Bytes {
        let generation = self.generation;
        match kind {
            ListKind::Tools => self.lists[0].page(&self.tools, era, offset, generation),
            ListKind::Prompts => self.lists[1].page(&self.prompts, era, offset, generation),
            ListKind::Resources => self.lists[2].page(&self.resources, era, offset, generation),
            ListKind::Templates => self.lists[3].page(&self.templates, era, offset, generation),
        }
    }

    fn add_tools(&mut self, upstream: &UpstreamName, part: &UpstreamCatalog) {
        for tool in &part.tools {
            if !self.lens.item(Kind::Tool, upstream.as_str(), &tool.name) {
                continue;
            }
            if let Some(needs) = part.needs.get(&*tool.name) {
                self.needed = self.needed.with(*needs);
                if needs.meets(self.lacks) {
                    continue;
                }
            }
            let shape = self.lens.tool_shape(upstream.as_str(), &tool.name).cloned();
            let exposed = match shape.as_ref().and_then(|shape| shape.name.clone()) {
                Some(renamed) => renamed,
                None => self.scheme.expose_name(upstream, &tool.name),
            };
            if let Some(first) = self.tool_routes.get(&exposed) {
                warn_shadowed("tool", &exposed, upstream, &first.route.upstream);
                continue;
            }
            let mut tool = tool.clone();
            let original = Arc::from(&*tool.name);
            tool.rename(&exposed);
            tool.map_interface(|uri| self.scheme.expose_uri(upstream, uri));
            if let Some(description) = shape.and_then(|shape| shape.description) {
                tool.describe(&description);
            }
            let check = part.checks.get(&*original).cloned();
            self.tool_routes.insert(
                exposed,
                ToolRoute {
                    route: Route {
                        upstream: upstream.clone(),
                        original,
                    },
                    param_headers: params::param_headers(&tool.input_schema),
                    task_support: tool.task_support(),
                    check,
                    index: self.tools.len(),
                },
            );
            // A 2026-07-28 client gets such a tool's tasks in its own era's shape.
            if tool.task_support() != TaskSupport::Forbidden {
                for list in &mut self.task_upstreams {
                    if list.last() != Some(upstream) {
                        list.push(upstream.clone());
                    }
                }
            }
            self.tools.push(tool);
        }
    }

    fn add_prompts(&mut self, upstream: &UpstreamName, prompts: &[ListedPrompt]) {
        for prompt in prompts {
            if !self
                .lens
                .item(Kind::Prompt, upstream.as_str(), &prompt.name)
            {
                continue;
            }
            let exposed = self.scheme.expose_name(upstream, &prompt.name);
            if let Some(first) = self.prompt_routes.get(&exposed) {
                warn_shadowed("prompt", &exposed, upstream, &first.upstream);
                continue;
            }
            let mut prompt = prompt.clone();
            let original = Arc::from(prompt.name.as_str());
            prompt.rename(&exposed);
            self.prompt_routes.insert(
                exposed,
                Route {
                    upstream: upstream.clone(),
                    original,
                },
            );
            self.prompts.push(prompt);
        }
    }

    fn add_resources(&mut self, upstream: &UpstreamName, part: &UpstreamCatalog) {
        let prefixed = self.scheme.is_prefixed();
        for resource in &part.resources {
            if !self.lens.uri(upstream.as_str(), &resource.uri) {
                continue;
            }
            if !prefixed {
                if let Some(first) = self.resource_owners.get(&resource.uri) {
                    warn_shadowed("resource", &resource.uri, upstream, first);
                    continue;
                }
                self.resource_owners
                    .insert(resource.uri.clone(), upstream.clone());
            }
            let mut resource = resource.clone();
            resource.relocate(&self.scheme.expose_uri(upstream, &resource.uri));
            self.resources.push(resource);
        }
        for template in &part.templates {
            if !self
                .lens
                .item(Kind::Resource, upstream.as_str(), &template.uri_template)
            {
                continue;
            }
            if !prefixed {
                self.template_owners.push((
                    TemplatePattern::new(&template.uri_template),
                    upstream.clone(),
                ));
            }
            let mut template = template.clone();
            template.relocate(&self.scheme.expose_uri(upstream, &template.uri_template));
            self.templates.push(template);
        }
    }

    /// This snapshot, numbered as the successor of `previous`, with the versions bumped of the
    /// lists that differ from it or that an upstream `announced` as changed.
    pub fn succeeding(mut self, previous: &Catalog, announced: ListChanges) -> Self {
        let old = previous.versions;
        let bump = |changed: bool, version: u64| version + u64::from(changed);
        self.generation = previous.generation + 1;
        self.versions = ListVersions {
            tools: bump(announced.tools || self.tools != previous.tools, old.tools),
            prompts: bump(
                announced.prompts || self.prompts != previous.prompts,
                old.prompts,
            ),
            resources: bump(
                announced.resources
                    || self.resources != previous.resources
                    || self.templates != previous.templates,
                old.resources,
            ),
        };
        self
    }

    pub fn generation(&self) -> u64 {
        self.generation
    }

    pub fn versions(&self) -> ListVersions {
        self.versions
    }

    pub fn scheme(&self) -> &NameScheme {
        &self.scheme
    }

    /// The upstreams whose lists are in this snapshot, in config order.
    pub fn upstreams(&self) -> &[UpstreamName] {
        &self.upstreams
    }

    pub fn tools(&self) -> &[ListedTool] {
        &self.tools
    }

    /// The upstreams with a tool shown here that may run as a task for a client of `era`, in
    /// config order.
    pub fn task_upstreams(&self, era: Era) -> &[UpstreamName] {
        &self.task_upstreams[era as usize]
    }

    /// Whether a task of `upstream` may run here (for a client of either era).
    pub fn runs_tasks_of(&self, upstream: &UpstreamName) -> bool {
        self.task_upstreams
            .iter()
            .any(|list| list.contains(upstream))
    }

    pub fn prompts(&self) -> &[ListedPrompt] {
        &self.prompts
    }

    pub fn resources(&self) -> &[ListedResource] {
        &self.resources
    }

    pub fn templates(&self) -> &[ListedTemplate] {
        &self.templates
    }

    /// Instructions of the upstreams, each under its name.
    pub fn instructions(&self) -> Option<&str> {
        self.instructions.as_deref()
    }

    /// The MCP Apps extension's settings, if an upstream shown declared it.
    pub fn ui_extension(&self) -> Option<&JsonObject> {
        self.ui_extension.as_ref()
    }

    /// The route of an exposed tool name.
    pub fn tool(&self, exposed: &str) -> Option<&Route> {
        self.tool_routes.get(exposed).map(|t| &t.route)
    }

    /// The route of an exposed tool name, with its `Mcp-Param-*` annotations.
    pub fn tool_route(&self, exposed: &str) -> Option<&ToolRoute> {
        self.tool_routes.get(exposed)
    }

    /// The exposed tool `exposed`, by reference.
    pub fn tool_definition(&self, exposed: &str) -> Option<&ListedTool> {
        self.tool_routes.get(exposed).map(|t| &self.tools[t.index])
    }

    /// The input schema of an exposed tool; a cheap shared pointer.
    pub fn tool_schema(&self, exposed: &str) -> Option<Arc<JsonObject>> {
        self.tool_definition(exposed).map(ListedTool::schema)
    }

    /// The route of an exposed prompt name.
    pub fn prompt(&self, exposed: &str) -> Option<&Route> {
        self.prompt_routes.get(exposed)
    }

    /// Which upstream owns `uri` and what it calls it. Prefixed, the URI itself says so (listed or
    /// not, e.g. an expanded template or a link from a tool result); unprefixed, the owner is
    /// whoever listed it, else whose template matches it, else the only upstream there is.
    /// A view resolves only the URIs it shows.
    pub fn resolve_uri<'a>(&'a self, uri: &'a str) -> Option<UriRoute<'a>> {
        let route = self.resolve_any_uri(uri)?;
        self.lens
            .uri(route.upstream, route.original)
            .then_some(route)
    }

    fn resolve_any_uri<'a>(&'a self, uri: &'a str) -> Option<UriRoute<'a>> {
        if self.scheme.is_prefixed() {
            let (upstream, original) = self.scheme.split_uri(uri)?;
            return Some(UriRoute { upstream, original });
        }
        let owner = self
            .resource_owners
            .get(uri)
            .or_else(|| {
                self.template_owners
                    .iter()
                    .find(|(pattern, _)| pattern.matches(uri))
                    .map(|(_, owner)| owner)
            })
            .or(match self.upstreams.as_slice() {
                [only] => Some(only),
                _ => None,
            })?;
        Some(UriRoute {
            upstream: owner.as_str(),
            original: uri,
        })
    }
}

fn warn_shadowed(kind: &str, exposed: &str, loser: &UpstreamName, winner: &UpstreamName) {
    tracing::warn!(
        %kind, name = %exposed, upstream = %loser, kept = %winner,
        "two upstreams offer the same {kind} name; keeping the first (use prefix_mode = \"always\" to keep both)"
    );
}

fn merge_instructions(parts: &[&(UpstreamName, Arc<UpstreamCatalog>)]) -> Option<String> {
    let sections: Vec<String> = parts
        .iter()
        .filter_map(|(name, part)| {
            let text = part.instructions.as_deref()?.trim();
            (!text.is_empty()).then(|| format!("## {name}\n{text}"))
        })
        .collect();
    (!sections.is_empty()).then(|| sections.join("\n\n"))
}

#[cfg(test)]
mod tests;
