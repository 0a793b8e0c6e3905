//! One snapshot of what the gateway runs: the configuration, its upstreams, and the catalog
//! merged from their lists. A reload or a catalog rebuild swaps it whole; a request loads it
//! once and sees one consistent state from start to end (its routes, its lists, the upstream
//! it goes to), whatever is swapped meanwhile.

use std::{collections::VecDeque, sync::Arc};

use bytes::Bytes;

use crate::{
    catalog::{
        Access, Catalog, Cursor, Features, ListKind, NameScheme, PersonalParts, Route, ToolRoute,
    },
    config::Config,
    error::GatewayError,
    names::UpstreamName,
    policy::{EndpointName, EndpointSettings, ToolSearch, Viewer},
    protocol::Era,
    upstream::{Upstream, UpstreamState},
};

/// How many earlier catalog snapshots pagination cursors may refer to.
pub(super) const RECENT_SNAPSHOTS: usize = 8;
/// How many of the closest tool names an unknown tool's error names.
const CLOSEST_TOOLS: usize = 3;

/// What a reload swaps: the configuration in force and the upstreams it names.
#[derive(Clone)]
pub struct Setup {
    pub config: Arc<Config>,
    /// In config order.
    pub upstreams: Vec<Arc<Upstream>>,
    /// How names are prefixed with this set of upstreams.
    pub scheme: NameScheme,
    /// The policy and virtual endpoints, compiled for this set of upstreams.
    pub access: Arc<Access>,
    /// Bumped by every reload that changed something.
    pub generation: u64,
}

/// The setup in force and the catalog of its upstreams.
#[derive(Clone)]
pub struct Live {
    pub setup: Setup,
    /// The merged catalog of the ready upstreams' lists, seen through `setup.access`.
    pub catalog: Arc<Catalog>,
    /// The few snapshots before `catalog`, oldest first.
    pub(super) recent: VecDeque<Arc<Catalog>>,
}

impl std::ops::Deref for Live {
    type Target = Setup;

    fn deref(&self) -> &Setup {
        &self.setup
    }
}

impl Live {
    /// Whether callers at `endpoint` get tool search (its own setting, else `[catalog]`'s).
    pub fn tool_search(&self, endpoint: &EndpointName) -> ToolSearch {
        self.settings_of(endpoint)
            .and_then(|endpoint| endpoint.tool_search)
            .unwrap_or(self.config.catalog.tool_search)
    }

    /// How many bytes of linked resources a tool result of `upstream` may have inlined for
    /// callers at `endpoint` (the endpoint's setting, else the upstream's), if inlining is on.
    pub fn inlining(&self, endpoint: &EndpointName, upstream: &Upstream) -> Option<u64> {
        self.settings_of(endpoint)
            .and_then(|endpoint| endpoint.inline_resources)
            .or(upstream.config().items.inline_resources)
    }

    /// A virtual endpoint's settings (`[endpoints.NAME]`); none for the main endpoint.
    fn settings_of(&self, endpoint: &EndpointName) -> Option<&EndpointSettings> {
        let name = endpoint.as_virtual()?;
        self.config.endpoints.iter().find(|e| &*e.name == name)
    }

    pub fn upstream(&self, name: &str) -> Option<&Arc<Upstream>> {
        self.upstreams.iter().find(|u| u.name().as_str() == name)
    }

    /// What `viewer`, with a client that declared `declared`, sees of the catalog.
    pub fn view(&self, viewer: Viewer<'_>, declared: Features) -> Arc<Catalog> {
        self.view_of(&self.catalog, viewer, declared)
    }

    /// What `viewer` sees of `snapshot` (this one or a recent one): its view, merged with the
    /// viewer's own lists of the per-user upstreams where there are any.
    fn view_of(
        &self,
        snapshot: &Arc<Catalog>,
        viewer: Viewer<'_>,
        declared: Features,
    ) -> Arc<Catalog> {
        if snapshot.personal().is_empty() {
            return snapshot.view_for(viewer.endpoint, viewer.principal, declared);
        }
        let theirs: PersonalParts = snapshot
            .personal()
            .iter()
            .filter_map(|name| {
                let part = self
                    .upstream(name.as_str())?
                    .personal_catalog(viewer.principal)?;
                Some((name.clone(), part))
            })
            .collect();
        snapshot.view_for_user((viewer.endpoint, viewer.principal), declared, theirs)
    }

    /// The upstream a route points to, or why it cannot serve (it is down, and listed still
    /// because of `failure_mode = "closed"`, or a reload has just removed it).
    pub fn serving_upstream(&self, name: &UpstreamName) -> Result<Arc<Upstream>, GatewayError> {
        let upstream = self
            .upstream(name.as_str())
            .ok_or_else(|| GatewayError::Unavailable {
                upstream: name.clone(),
                reason: "it is no longer configured".into(),
            })?;
        if upstream.health().is_ready() {
            Ok(upstream.clone())
        } else {
            Err(super::unavailable(upstream))
        }
    }

    /// The route of tool `name` in `view`, or why there is none.
    pub fn tool_route<'v>(
        &self,
        view: &'v Catalog,
        name: &str,
    ) -> Result<&'v ToolRoute, GatewayError> {
        view.tool_route(name).ok_or_else(|| {
            self.missing_name(view, name, |name| {
                let closest = (view.closest_tools(&name, CLOSEST_TOOLS).iter())
                    .map(|tool| tool.name.to_string())
                    .collect();
                GatewayError::UnknownTool { name, closest }
            })
        })
    }

    /// The route of prompt `name` in `view`, or why there is none.
    pub fn prompt_route<'v>(
        &self,
        view: &'v Catalog,
        name: &str,
    ) -> Result<&'v Route, GatewayError> {
        view.prompt(name)
            .ok_or_else(|| self.missing_name(view, name, GatewayError::UnknownPrompt))
    }

    /// The error for a tool or prompt name that is not in `view`: if its prefix names an
    /// upstream the view shows that is down, say so, and also if it is ready but the view has
    /// none of its lists (made while it was down, before the catalog built after it came back);
    /// otherwise the name is unknown.
    fn missing_name(
        &self,
        view: &Catalog,
        name: &str,
        unknown: impl FnOnce(String) -> GatewayError,
    ) -> GatewayError {
        let owner = view
            .scheme()
            .split_name(name)
            .filter(|(upstream, _)| view.shows_upstream(upstream))
            .and_then(|(upstream, _)| self.upstream(upstream));
        match owner {
            Some(upstream) if upstream.health().status().state != UpstreamState::Ready => {
                super::unavailable(upstream)
            }
            Some(upstream) if !view.upstreams().contains(upstream.name()) => {
                GatewayError::Unavailable {
                    upstream: upstream.name().clone(),
                    reason: "it is ready, but its tools are not in the catalog yet".into(),
                }
            }
            _ => unknown(name.to_owned()),
        }
    }

    /// The owner of an exposed URI in `view`, the URI it knows, and the naming scheme of the
    /// view.
    pub fn resolve_uri(
        &self,
        view: &Catalog,
        uri: &str,
    ) -> Result<(UpstreamName, String, NameScheme), GatewayError> {
        let unknown = || GatewayError::UnknownResource(uri.to_owned());
        let route = view.resolve_uri(uri).ok_or_else(unknown)?;
        let upstream = self.upstream(route.upstream).ok_or_else(unknown)?;
        Ok((
            upstream.name().clone(),
            route.original.to_owned(),
            view.scheme().clone(),
        ))
    }

    /// The catalog snapshot numbered `generation`, if it is this one or a recent one.
    pub fn catalog_at(&self, generation: u64) -> Option<&Arc<Catalog>> {
        std::iter::once(&self.catalog)
            .chain(self.recent.iter().rev())
            .find(|c| c.generation() == generation)
    }

    /// The result JSON of a page of list `kind` for `viewer`, a client of `era`: the first
    /// page of this snapshot, or the page a cursor names in the snapshot it was given out for.
    pub fn list_page(
        &self,
        kind: ListKind,
        era: Era,
        cursor: Option<&str>,
        (viewer, declared): (Viewer<'_>, Features),
    ) -> Result<Bytes, GatewayError> {
        let Some(text) = cursor else {
            return Ok(self.view(viewer, declared).list_page(kind, era, 0));
        };
        let invalid = |why: &str| GatewayError::InvalidParams(format!("cursor `{text}` {why}"));
        let cursor = Cursor::decode(text, kind).ok_or_else(|| invalid("is not valid"))?;
        let snapshot = self.catalog_at(cursor.generation).ok_or_else(|| {
            invalid("has expired: the list changed since; list again from the start")
        })?;
        Ok(self
            .view_of(snapshot, viewer, declared)
            .list_page(kind, era, cursor.offset))
    }
}
