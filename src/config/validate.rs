//! Raw configuration → runtime `Config`, collecting every problem with its key path.

use std::path::Path;

use super::{
    Config, ConfigError, OverlayInfo,
    expand::Vars,
    keys::{Checker, key_segment},
    overlay::RawOverlay,
    parse::Parsed,
    upstream::default_policy,
};

/// Checks `parsed` merged with `overlay` and builds the runtime config, or returns every
/// problem found: those of the file if it has any, else those of the overlay.
pub fn validate(
    parsed: Parsed,
    path: &Path,
    overlay: RawOverlay,
    vars: &dyn Vars,
) -> Result<Config, ConfigError> {
    let Parsed {
        mut raw,
        upstreams_key,
        problems,
    } = parsed;
    raw.upstreams
        .items
        .retain(|(name, _)| !overlay.removed.contains(name));
    let mut overlay = overlay;
    // Switched off through the admin API: configured, and left out like `enabled = false`.
    for (name, upstream) in
        (raw.upstreams.items.iter_mut()).chain(overlay.upstreams.items.iter_mut())
    {
        if overlay.disabled.contains(name) {
            upstream.enabled = Some(false);
        }
    }
    let disabled: Vec<String> = (raw.upstreams.items.iter())
        .chain(overlay.upstreams.items.iter())
        .filter(|(_, upstream)| upstream.enabled == Some(false))
        .map(|(name, _)| name.clone())
        .collect();
    let mut check = Checker {
        problems,
        vars,
        base_dir: path.parent().map(Path::to_path_buf).unwrap_or_default(),
    };
    let server = check.server(&raw.server);
    let catalog = check.catalog(&raw.catalog);
    let defaults = check.policy(
        "upstream_defaults",
        raw.upstream_defaults.policy(),
        &default_policy(),
    );
    let mut upstreams = check.upstreams(&raw.upstreams, upstreams_key, &defaults);
    let oauth = check.oauth(&raw.oauth);
    let admin = check.admin(&raw.admin);
    let auth = check.auth(raw.auth.as_ref());
    let limits = check.limits(raw.limits.as_ref(), auth.configured);
    let policy = check.policy_rules(raw.policy.as_deref());
    let endpoints = check.endpoints(
        raw.endpoints.as_ref(),
        &server.endpoint_path,
        raw.catalog.tool_search_threshold,
    );
    let endpoint_cors = (raw.endpoints.iter())
        .flat_map(|endpoints| endpoints.iter())
        .filter_map(|(name, endpoint)| {
            let key = format!("endpoints.{}.cors", super::keys::key_segment(name));
            let cors = check.cors(&key, endpoint.cors.as_ref()?, true);
            Some((name.to_owned(), cors))
        })
        .collect();
    let store = check.store(raw.store.as_ref());
    let audit = check.audit(raw.audit.as_ref());
    let telemetry = check.telemetry(raw.telemetry.as_ref());
    let quotas = check.quotas(raw.quota.as_deref());
    let guardrails = check.guardrails(raw.guardrail.as_deref());
    if let Some(problem) = auth.exposure(server.listen) {
        check.problem("server.listen", problem);
    }
    if let Some(listen) = server.passthrough_listen
        && let Some(problem) = auth.exposure(listen)
    {
        check.problem(
            "server.passthrough_listen",
            problem.replace("server.listen", "server.passthrough_listen"),
        );
    }
    for upstream in &upstreams {
        let super::TransportConfig::Http(http) = &upstream.transport else {
            continue;
        };
        if http.oauth.enabled && http.oauth.exchanges() && auth.jwt.is_none() {
            check.problem(
                format!("upstreams.{}.oauth.grant", upstream.name),
                format!(
                    "`{}` exchanges the JWT each user authenticates with: it needs `[auth.jwt]`",
                    http.oauth
                        .exchange_grant()
                        .map_or("", |grant| grant.as_str())
                ),
            );
        }
    }
    if !auth.configured {
        for upstream in &upstreams {
            if upstream.discovery == super::Discovery::PerUser {
                check.problem(
                    format!("upstreams.{}.discovery", upstream.name),
                    "`per_user` needs users who authenticate ([auth]); without it there is \
                     one user",
                );
            }
        }
    }
    if server.allowed_hosts.is_empty() && (!auth.configured || auth.anonymous) {
        check.problem(
            "server.allowed_hosts",
            "an empty list accepts any Host, which lets any web page reach the endpoint \
             through DNS rebinding; list the names clients use, or have every client \
             authenticate ([auth] without anonymous = true)",
        );
    }

    // The overlay's upstreams, checked the same way, their problems kept apart.
    let file_problems = std::mem::replace(&mut check.problems, overlay.problems);
    for (name, _) in overlay.upstreams.iter() {
        if raw.upstreams.iter().any(|(defined, _)| defined == name) {
            check.problem(
                format!("upstreams.{}", key_segment(name)),
                format!(
                    "is also defined in {}; an upstream added through the admin API needs a \
                     name of its own",
                    path.display()
                ),
            );
        }
    }
    if !admin.allow_commands {
        for (name, upstream) in overlay.upstreams.iter() {
            if let Some(key) = upstream.privileged_key() {
                check.problem(
                    format!("upstreams.{}.{key}", key_segment(name)),
                    "runs a program or reads the gateway's files or environment, which an \
                     upstream added through the admin API may do only with \
                     [admin] allow_commands = true",
                );
            }
        }
    }
    upstreams.extend(check.upstreams(&overlay.upstreams, "upstreams", &defaults));
    let overlay_problems = std::mem::take(&mut check.problems);
    if !file_problems.is_empty() {
        return Err(ConfigError::Invalid {
            path: path.to_owned(),
            problems: file_problems,
        });
    }
    if !overlay_problems.is_empty() {
        return Err(ConfigError::Invalid {
            path: overlay.path,
            problems: overlay_problems,
        });
    }
    Ok(Config {
        source: path.to_owned(),
        server,
        catalog,
        upstreams,
        oauth,
        admin,
        auth,
        limits,
        policy,
        endpoints,
        endpoint_cors,
        store,
        audit,
        telemetry,
        quotas,
        guardrails,
        overlay: OverlayInfo {
            path: overlay.path,
            added: overlay
                .upstreams
                .items
                .into_iter()
                .map(|(n, _)| n)
                .collect(),
            removed: overlay.removed,
            disabled: overlay.disabled,
        },
        disabled,
    })
}
