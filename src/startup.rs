//! What a person who just started Switchyard in a terminal wants to see: the URL to give their
//! MCP client, where the admin listener is, and each upstream as it becomes ready (its tool
//! count) or fails (why), in a few lines rather than only in the log; and, once, the admin
//! token made at its first start.

use std::{collections::HashMap, io::Write as _, sync::Arc, time::Duration};

use crate::{
    auth::{AdminToken, AdminTokenOrigin},
    config::TransportConfig,
    gateway::Gateway,
    upstream::{
        Upstream, UpstreamState,
        sandbox::{self, Report},
    },
};

/// How often upstream states are looked at, and for how long at most.
const LOOK_EVERY: Duration = Duration::from_millis(200);
const LOOK_FOR: Duration = Duration::from_secs(120);

/// Prints the summary to standard error, then a line per upstream as it settles, until every
/// upstream has (or `LOOK_FOR` has passed).
pub async fn announce(gateway: Arc<Gateway>, mcp_url: String, admin_url: Option<String>) {
    let mut lines = vec![format!(
        "\nSwitchyard serves MCP at {mcp_url}  <- give this URL to your MCP client"
    )];
    if let Some(admin) = admin_url {
        lines.push(format!("  status page and admin API: {admin}"));
    }
    let upstreams = gateway.live().upstreams.clone();
    if upstreams.is_empty() {
        lines.push("  no upstream is configured yet".into());
    } else {
        lines.push(format!("  upstreams ({}):", upstreams.len()));
    }
    print(&lines);
    let mut told: HashMap<String, UpstreamState> = HashMap::new();
    let deadline = tokio::time::Instant::now() + LOOK_FOR;
    loop {
        let mut pending = 0;
        let mut news = Vec::new();
        for upstream in gateway.live().upstreams.clone() {
            let status = upstream.health().status();
            let state = status.state;
            if !settled(state) {
                pending += 1;
                continue;
            }
            if told.get(upstream.name().as_str()) == Some(&state) {
                continue;
            }
            told.insert(upstream.name().to_string(), state);
            let detail = match state {
                UpstreamState::Ready => {
                    let tools = upstream.catalog().map_or(0, |catalog| catalog.tools.len());
                    let plural = if tools == 1 { "" } else { "s" };
                    format!("ready, {tools} tool{plural}{}", sandboxed(&upstream))
                }
                UpstreamState::Authenticating => {
                    "waiting for a user to authorize it (see the status page)".into()
                }
                _ => format!(
                    "failed: {}",
                    status.last_error.as_deref().unwrap_or("no reason given")
                ),
            };
            news.push(format!(
                "    {:<20} {:<16} {detail}",
                upstream.name().as_str(),
                status.transport.unwrap_or("")
            ));
        }
        print(&news);
        if pending == 0 || tokio::time::Instant::now() >= deadline {
            return;
        }
        tokio::time::sleep(LOOK_EVERY).await;
    }
}

/// `, sandboxed`, and what of its sandbox the kernel cannot enforce, for a sandboxed server.
fn sandboxed(upstream: &Upstream) -> String {
    let TransportConfig::Stdio(stdio) = &upstream.config().transport else {
        return String::new();
    };
    let Some(sandbox) = &stdio.sandbox else {
        return String::new();
    };
    let report = Report::of(sandbox, sandbox::kernel());
    if report.missing.is_empty() {
        ", sandboxed".into()
    } else {
        format!(", sandboxed without: {}", report.missing.join(", "))
    }
}

fn settled(state: UpstreamState) -> bool {
    matches!(
        state,
        UpstreamState::Ready | UpstreamState::Failed | UpstreamState::Authenticating
    )
}

fn print(lines: &[String]) {
    if lines.is_empty() {
        return;
    }
    let mut err = std::io::stderr().lock();
    for line in lines {
        let _ = writeln!(err, "{line}");
    }
}

/// Tells the operator the admin token made at this first start, once: where it is kept, and
/// the status page's address with it. A token configured or kept from before is not shown.
pub fn tell_admin_token(
    origin: &AdminTokenOrigin,
    token: &AdminToken,
    address: std::net::SocketAddr,
) {
    match origin {
        AdminTokenOrigin::Made(path) => eprintln!(
            "\nswitchyard: made the admin token (kept in {}, readable only by you):\n  {}\n\
             Open the status page at http://{address}/#token={} ; send it as \
             `Authorization: Bearer TOKEN` to the admin API.\n",
            path.display(),
            token.reveal(),
            token.reveal(),
        ),
        AdminTokenOrigin::Kept(path) => {
            tracing::info!(file = %path.display(), "the admin API wants the token kept in this file")
        }
        AdminTokenOrigin::Configured => {}
    }
}
