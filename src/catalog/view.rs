//! Views of a catalog snapshot: what one endpoint shows one principal under `policy`.
//!
//! A view is itself a `Catalog`, merged from the snapshot's upstream lists through a `Lens`,
//! so lists, pages, routes and URI resolution work on it unchanged, and whatever it does not
//! show is unknown to it. Views are built on first use and kept in the snapshot they were
//! made from (so pagination cursors, which name a snapshot, find them again); a snapshot with
//! no policy and no virtual endpoints serves itself to everyone.
//!
//! Upstreams whose lists are each user's own (`discovery = "per_user"`) are not in the
//! snapshot's lists: a user's view is merged with their own lists of those, in config order,
//! and kept per user until their lists change.

use std::sync::{Arc, OnceLock};

use dashmap::DashMap;

use super::{Access, Catalog, Features, NameScheme, UpstreamCatalog, ViewKey};
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
    built: DashMap<(Option<ViewKey>, Features), Arc<Catalog>>,
    blind: OnceLock<Arc<Catalog>>,
    /// Every upstream in config order, and those whose lists are each user's own.
    order: Vec<UpstreamName>,
    personal: Vec<UpstreamName>,
    /// Users' views, with the user's own lists they were merged with (by address).
    users: DashMap<UserViewKey, (Vec<usize>, Arc<Catalog>)>,
}

/// A user's view: the policy view it is cut by (`None`: the whole), the client features
/// whose tools it leaves out, and whose it is.
type UserViewKey = (Option<ViewKey>, Features, Principal);

/// Each user's own lists of the per-user upstreams, as a view merges them in.
pub type PersonalParts = Vec<(UpstreamName, Arc<UpstreamCatalog>)>;

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

    /// This snapshot, knowing the upstreams in config order (`order`) and which of them show
    /// each user their own lists (`personal`, left out of `parts`).
    pub fn with_personal(mut self, order: Vec<UpstreamName>, personal: Vec<UpstreamName>) -> Self {
        self.views.order = order;
        self.views.personal = personal;
        self
    }

    /// The upstreams that show each user their own lists.
    pub fn personal(&self) -> &[UpstreamName] {
        &self.views.personal
    }

    /// What `principal` sees at `endpoint` with a client that declared `declared`, merged
    /// with `theirs`: their own lists of the per-user upstreams (`personal`).
    pub fn view_for_user(
        self: &Arc<Self>,
        (endpoint, principal): (&EndpointName, &Principal),
        declared: Features,
        theirs: PersonalParts,
    ) -> Arc<Self> {
        let Some(key) = self.policy_key(endpoint, principal) else {
            return self.blind().clone();
        };
        let stamp: Vec<usize> = theirs
            .iter()
            .map(|(_, part)| Arc::as_ptr(part) as usize)
            .collect();
        let lacks = self.needed.without(declared);
        let cache_key = (key, lacks, principal.clone());
        if let Some(entry) = self.views.users.get(&cache_key)
            && entry.0 == stamp
        {
            return entry.1.clone();
        }
        let parts = self.merged_with(theirs);
        let (scheme, lens) = self.lens_of(&cache_key.0);
        let view = Self::assemble(scheme, &parts, lens, lacks);
        let view = Arc::new(self.successor_of_self(view));
        if self.views.users.len() < MAX_VIEWS || self.views.users.contains_key(&cache_key) {
            self.views.users.insert(cache_key, (stamp, view.clone()));
        }
        view
    }

    /// The policy view `principal` gets at `endpoint`: `Some(None)` for the whole catalog,
    /// `None` for nothing (an endpoint no longer configured).
    fn policy_key(
        &self,
        endpoint: &EndpointName,
        principal: &Principal,
    ) -> Option<Option<ViewKey>> {
        let access = &self.views.access;
        if access.is_open() {
            return Some(None);
        }
        let key = access.view_key(endpoint, principal)?;
        Some((!key.is_whole()).then_some(key))
    }

    /// The name scheme and lens of the policy view `key` (`None`: the whole catalog).
    fn lens_of(&self, key: &Option<ViewKey>) -> (NameScheme, Lens) {
        match key {
            None => (self.scheme.clone(), Lens::Whole),
            Some(key) => {
                let access = &self.views.access;
                (
                    access.scheme(key).unwrap_or(&self.scheme).clone(),
                    Lens::Through {
                        access: access.clone(),
                        key: key.clone(),
                    },
                )
            }
        }
    }

    /// The snapshot's lists and `theirs`, in config order.
    fn merged_with(&self, theirs: PersonalParts) -> Vec<(UpstreamName, Arc<UpstreamCatalog>)> {
        let mut theirs = theirs.into_iter().peekable();
        let mut shared = self.views.parts.iter().peekable();
        let mut parts = Vec::with_capacity(self.views.parts.len() + 1);
        for name in &self.views.order {
            if shared.peek().is_some_and(|(next, _)| next == name) {
                parts.extend(shared.next().cloned());
            } else if theirs.peek().is_some_and(|(next, _)| next == name) {
                parts.extend(theirs.next());
            }
        }
        parts
    }

    /// The policy and endpoints this snapshot's views follow.
    pub fn access(&self) -> &Arc<Access> {
        &self.views.access
    }

    /// What `principal` sees of this snapshot at `endpoint`, with a client that declared
    /// `declared` (the tools that need a feature it lacks are left out).
    pub fn view_for(
        self: &Arc<Self>,
        endpoint: &EndpointName,
        principal: &Principal,
        declared: Features,
    ) -> Arc<Self> {
        let Some(key) = self.policy_key(endpoint, principal) else {
            return self.blind().clone();
        };
        let lacks = self.needed.without(declared);
        if key.is_none() && lacks.is_empty() {
            return self.clone();
        }
        let cache_key = (key, lacks);
        if let Some(view) = self.views.built.get(&cache_key) {
            return view.clone();
        }
        let (scheme, lens) = self.lens_of(&cache_key.0);
        let view = Self::assemble(scheme, &self.views.parts, lens, lacks);
        let view = Arc::new(self.successor_of_self(view));
        if self.views.built.len() >= MAX_VIEWS {
            return view;
        }
        self.views.built.entry(cache_key).or_insert(view).clone()
    }

    /// Whether a tool of this snapshot depends on a client feature (then what each client
    /// declared decides what it sees).
    pub fn depends_on_client(&self) -> bool {
        !self.needed.is_empty()
    }

    /// Whether this catalog shows anything of `upstream` (a view may hide it whole).
    pub fn shows_upstream(&self, upstream: &str) -> bool {
        self.lens.upstream(upstream)
    }

    fn blind(&self) -> &Arc<Self> {
        self.views.blind.get_or_init(|| {
            let empty = Self::assemble(self.scheme.clone(), &[], Lens::Blind, Features::NONE);
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
