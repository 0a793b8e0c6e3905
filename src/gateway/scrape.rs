//! The metric families read from the gateway's live state at scrape time: upstream states,
//! requests in flight and queued per upstream, catalog sizes, and the counters the upstreams
//! keep themselves (restarts, failed health checks, OAuth refreshes).

use prometheus::{GaugeVec, IntCounterVec, Opts, core::Collector, proto::MetricFamily};

use super::Gateway;
use crate::upstream::UpstreamState;

impl Gateway {
    /// Every series, in the Prometheus text format.
    pub fn render_metrics(&self) -> String {
        self.metrics.render(live_families(self))
    }
}

/// The families read from the live state at scrape time.
fn live_families(gateway: &Gateway) -> Vec<MetricFamily> {
    let gauge = |name: &str, help: &str, labels: &[&str]| {
        GaugeVec::new(Opts::new(name, help), labels).expect("valid metric options")
    };
    let counter = |name: &str, help: &str, labels: &[&str]| {
        IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric options")
    };
    let build = gauge(
        "switchyard_build_info",
        "Switchyard's version (always 1)",
        &["version"],
    );
    build
        .with_label_values(&[env!("CARGO_PKG_VERSION")])
        .set(1.0);
    let up = gauge(
        "switchyard_upstream_up",
        "Whether an upstream serves (1) or not (0)",
        &["upstream"],
    );
    let state = gauge(
        "switchyard_upstream_state",
        "An upstream's state: 1 for the current one",
        &["upstream", "state"],
    );
    let in_flight = gauge(
        "switchyard_upstream_requests_in_flight",
        "Requests in flight to an upstream",
        &["upstream"],
    );
    let queued = gauge(
        "switchyard_upstream_requests_queued",
        "Requests waiting for a place under an upstream's max_concurrent_requests",
        &["upstream"],
    );
    let items = gauge(
        "switchyard_catalog_items",
        "What an upstream lists, by kind",
        &["upstream", "kind"],
    );
    let rejected = gauge(
        "switchyard_catalog_rejected",
        "Definitions an upstream listed that are left out (unreadable, or a second of a name)",
        &["upstream"],
    );
    let held = gauge(
        "switchyard_tools_held",
        "Pinned tools whose changed (or new) definition waits for an operator's approval",
        &["upstream"],
    );
    let restarts = counter(
        "switchyard_upstream_restarts_total",
        "Times an upstream was connected again after a failure",
        &["upstream"],
    );
    let health = counter(
        "switchyard_upstream_health_check_failures_total",
        "Health checks an upstream failed",
        &["upstream"],
    );
    let refreshes = counter(
        "switchyard_oauth_refreshes_total",
        "OAuth token refreshes by upstream and outcome (success, failure)",
        &["upstream", "outcome"],
    );
    for upstream in gateway.live().upstreams.clone() {
        let name = upstream.name().as_str();
        let status = upstream.health().status();
        up.with_label_values(&[name])
            .set(f64::from(u8::from(upstream.health().is_ready())));
        for each in ALL_STATES {
            state
                .with_label_values(&[name, each.as_str()])
                .set(f64::from(u8::from(each == status.state)));
        }
        in_flight
            .with_label_values(&[name])
            .set(upstream.load().in_flight() as f64);
        queued
            .with_label_values(&[name])
            .set(upstream.load().queued() as f64);
        let catalog = upstream.catalog().unwrap_or_default();
        for (kind, count) in [
            ("tools", catalog.tools.len()),
            ("prompts", catalog.prompts.len()),
            ("resources", catalog.resources.len()),
            ("resource_templates", catalog.templates.len()),
        ] {
            items.with_label_values(&[name, kind]).set(count as f64);
        }
        rejected
            .with_label_values(&[name])
            .set(catalog.rejected.len() as f64);
        held.with_label_values(&[name])
            .set(gateway.pins().held_count(name) as f64);
        let (restarted, unhealthy) = upstream.health().restart_counts();
        restarts.with_label_values(&[name]).inc_by(restarted);
        health.with_label_values(&[name]).inc_by(unhealthy);
        let (ok, failed) = upstream
            .auth()
            .map(|auth| auth.refresh_counts())
            .unwrap_or_default();
        refreshes.with_label_values(&[name, "success"]).inc_by(ok);
        refreshes
            .with_label_values(&[name, "failure"])
            .inc_by(failed);
    }
    let mut families = Vec::new();
    families.extend(build.collect());
    families.extend(up.collect());
    families.extend(state.collect());
    families.extend(in_flight.collect());
    families.extend(queued.collect());
    families.extend(items.collect());
    families.extend(rejected.collect());
    families.extend(held.collect());
    families.extend(restarts.collect());
    families.extend(health.collect());
    families.extend(refreshes.collect());
    families
}

const ALL_STATES: [UpstreamState; 6] = [
    UpstreamState::Connecting,
    UpstreamState::Connected,
    UpstreamState::Discovering,
    UpstreamState::Ready,
    UpstreamState::Authenticating,
    UpstreamState::Failed,
];
