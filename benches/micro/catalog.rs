//! How long does a request take to find its tool's route among 10,000 tools (20 upstreams of
//! 500), from loading the catalog snapshot to holding the route's shared pointers?

use std::hint::black_box;

use arc_swap::ArcSwap;
use criterion::Criterion;

pub fn route_lookup(c: &mut Criterion) {
    let catalog = ArcSwap::from_pointee(super::catalog(20, 500));
    c.bench_function("catalog/route_among_10000_tools", |b| {
        b.iter(|| {
            let snapshot = catalog.load();
            let route = snapshot
                .tool_route(black_box("upstream-13__tool_250"))
                .map(|route| (route.route.upstream.clone(), route.route.original.clone()));
            black_box(route)
        })
    });
}
