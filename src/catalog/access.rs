//! The policy and virtual endpoints of one configuration, compiled for the catalog: which view
//! a request gets (its endpoint and the `[[policy]]` rules that apply to its principal), and
//! what that view shows (`policy` decides item by item).

use smallvec::SmallVec;

use super::NameScheme;
use crate::{
    config::CatalogSettings,
    names::UpstreamName,
    policy::{
        EndpointName, EndpointSettings, Gate, Kind, Rule, ToolShape, admits, admits_upstream,
    },
    principal::Principal,
};

/// Which view of the catalog a request gets: its endpoint (by index) and the rules that apply
/// to its principal (by index, in order).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ViewKey {
    endpoint: Option<u16>,
    rules: SmallVec<[u16; 4]>,
}

impl ViewKey {
    /// The main endpoint with no rule applying: the whole catalog.
    pub fn is_whole(&self) -> bool {
        self.endpoint.is_none() && self.rules.is_empty()
    }
}

/// The policy and the virtual endpoints of one configuration, compiled.
#[derive(Debug, Default, PartialEq)]
pub struct Access {
    rules: Vec<Rule>,
    endpoints: Vec<EndpointSettings>,
    /// Each endpoint's naming scheme, by index.
    schemes: Vec<NameScheme>,
}

impl Access {
    /// `rules` and `endpoints` for a gateway serving `upstreams` (config order) named as
    /// `catalog` says.
    pub fn new(
        rules: Vec<Rule>,
        endpoints: Vec<EndpointSettings>,
        catalog: &CatalogSettings,
        upstreams: &[UpstreamName],
    ) -> Self {
        // Rules that restrict nothing (no allow or deny list) change no view.
        let rules = rules.into_iter().filter(|r| !r.gate.is_open()).collect();
        let schemes = endpoints
            .iter()
            .map(|endpoint| {
                let gates = std::iter::once(&endpoint.gate);
                let served = upstreams
                    .iter()
                    .filter(|u| admits_upstream(gates.clone(), u.as_str()))
                    .count();
                NameScheme::new(
                    endpoint.prefix_mode.unwrap_or(catalog.prefix_mode),
                    &catalog.separator,
                    served,
                )
            })
            .collect();
        Self {
            rules,
            endpoints,
            schemes,
        }
    }

    /// Whether every request sees the whole catalog (no rules, no virtual endpoints).
    pub fn is_open(&self) -> bool {
        self.rules.is_empty() && self.endpoints.is_empty()
    }

    pub fn endpoints(&self) -> &[EndpointSettings] {
        &self.endpoints
    }

    /// The view `principal` gets at `endpoint`; `None` when the endpoint is not configured
    /// (any more).
    pub fn view_key(&self, endpoint: &EndpointName, principal: &Principal) -> Option<ViewKey> {
        let endpoint = match endpoint.as_virtual() {
            None => None,
            Some(name) => Some(self.endpoints.iter().position(|e| *e.name == *name)? as u16),
        };
        let rules = self
            .rules
            .iter()
            .enumerate()
            .filter(|(_, rule)| rule.who.matches(principal))
            .map(|(i, _)| i as u16)
            .collect();
        Some(ViewKey { endpoint, rules })
    }

    /// The naming scheme of `key`'s endpoint, if it is a virtual one.
    pub fn scheme(&self, key: &ViewKey) -> Option<&NameScheme> {
        key.endpoint.map(|i| &self.schemes[usize::from(i)])
    }

    /// How `key`'s endpoint shows tool `tool` of `upstream`, if it reshapes it.
    pub fn tool_shape(&self, key: &ViewKey, upstream: &str, tool: &str) -> Option<&ToolShape> {
        let endpoint = &self.endpoints[usize::from(key.endpoint?)];
        endpoint.tools.get(&(upstream.to_owned(), tool.to_owned()))
    }

    /// Whether `key` sees upstream `upstream` at all.
    pub fn sees_upstream(&self, key: &ViewKey, upstream: &str) -> bool {
        self.endpoint_gate(key)
            .is_none_or(|gate| admits_upstream(std::iter::once(gate), upstream))
            && admits_upstream(self.rule_gates(key), upstream)
    }

    /// Whether `key` sees `item` (a tool or prompt name, or a URI) of `upstream`.
    pub fn sees(&self, key: &ViewKey, kind: Kind, upstream: &str, item: &str) -> bool {
        self.endpoint_gate(key)
            .is_none_or(|gate| admits(std::iter::once(gate), kind, upstream, item))
            && admits(self.rule_gates(key), kind, upstream, item)
    }

    fn endpoint_gate(&self, key: &ViewKey) -> Option<&Gate> {
        key.endpoint.map(|i| &self.endpoints[usize::from(i)].gate)
    }

    fn rule_gates<'a>(&'a self, key: &'a ViewKey) -> impl Iterator<Item = &'a Gate> + Clone {
        key.rules.iter().map(|i| &self.rules[usize::from(*i)].gate)
    }
}

#[cfg(test)]
mod tests;
