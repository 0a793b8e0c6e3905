//! How long does `tools/list` of 5,000 tools from 50 upstreams take: served from the page the
//! catalog snapshot prepared (the answer written around its bytes), and preparing that page
//! once, after the catalog changed?

use std::hint::black_box;

use criterion::Criterion;
use switchyard::{catalog::ListKind, protocol::Era, wire};

pub fn merged_tools_list(c: &mut Criterion) {
    let catalog = super::catalog(50, 100).paged(5000);
    let mut group = c.benchmark_group("lists/tools_list_5000_tools_50_upstreams");
    group.bench_function("served_from_prepared_bytes", |b| {
        b.iter(|| {
            let page = catalog.list_page(ListKind::Tools, Era::Legacy, 0);
            let text = std::str::from_utf8(&page).unwrap();
            black_box(wire::write::response(black_box("7"), text))
        })
    });
    group.sample_size(20);
    group.bench_function("prepared_once_per_snapshot", |b| {
        b.iter_with_setup(
            || super::catalog(50, 100).paged(5000),
            |fresh| black_box(fresh.list_page(ListKind::Tools, Era::Legacy, 0)),
        )
    });
    group.finish();
}
