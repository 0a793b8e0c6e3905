//! Views of a catalog snapshot: what one endpoint shows one principal under `policy`.
//!
//! A view is itself a `Catalog`, merged from the snapshot's upstream lists through a `Lens`,
//! so lists, pages, routes and URI resolution work on it unchanged, and whatever it does not
//! show is unknown to it. Views are built on first use and kept in the snapshot they were
//! made from (so pagination cursors, which name a snapshot, find them again); a snapshot with
//! no policy and no virtual endpoints serves itself to everyone.

use std::sync::{Arc, OnceLock};

use dashmap::DashMap;

use super::{Access, Catalog, UpstreamCatalog, ViewKey};
use crate::{
    names::UpstreamName,
    policy::{EndpointName, Kind, ToolShape},
    principal::Principal,
};

/// Most views one snapshot keeps; beyond them, a view is built for its request alone.
const MAX_VIEWS: usize = 1024;

/// What of the upstreams' lists a catalog shows.
#[derive(Debug)]
pub(super) enum Lens {
    Whole,
    Through {
        access: Arc<Access>,
        key: ViewKey,
    },
    /// Nothing: the view of an endpoint that is no longer configured.
    Blind,
}

impl Lens {
    pub(super) fn upstream(&self, upstream: &str) -> bool {
        match self {
            Lens::Whole => true,
            Lens::Through { access, key } => access.sees_upstream(key, upstream),
            Lens::Blind => false,
        }
    }

    pub(super) fn item(&self, kind: Kind, upstream: &str, item: &str) -> bool {
        match self {
            Lens::Whole => true,
            Lens::Through { access, key } => access.sees(key, kind, upstream, item),
            Lens::Blind => false,
        }
    }

    /// Whether the resource `uri` of `upstream` is seen: as written, and as normalized (so that
    /// dot segments, case and escapes dodge no rule); a URI that climbs out of its path is
    /// seen by no restricted view.
    pub(super) fn uri(&self, upstream: &str, uri: &str) -> bool {
        match self {
            Lens::Whole => true,
            Lens::Blind => false,
            Lens::Through { access, key } => {
                let sees = |uri: &str| access.sees(key, Kind::Resource, upstream, uri);
                match crate::policy::normalize_uri(uri) {
                    Ok(normal) => sees(uri) && (normal == uri || sees(&normal)),
                    Err(_) => false,
                }
            }
        }
    }

    pub(super) fn tool_shape(&self, upstream: &str, tool: &str) -> Option<&ToolShape> {
        match self {
            Lens::Through { access, key } => access.tool_shape(key, upstream, tool),
            Lens::Whole | Lens::Blind => None,
        }
    }
}

/// A snapshot's views, and what they are made from.
#[derive(Debug, Default)]
pub(super) struct Views {
    access: Arc<Access>,
    parts: Vec<(UpstreamName, Arc<UpstreamCatalog>)>,
    built: DashMap<ViewKey, Arc<Catalog>>,
    blind: OnceLock<Arc<Catalog>>,
}

impl Catalog {
    /// This snapshot, keeping `parts` to build views from.
    pub(super) fn keeping(mut self, parts: &[(UpstreamName, Arc<UpstreamCatalog>)]) -> Self {
        self.views.parts = parts.to_vec();
        self
    }

    /// This snapshot, showing each request what `access` lets it see.
    pub fn seen_through(mut self, access: Arc<Access>) -> Self {
        self.views.access = access;
        self
    }

    /// The policy and endpoints this snapshot's views follow.
    pub fn access(&self) -> &Arc<Access> {
        &self.views.access
    }

    /// What `principal` sees of this snapshot at `endpoint`.
    pub fn view_for(self: &Arc<Self>, endpoint: &EndpointName, principal: &Principal) -> Arc<Self> {
        let access = &self.views.access;
        if access.is_open() {
            return self.clone();
        }
        let Some(key) = access.view_key(endpoint, principal) else {
            return self.blind().clone();
        };
        if key.is_whole() {
            return self.clone();
        }
        if let Some(view) = self.views.built.get(&key) {
            return view.clone();
        }
        let view = Arc::new(self.view(access.clone(), key.clone()));
        if self.views.built.len() >= MAX_VIEWS {
            return view;
        }
        self.views.built.entry(key).or_insert(view).clone()
    }

    /// Whether this catalog shows anything of `upstream` (a view may hide it whole).
    pub fn shows_upstream(&self, upstream: &str) -> bool {
        self.lens.upstream(upstream)
    }

    fn view(&self, access: Arc<Access>, key: ViewKey) -> Self {
        let scheme = access.scheme(&key).unwrap_or(&self.scheme).clone();
        let lens = Lens::Through { access, key };
        self.successor_of_self(Self::assemble(scheme, &self.views.parts, lens))
    }

    fn blind(&self) -> &Arc<Self> {
        self.views.blind.get_or_init(|| {
            let empty = Self::assemble(self.scheme.clone(), &[], Lens::Blind);
            Arc::new(self.successor_of_self(empty))
        })
    }

    /// `view`, paged and numbered as this snapshot, so that cursors find it through it.
    fn successor_of_self(&self, view: Self) -> Self {
        let mut view = view.paged(self.page_size);
        view.generation = self.generation;
        view.versions = self.versions;
        view
    }
}
