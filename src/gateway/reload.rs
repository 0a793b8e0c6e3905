//! Applying a new configuration to the running gateway, as a diff by upstream name.
//!
//! Unchanged upstreams are kept as they are, with their connections and every client session
//! that uses them. Added ones start; removed and changed ones are retired (their calls in flight
//! get `server.shutdown_grace_seconds` to finish, then their sessions and processes close), and
//! a changed one starts again under its new configuration. Every other section of the file is
//! either applied at once (`sections_changed`, which cannot compile without a rule for every
//! field of `Config`) or kept as it runs and named as needing a restart (`keep_fixed`); the
//! tests hold every section of the file to one or the other.
//! Clients are told which lists changed.

use std::sync::Arc;

use super::{
    Gateway, Setup, Written, access_of,
    journal::{ReloadEntry, ReloadOutcome, Trigger, unix_now},
    scheme_of,
};
use crate::{
    catalog::ListChanges,
    config::{Config, ConfigError},
};

impl Gateway {
    /// Reloads the configuration from its file (`config().source`).
    pub async fn reload_from_file(self: &Arc<Self>, trigger: Trigger) -> ReloadEntry {
        let path = self.live().config.source.clone();
        let loaded = tokio::task::spawn_blocking(move || crate::config::load(&path))
            .await
            .unwrap_or_else(|panic| {
                std::panic::resume_unwind(panic.into_panic());
            });
        self.reload(loaded, trigger).await
    }

    /// Applies `loaded` (or records why it could not be loaded, changing nothing).
    pub async fn reload(
        self: &Arc<Self>,
        loaded: Result<Config, ConfigError>,
        trigger: Trigger,
    ) -> ReloadEntry {
        let written = self.reloading.lock().await;
        let entry = match loaded {
            Ok(next) => self.apply(next, trigger, &written),
            Err(error) => ReloadEntry {
                at: unix_now(),
                trigger,
                outcome: ReloadOutcome::Rejected,
                summary: "the configuration is invalid; the running one is kept".into(),
                errors: error.problem_lines(),
                needs_restart: Vec::new(),
            },
        };
        log(&entry);
        self.metrics.reloaded(entry.outcome.as_str());
        if entry.outcome == ReloadOutcome::Rejected {
            self.journal.error(None, entry.errors.join("; "));
        }
        self.audit.record(&crate::audit::Record {
            kind: "reload",
            principal: trigger_name(entry.trigger),
            outcome: entry.outcome.as_str(),
            detail: Some(&entry.summary),
            ..Default::default()
        });
        self.journal.reload(entry.clone());
        entry
    }

    fn apply(
        self: &Arc<Self>,
        mut next: Config,
        trigger: Trigger,
        written: &Option<Written>,
    ) -> ReloadEntry {
        for warning in next.warnings() {
            tracing::warn!("{warning}");
        }
        let live = self.live.load_full();
        let old = &live.config;
        let needs_restart = keep_fixed(old, &mut next, written);
        let mut added = Vec::new();
        let mut changed = Vec::new();
        let upstreams: Vec<_> = next
            .upstreams
            .iter()
            .map(|config| match live.upstream(config.name.as_str()) {
                Some(running) if running.config() == config => running.clone(),
                Some(_) => {
                    changed.push(config.name.to_string());
                    self.launch(config.clone())
                }
                None => {
                    added.push(config.name.to_string());
                    self.launch(config.clone())
                }
            })
            .collect();
        let retired: Vec<_> = live
            .upstreams
            .iter()
            .filter(|running| !upstreams.iter().any(|kept| Arc::ptr_eq(kept, running)))
            .cloned()
            .collect();
        let removed: Vec<_> = retired
            .iter()
            .map(|u| u.name().to_string())
            .filter(|name| !changed.contains(name))
            .collect();
        let sections = sections_changed(old, &next);
        let pinning = |c: &Config| (c.catalog.pin, c.catalog.pin_new, c.catalog.pin_changed);
        if pinning(&next) != pinning(old) {
            self.pins.configure(&next.catalog);
            // The upstreams kept serve their lists as the new settings pin them.
            let kept: Vec<String> = upstreams
                .iter()
                .filter(|kept| live.upstreams.iter().any(|old| Arc::ptr_eq(kept, old)))
                .map(|kept| kept.name().to_string())
                .collect();
            let gateway = self.clone();
            tokio::spawn(async move {
                for name in kept {
                    gateway.resettle(&name).await;
                }
            });
        }
        if added.is_empty() && changed.is_empty() && removed.is_empty() && sections.is_empty() {
            return ReloadEntry {
                at: unix_now(),
                trigger,
                outcome: ReloadOutcome::Unchanged,
                summary: "nothing changed".into(),
                errors: Vec::new(),
                needs_restart,
            };
        }
        let scheme = scheme_of(&next);
        let renamed = scheme != live.scheme;
        // Compiled again, as endpoints also name things by `[catalog]` and by how many
        // upstreams they serve; kept when it comes out the same (its snapshots' cursors too).
        let fresh = access_of(&next);
        let kept = fresh == *live.access;
        let access = if kept {
            live.access.clone()
        } else {
            Arc::new(fresh)
        };
        // A view may change even where the upstreams' lists did not: every client is told.
        let reviewed = renamed || !kept;
        let grace = next.server.shutdown_grace;
        self.oauth().set_users_authenticate(next.auth.configured);
        // New names for everything if the scheme changed; otherwise the catalog diff tells
        // clients which lists changed.
        let announced = if reviewed {
            ListChanges {
                tools: true,
                prompts: true,
                resources: true,
            }
        } else {
            ListChanges::default()
        };
        self.publish(
            Some(Setup {
                config: Arc::new(next),
                upstreams,
                scheme,
                access,
                generation: live.generation + 1,
            }),
            announced,
        );
        for upstream in retired {
            // A changed upstream's supervisor was stopped when `launch` replaced it.
            if !changed.iter().any(|name| name == upstream.name().as_str())
                && let Some(stop) = self.lock_supervisors().remove(upstream.name())
            {
                stop.cancel();
            }
            let gateway = self.clone();
            tokio::spawn(async move {
                upstream.retire(grace).await;
                // Its series go with it, unless an upstream of that name is back.
                let name = upstream.name().as_str();
                if gateway.live().upstream(name).cloned().is_none()
                    && let Some(table) = upstream.lists().tool_series()
                {
                    gateway.metrics.forget_upstream(name, &table);
                }
            });
        }
        let mut summary = Vec::new();
        for (verb, names) in [
            ("added", &added),
            ("removed", &removed),
            ("changed", &changed),
        ] {
            if !names.is_empty() {
                summary.push(format!("{verb} {}", names.join(", ")));
            }
        }
        if !sections.is_empty() {
            summary.push(format!("applied {}", sections.join(", ")));
        }
        ReloadEntry {
            at: unix_now(),
            trigger,
            outcome: ReloadOutcome::Applied,
            summary: summary.join("; "),
            errors: Vec::new(),
            needs_restart,
        }
    }
}

/// Keeps in `next` the settings that cannot change while running, returning the keys of those
/// that the new file changes.
/// The listen addresses are compared with those the file gave at start (`written`), as the
/// running ones may differ from them (`--listen`, port 0); a change stays reported until a
/// restart applies it.
fn keep_fixed(old: &Config, next: &mut Config, written: &Option<Written>) -> Vec<String> {
    let mut needs_restart = Vec::new();
    let before = written.unwrap_or(Written {
        listen: old.server.listen,
        admin_listen: old.admin.listen,
    });
    if next.server.listen != before.listen {
        needs_restart.push("server.listen".to_owned());
    }
    if next.admin.listen != before.admin_listen {
        needs_restart.push("admin.listen".to_owned());
    }
    next.server.listen = old.server.listen;
    next.admin.listen = old.admin.listen;
    // The body's part of it applies at once; the headers' when the listener starts.
    if next.server.client_timeout != old.server.client_timeout {
        needs_restart.push("server.client_timeout_seconds (for request headers)".to_owned());
    }
    if next.server.endpoint_path != old.server.endpoint_path {
        needs_restart.push("server.endpoint_path".to_owned());
        next.server.endpoint_path = old.server.endpoint_path.clone();
    }
    if next.oauth != old.oauth {
        needs_restart.push("oauth".to_owned());
        next.oauth = old.oauth.clone();
    }
    if next.store != old.store {
        needs_restart.push("store".to_owned());
        next.store = old.store.clone();
    }
    if next.telemetry != old.telemetry {
        needs_restart.push("telemetry".to_owned());
        next.telemetry = old.telemetry.clone();
    }
    if next.admin != old.admin {
        needs_restart.push("admin".to_owned());
        next.admin = old.admin.clone();
    }
    // Its writer (the file and its chain) is opened at start.
    if next.audit != old.audit {
        needs_restart.push("audit".to_owned());
        next.audit = old.audit.clone();
    }
    needs_restart.dedup();
    needs_restart
}

/// The sections applied at once that `next` changes, by their names in the file.
/// (Those that need a restart were set back to their running values by `keep_fixed`.)
fn sections_changed(old: &Config, next: &Config) -> Vec<&'static str> {
    // Every field named: a field added to `Config` does not compile here until it is taken.
    // The upstreams (with the overlay and the disabled) are compared one by one by `apply`;
    // the sections that need a restart were set back to their running values by `keep_fixed`.
    let Config {
        source: _,
        server,
        catalog,
        upstreams: _,
        oauth: _,
        admin: _,
        auth,
        limits,
        policy,
        endpoints,
        endpoint_cors,
        store: _,
        audit: _,
        quotas,
        guardrails,
        telemetry: _,
        overlay: _,
        disabled: _,
    } = next;
    let mut changed = Vec::new();
    for (name, differs) in [
        ("server", *server != old.server),
        ("catalog", *catalog != old.catalog),
        ("auth", *auth != old.auth),
        ("limits", *limits != old.limits),
        ("policy", *policy != old.policy),
        (
            "endpoints",
            *endpoints != old.endpoints || *endpoint_cors != old.endpoint_cors,
        ),
        ("quota", *quotas != old.quotas),
        ("guardrail", *guardrails != old.guardrails),
    ] {
        if differs {
            changed.push(name);
        }
    }
    changed
}

fn log(entry: &ReloadEntry) {
    let trigger = format!("{:?}", entry.trigger).to_lowercase();
    match entry.outcome {
        ReloadOutcome::Rejected => tracing::error!(
            %trigger,
            problems = %entry.errors.join("\n  "),
            "configuration rejected; the running one is kept"
        ),
        outcome => tracing::info!(
            %trigger,
            outcome = outcome.as_str(),
            summary = %entry.summary,
            "configuration reloaded"
        ),
    }
    if !entry.needs_restart.is_empty() {
        tracing::warn!(
            settings = %entry.needs_restart.join(", "),
            "these settings changed in the file but take effect only after a restart"
        );
    }
}

#[cfg(test)]
mod tests;

/// Who asked for a reload, as audit records name them.
fn trigger_name(trigger: Trigger) -> &'static str {
    match trigger {
        Trigger::File => "the configuration file",
        Trigger::Signal => "SIGHUP",
        Trigger::Admin => "admin",
    }
}
