//! An input schema as the checker walks it: every subschema reachable from the root, with the
//! subschemas it applies at the same place in the arguments (`$ref`, `allOf`, `anyOf`, `not`,
//! …) and those it applies one level down (`properties`, `items`, …). References are resolved
//! as `jsonschema` resolves them (the `referencing` crate); a dynamic reference leads to every
//! anchor it could reach. Where a keyword's meaning depends on the draft, the graph takes every
//! meaning at once: it may count more work than a check does, never less. (`contentSchema`
//! only annotates, as `jsonschema` reads it: nothing is checked against it.)

use std::collections::HashMap;

use referencing::{Draft, Registry, Resolver, ResourceRef, uri};
use serde_json::Value;

/// The base of a schema without `$id`, as `jsonschema` takes it.
const DEFAULT_BASE: &str = "json-schema:///";

/// The most subschemas a graph holds: a larger schema is refused (see `cost`).
pub const MAX_NODES: usize = 20_000;

/// The subschemas of one input schema; node 0 is the root.
#[derive(Debug, Default)]
pub struct Graph {
    pub nodes: Vec<Node>,
}

/// One subschema and what it applies.
#[derive(Debug, Default)]
pub struct Node {
    /// Applied at the same place: references, `allOf`/`anyOf`/`oneOf`/`not`,
    /// `if`/`then`/`else`, `dependentSchemas`.
    pub same: Vec<usize>,
    /// It holds `anyOf` or `oneOf`, whose failure is told with every branch's errors.
    pub branches: bool,
    /// Applied to the property of that name.
    pub properties: Vec<(String, usize)>,
    /// Applied to every property (`patternProperties`, whatever the pattern, and
    /// `unevaluatedProperties`).
    pub every_property: Vec<usize>,
    /// Applied to properties not in `properties` (`additionalProperties`).
    pub other_properties: Vec<usize>,
    /// Applied to each property's name (`propertyNames`).
    pub names: Vec<usize>,
    /// Applied to the item at that position (`prefixItems`, or `items` as a list).
    pub prefix: Vec<usize>,
    /// Applied to the items after the prefix (`items`, `additionalItems`).
    pub rest: Vec<usize>,
    /// Applied to every item (`contains`, `unevaluatedItems`).
    pub every_item: Vec<usize>,
}

impl Graph {
    /// The graph of `schema`, or why it cannot be built (a reference that does not resolve, or
    /// more than `MAX_NODES` subschemas).
    pub fn of(schema: &Value) -> Result<Self, String> {
        let draft = Draft::default().detect(schema);
        let mut walk = Walk {
            draft,
            graph: Graph::default(),
            seen: HashMap::new(),
            values: Vec::new(),
            pending: Vec::new(),
            dynamic: Vec::new(),
            recursive: Vec::new(),
        };
        // Most schemas refer to nothing: they are walked without a registry, which costs
        // more than the walk.
        if !refers(schema) {
            walk.node(schema, None)?;
            return walk.finish();
        }
        let resource = draft.create_resource_ref(schema);
        let base = resource.id().unwrap_or(DEFAULT_BASE);
        let registry = Registry::new()
            .draft(draft)
            .retrieve_known_draft_meta_schemas(false)
            .add(base, resource)
            .and_then(|builder| builder.prepare())
            .map_err(|error| format!("its references cannot be resolved: {error}"))?;
        let base =
            uri::from_str(base).map_err(|error| format!("its `$id` is not a URI: {error}"))?;
        walk.node(schema, Some(registry.resolver(base)))?;
        walk.finish()
    }
}

/// Whether `schema` holds a reference anywhere (a key `$ref`, `$dynamicRef` or
/// `$recursiveRef`; in a place that is not a subschema too, which only costs a registry).
fn refers(schema: &Value) -> bool {
    match schema {
        Value::Object(map) => map.iter().any(|(key, value)| {
            matches!(key.as_str(), "$ref" | "$dynamicRef" | "$recursiveRef") || refers(value)
        }),
        Value::Array(items) => items.iter().any(refers),
        _ => false,
    }
}

/// The graph being built: nodes by the address of their subschema (the registry borrows the
/// schema, so a resolved reference lands on the same address as the walk).
struct Walk<'r> {
    draft: Draft,
    graph: Graph,
    seen: HashMap<*const Value, usize>,
    /// Each node's subschema.
    values: Vec<&'r Value>,
    /// Subschemas to walk, with what resolves references where they stand (none where the
    /// schema has no reference).
    pending: Vec<(usize, &'r Value, Option<Resolver<'r>>)>,
    /// `$dynamicRef`s (the node, the anchor's name), linked once every node is known.
    dynamic: Vec<(usize, String)>,
    /// Nodes with a `$recursiveRef`.
    recursive: Vec<usize>,
}

impl<'r> Walk<'r> {
    /// Walks every queued subschema, then links the dynamic references: the graph.
    fn finish(mut self) -> Result<Graph, String> {
        while let Some((at, value, resolver)) = self.pending.pop() {
            self.applicators(at, value, resolver.as_ref())?;
        }
        self.link_dynamic();
        Ok(self.graph)
    }

    /// The node of `value`, added (and its applicators queued) if new.
    fn node(&mut self, value: &'r Value, resolver: Option<Resolver<'r>>) -> Result<usize, String> {
        let key = value as *const Value;
        if let Some(&at) = self.seen.get(&key) {
            return Ok(at);
        }
        if self.graph.nodes.len() >= MAX_NODES {
            return Err(format!("it has more than {MAX_NODES} subschemas"));
        }
        let at = self.graph.nodes.len();
        self.graph.nodes.push(Node::default());
        self.seen.insert(key, at);
        self.values.push(value);
        // A subschema with an `$id` is a resource of its own: references in it resolve
        // against that.
        let resolver = resolver
            .map(|resolver| resolver.in_subresource(ResourceRef::new(value, self.draft)))
            .transpose()
            .map_err(|error| format!("its `$id` cannot be resolved: {error}"))?;
        self.pending.push((at, value, resolver));
        Ok(at)
    }

    fn nodes(
        &mut self,
        values: &'r Value,
        resolver: Option<&Resolver<'r>>,
    ) -> Result<Vec<usize>, String> {
        match values {
            Value::Array(items) => items
                .iter()
                .map(|item| self.node(item, resolver.cloned()))
                .collect(),
            Value::Object(_) | Value::Bool(_) => Ok(vec![self.node(values, resolver.cloned())?]),
            _ => Ok(Vec::new()),
        }
    }

    /// Records what node `at` (the subschema `value`) applies.
    fn applicators(
        &mut self,
        at: usize,
        value: &'r Value,
        resolver: Option<&Resolver<'r>>,
    ) -> Result<(), String> {
        let Value::Object(keywords) = value else {
            return Ok(());
        };
        let mut node = Node::default();
        for (keyword, inner) in keywords {
            match keyword.as_str() {
                "$ref" => {
                    if let Some(reference) = inner.as_str() {
                        node.same.push(self.reference(reference, resolver)?);
                    }
                }
                "$dynamicRef" => {
                    if let Some(reference) = inner.as_str() {
                        node.same.push(self.reference(reference, resolver)?);
                        let anchor = reference.rsplit('#').next().unwrap_or_default();
                        self.dynamic.push((at, anchor.to_owned()));
                    }
                }
                "$recursiveRef" => {
                    node.same.push(self.reference("#", resolver)?);
                    self.recursive.push(at);
                }
                "allOf" | "not" | "if" | "then" | "else" => {
                    node.same.extend(self.nodes(inner, resolver)?)
                }
                "anyOf" | "oneOf" => {
                    node.branches = true;
                    node.same.extend(self.nodes(inner, resolver)?);
                }
                "dependentSchemas" | "dependencies" => {
                    for schema in inner.as_object().into_iter().flat_map(|map| map.values()) {
                        // `dependencies` also lists required names (an array): no schema.
                        if !schema.is_array() {
                            node.same.extend(self.nodes(schema, resolver)?);
                        }
                    }
                }
                "properties" => {
                    for (name, schema) in inner.as_object().into_iter().flatten() {
                        let child = self.node(schema, resolver.cloned())?;
                        node.properties.push((name.clone(), child));
                    }
                }
                "patternProperties" => {
                    for schema in inner.as_object().into_iter().flat_map(|map| map.values()) {
                        node.every_property
                            .push(self.node(schema, resolver.cloned())?);
                    }
                }
                "unevaluatedProperties" => node.every_property.extend(self.nodes(inner, resolver)?),
                "additionalProperties" => {
                    node.other_properties.extend(self.nodes(inner, resolver)?)
                }
                "propertyNames" => node.names.extend(self.nodes(inner, resolver)?),
                "prefixItems" => node.prefix.extend(self.nodes(inner, resolver)?),
                "items" if inner.is_array() => node.prefix.extend(self.nodes(inner, resolver)?),
                "items" | "additionalItems" => node.rest.extend(self.nodes(inner, resolver)?),
                "contains" | "unevaluatedItems" => {
                    node.every_item.extend(self.nodes(inner, resolver)?)
                }
                _ => {}
            }
        }
        self.graph.nodes[at] = node;
        Ok(())
    }

    /// The node `reference` leads to from where `resolver` stands.
    fn reference(
        &mut self,
        reference: &str,
        resolver: Option<&Resolver<'r>>,
    ) -> Result<usize, String> {
        let resolver = resolver.ok_or("a reference was missed")?;
        let resolved = resolver
            .lookup(reference)
            .map_err(|error| format!("its reference `{reference}` cannot be resolved: {error}"))?;
        let (contents, resolver, _) = resolved.into_inner();
        self.node(contents, Some(resolver))
    }

    /// A `$dynamicRef` may land on any `$dynamicAnchor` of its name, and a `$recursiveRef` on
    /// any `$recursiveAnchor`, depending on the path that reached it: each gets them all.
    fn link_dynamic(&mut self) {
        if self.dynamic.is_empty() && self.recursive.is_empty() {
            return;
        }
        let mut anchors: Vec<(usize, String)> = Vec::new();
        let mut recursive_anchors = Vec::new();
        for (at, value) in self.values.iter().enumerate() {
            let Value::Object(keywords) = value else {
                continue;
            };
            if let Some(name) = keywords.get("$dynamicAnchor").and_then(Value::as_str) {
                anchors.push((at, name.to_owned()));
            }
            if keywords.get("$recursiveAnchor") == Some(&Value::Bool(true)) {
                recursive_anchors.push(at);
            }
        }
        for (at, name) in std::mem::take(&mut self.dynamic) {
            let targets = anchors.iter().filter(|(_, anchor)| *anchor == name);
            self.graph.nodes[at]
                .same
                .extend(targets.map(|(target, _)| *target));
        }
        for at in std::mem::take(&mut self.recursive) {
            self.graph.nodes[at].same.extend(&recursive_anchors);
        }
    }
}
