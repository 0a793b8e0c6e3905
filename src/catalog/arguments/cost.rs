//! What checking arguments against a schema can cost, worked out once from its graph at
//! discovery: for each depth in the arguments, how many subschema evaluations one value at that
//! depth takes at worst (every branch tried, nothing remembered between branches). A call's
//! cost is then the sum over its values, known from its shape before anything is checked.
//!
//! The count follows evaluation paths: a subschema reached at one place by two paths (two
//! `anyOf` branches that both refer to it) is counted twice, which is exactly how a validator
//! without memory pays for it, and why a small schema can cost exponentially much.

use super::graph::{Graph, Node};

/// Counts beyond this are "more than any budget": the profile stops growing there.
const HARD_CAP: u64 = 1 << 40;
/// The deepest value a profile describes: the most nesting a request may have at all.
pub const MAX_PROFILE_DEPTH: usize = 1000;
/// Node visits (nodes × depths) spent on one profile, at most.
const MAX_WORK: usize = 4_000_000;

/// The worst-case cost of checking one value at each depth of the arguments.
#[derive(Debug, Clone)]
pub struct Profile {
    /// Evaluations of one value at depth `d` (the arguments' object is depth 0).
    per_value: Vec<u64>,
    /// The most `anyOf`/`oneOf` subschemas on a path from the root to a value at depth `d`:
    /// telling a failure re-evaluates what lies under each of them once more.
    branching: Vec<u64>,
    /// What holds below the last depth described.
    tail: Tail,
    /// The largest of `per_value` (or `u64::MAX` when some depth cannot be checked).
    pub most: u64,
    /// The schema has `anyOf` or `oneOf` somewhere.
    pub branches: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tail {
    /// Nothing in the schema applies deeper: deeper values cost nothing.
    Nothing,
    /// Each deeper level costs what the last described one does, with `branching` growing
    /// by this much a level.
    Repeats { branching_growth: u64 },
    /// Values from the depth after the last described one cost more than any budget.
    TooCostly,
}

/// What checking a call's arguments would cost at worst.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cost {
    /// Evaluations of subschemas to tell whether the arguments are valid.
    pub check: u64,
    /// Evaluations to also say what is wrong with them.
    pub explain: u64,
}

impl Profile {
    /// The profile of `graph`, or why the schema is unbounded whatever the arguments: a
    /// reference loop that never descends into them.
    pub fn of(graph: &Graph) -> Result<Self, String> {
        let order = same_place_order(graph)?;
        let count = graph.nodes.len();
        let max_depth = MAX_PROFILE_DEPTH.min(MAX_WORK / count.max(1));
        let mut profile = Profile {
            per_value: Vec::new(),
            branching: Vec::new(),
            tail: Tail::TooCostly,
            most: 0,
            branches: graph.nodes.iter().any(|node| node.branches),
        };
        let mut entering = vec![0u64; count];
        entering[0] = 1;
        let mut ancestors = vec![0u64; count];
        let mut previous: Option<Vec<u64>> = None;
        while profile.per_value.len() <= max_depth {
            let (paths, above) = spread(graph, &order, entering, ancestors);
            let total = paths.iter().fold(0u64, |sum, &n| sum.saturating_add(n));
            let deepest = (0..count)
                .filter(|&at| paths[at] > 0)
                .map(|at| above[at])
                .max()
                .unwrap_or(0);
            if total > HARD_CAP {
                profile.tail = Tail::TooCostly;
                break;
            }
            if previous.as_ref() == Some(&paths) {
                let growth = deepest.saturating_sub(*profile.branching.last().unwrap_or(&0));
                profile.tail = Tail::Repeats {
                    branching_growth: growth,
                };
                break;
            }
            profile.per_value.push(total);
            profile.branching.push(deepest);
            profile.most = profile.most.max(total);
            if total == 0 {
                profile.tail = Tail::Nothing;
                break;
            }
            (entering, ancestors) = descend(graph, &paths, &above);
            previous = Some(paths);
        }
        if profile.tail == Tail::TooCostly {
            profile.most = u64::MAX;
        }
        Ok(profile)
    }

    /// The cost of one value at `depth`, and the `anyOf`/`oneOf` above it; `None` if it is
    /// more than any budget.
    fn at(&self, depth: usize) -> Option<(u64, u64)> {
        if let Some(&cost) = self.per_value.get(depth) {
            return Some((cost, self.branching[depth]));
        }
        let last = self.per_value.len().checked_sub(1)?;
        match self.tail {
            Tail::Nothing => Some((0, 0)),
            Tail::Repeats { branching_growth } => {
                let below = (depth - last) as u64;
                let branching =
                    self.branching[last].saturating_add(branching_growth.saturating_mul(below));
                Some((self.per_value[last], branching))
            }
            Tail::TooCostly => None,
        }
    }

    /// The cost of checking arguments with `values[d]` values at depth `d`; `None` if a value
    /// lies where no check can be afforded.
    pub fn cost(&self, values: &[u64]) -> Option<Cost> {
        let mut cost = Cost {
            check: 0,
            explain: 0,
        };
        for (depth, &n) in values.iter().enumerate() {
            if n == 0 {
                continue;
            }
            let (each, branching) = self.at(depth)?;
            let check = each.saturating_mul(n);
            cost.check = cost.check.saturating_add(check);
            cost.explain = cost
                .explain
                .saturating_add(check.saturating_mul(branching.saturating_add(1)));
        }
        Some(cost)
    }

    /// The shallowest depth at which one value costs more than `budget`, if any.
    pub fn first_over(&self, budget: u64) -> Option<usize> {
        if let Some(depth) = self.per_value.iter().position(|&cost| cost > budget) {
            return Some(depth);
        }
        (self.tail == Tail::TooCostly).then_some(self.per_value.len())
    }
}

/// The nodes in an order where each comes before the nodes it applies at the same place; an
/// error if some node applies itself there (through references), which no argument can end.
fn same_place_order(graph: &Graph) -> Result<Vec<usize>, String> {
    let count = graph.nodes.len();
    let mut incoming = vec![0usize; count];
    for node in &graph.nodes {
        for &target in &node.same {
            incoming[target] += 1;
        }
    }
    let mut ready: Vec<usize> = (0..count).filter(|&at| incoming[at] == 0).collect();
    let mut order = Vec::with_capacity(count);
    while let Some(at) = ready.pop() {
        order.push(at);
        for &target in &graph.nodes[at].same {
            incoming[target] -= 1;
            if incoming[target] == 0 {
                ready.push(target);
            }
        }
    }
    if order.len() < count {
        return Err(
            "its references loop back to a subschema at the same place in the \
                    arguments without descending into them"
                .into(),
        );
    }
    Ok(order)
}

/// From the paths `entering` each node at one value, every node's paths there once the
/// subschemas applied at the same place are followed, with the most `anyOf`/`oneOf` above it.
fn spread(
    graph: &Graph,
    order: &[usize],
    mut paths: Vec<u64>,
    mut above: Vec<u64>,
) -> (Vec<u64>, Vec<u64>) {
    for &at in order {
        let n = paths[at];
        if n == 0 {
            continue;
        }
        let node = &graph.nodes[at];
        let below = above[at].saturating_add(u64::from(node.branches));
        for &target in &node.same {
            paths[target] = paths[target].saturating_add(n);
            above[target] = above[target].max(below);
        }
    }
    (paths, above)
}

/// The paths entering each node at the costliest value one level down from a value where
/// `paths` apply: per node, the most any one child can receive (an object's property, an
/// array's item or a property name).
fn descend(graph: &Graph, paths: &[u64], above: &[u64]) -> (Vec<u64>, Vec<u64>) {
    let count = graph.nodes.len();
    // A property: what every property gets, plus the most one name adds. (A node's
    // `additionalProperties` is counted for its named properties too: more, never less.)
    let mut property = vec![0u64; count];
    let mut named: std::collections::HashMap<&str, Vec<(usize, u64)>> = Default::default();
    // An item: what every item gets, plus the most one position adds.
    let mut item = vec![0u64; count];
    let mut positions: Vec<Vec<(usize, u64)>> = Vec::new();
    let mut name = vec![0u64; count];
    let mut next_above = vec![0u64; count];
    for (at, node) in graph.nodes.iter().enumerate() {
        let n = paths[at];
        if n == 0 {
            continue;
        }
        let add = |to: &mut Vec<u64>, targets: &[usize]| {
            for &target in targets {
                to[target] = to[target].saturating_add(n);
            }
        };
        add(&mut property, &node.every_property);
        add(&mut property, &node.other_properties);
        for (key, target) in &node.properties {
            named.entry(key).or_default().push((*target, n));
        }
        add(&mut item, &node.every_item);
        add(&mut item, &node.rest);
        for (index, &target) in node.prefix.iter().enumerate() {
            if positions.len() <= index {
                positions.resize_with(index + 1, Vec::new);
            }
            positions[index].push((target, n));
        }
        add(&mut name, &node.names);
        let below = above[at].saturating_add(u64::from(node.branches));
        for target in children(node) {
            next_above[target] = next_above[target].max(below);
        }
    }
    let mut entering = vec![0u64; count];
    for (base, extras) in [
        (&property, named.into_values().collect::<Vec<_>>()),
        (&item, positions),
    ] {
        let mut most_extra = vec![0u64; count];
        for extra in extras {
            let mut sum: std::collections::HashMap<usize, u64> = Default::default();
            for (target, n) in extra {
                let slot = sum.entry(target).or_default();
                *slot = slot.saturating_add(n);
            }
            for (target, n) in sum {
                most_extra[target] = most_extra[target].max(n);
            }
        }
        for at in 0..count {
            let here = base[at].saturating_add(most_extra[at]);
            entering[at] = entering[at].max(here);
        }
    }
    for at in 0..count {
        entering[at] = entering[at].max(name[at]);
    }
    (entering, next_above)
}

/// Every subschema `node` applies one level down.
fn children(node: &Node) -> impl Iterator<Item = usize> + '_ {
    node.properties
        .iter()
        .map(|(_, target)| *target)
        .chain(node.every_property.iter().copied())
        .chain(node.other_properties.iter().copied())
        .chain(node.names.iter().copied())
        .chain(node.prefix.iter().copied())
        .chain(node.rest.iter().copied())
        .chain(node.every_item.iter().copied())
}
