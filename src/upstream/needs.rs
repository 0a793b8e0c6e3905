//! Which of an upstream's tools depend on a client feature. Some servers list a tool only to
//! clients that declared a capability it uses (sampling, elicitation, roots, tasks, MCP Apps),
//! and Switchyard discovers with every one it relays. So, after the upstream is connected,
//! its tools are listed once more on a connection declaring none: if every tool is still
//! there (most servers), nothing depends on the client. Otherwise each feature is left out in
//! turn, and a tool missing without it needs it. The catalog then shows each client only the
//! tools it would be offered directly (`catalog::Features`).
//!
//! It runs on the first discovery, before the upstream's tools are served, and again when a
//! discovery lists a tool it has not probed (the server registered it later); reconnections
//! and other list changes keep what was learnt. Two probes must agree, since a listing taken
//! before the server registered its tools misleads one. A probe that fails is tried again a
//! second later, then at each discovery until one succeeds.

use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
};

use super::{Connection, Upstream, UpstreamError, connection::Era};
use crate::catalog::{Features, UpstreamCatalog};

/// How long apart a probe's listings are taken while they settle.
const SETTLE: std::time::Duration = std::time::Duration::from_millis(150);

/// How long after a failed probe it is tried again.
const PROBE_RETRY: std::time::Duration = std::time::Duration::from_secs(1);

/// What each tool that depends on a client feature needs, by the tool's own name.
pub type Needs = HashMap<String, Features>;

/// What was found out, and of which tools.
pub struct Probed {
    needs: Arc<Needs>,
    names: HashSet<String>,
}

impl Upstream {
    /// What the tools of `listed` (just listed on a connection of `era`) need of clients:
    /// found out on the first discovery (unless `probe_client_features` is off), and kept
    /// across reconnections and list changes until a tool not probed yet is listed.
    pub(super) async fn needs_of(&self, era: Era, listed: &UpstreamCatalog) -> Arc<Needs> {
        let known = self.lists.needs.load_full();
        let probed =
            |known: &Probed| (listed.tools.iter()).all(|tool| known.names.contains(&*tool.name));
        if let Some(known) = known.as_deref().filter(|known| probed(known)) {
            return known.needs.clone();
        }
        let names: HashSet<String> = (listed.tools.iter())
            .map(|tool| tool.name.to_string())
            .collect();
        if !self.config.probe_client_features {
            let none = Arc::new(Needs::new());
            self.lists.needs.store(Some(Arc::new(Probed {
                needs: none.clone(),
                names,
            })));
            return none;
        }
        let all: HashSet<&str> = names.iter().map(String::as_str).collect();
        // A probe opens several connections at once; one failing to open on a busy machine
        // is tried again a moment later, before anything is served.
        let mut failed = None;
        for pause in [None, Some(PROBE_RETRY)] {
            if let Some(pause) = pause {
                tokio::time::sleep(pause).await;
            }
            match self.agreed(era, &all).await {
                Ok(needs) => {
                    for (tool, needed) in &needs {
                        tracing::info!(upstream = %self.name(), %tool, needs = %needed, "a tool is listed only to clients that declare what it needs");
                    }
                    let needs = Arc::new(needs);
                    let probed = Probed {
                        needs: needs.clone(),
                        names,
                    };
                    self.lists.needs.store(Some(Arc::new(probed)));
                    return needs;
                }
                Err(error) => failed = Some(error),
            }
        }
        if let Some(error) = failed {
            tracing::warn!(upstream = %self.name(), %error, "cannot tell which tools the server lists only to clients that declare a capability; every client is listed every tool until the next discovery tries again");
        }
        // What was known of the tools probed before still holds.
        known.map_or_else(|| Arc::new(Needs::new()), |known| known.needs.clone())
    }

    /// What the tools of `all` need, as two probes agree (a third decides where they do not).
    /// A listing taken before the server registered the tools it offers for a client's
    /// capabilities misleads a probe; two alike, hardly ever.
    async fn agreed(&self, era: Era, all: &HashSet<&str>) -> Result<Needs, UpstreamError> {
        let Some(first) = self.probe(era, all).await? else {
            return Ok(Needs::new());
        };
        let second = self.probe(era, all).await?.unwrap_or_default();
        if first == second {
            return Ok(first);
        }
        let third = self.probe(era, all).await?.unwrap_or_default();
        if third == first || third == second {
            return Ok(third);
        }
        Err(UpstreamError::Discovery {
            what: "what tools need of clients",
            reason: "three probes found three different answers".into(),
        })
    }

    /// What the tools of `all` need, or `None` if every one is listed to a client that
    /// declares nothing (most servers: nothing more to find out).
    async fn probe(&self, era: Era, all: &HashSet<&str>) -> Result<Option<Needs>, UpstreamError> {
        let bare = self.tools_declaring(era, Features::NONE, false).await?;
        let dependent: Vec<&str> = all
            .iter()
            .copied()
            .filter(|tool| !bare.contains(*tool))
            .collect();
        let mut needs = Needs::new();
        if dependent.is_empty() {
            return Ok(None);
        }
        // One listing without each feature, side by side.
        let without = futures::future::try_join_all(
            (Features::EACH.into_iter())
                .map(|feature| self.tools_declaring(era, Features::ALL.without(feature), true)),
        )
        .await?;
        for (feature, listed) in Features::EACH.into_iter().zip(&without) {
            for tool in &dependent {
                if !listed.contains(*tool) {
                    let needed = needs.entry((*tool).to_owned()).or_default();
                    *needed = needed.with(feature);
                }
            }
        }
        // A real tool needs one feature, or two (elicitation run as a task); one that seemed
        // to need more was missed by listings for another reason: it is shown to everyone.
        needs.retain(|tool, needed| {
            let plausible = Features::EACH.iter().filter(|f| needed.contains(**f)).count() <= 2;
            if !plausible {
                tracing::debug!(upstream = %self.name(), %tool, needs = %needed, "what a tool needs is unclear; it is listed to every client");
            }
            plausible
        });
        Ok(Some(needs))
    }

    /// The names of the tools listed to a client declaring `features`; `settled`: once they
    /// stop changing (see `listing`). The listing without any feature is taken at once:
    /// a tool it misses for being early is found in every other listing, and needs nothing.
    async fn tools_declaring(
        &self,
        era: Era,
        features: Features,
        settled: bool,
    ) -> Result<HashSet<String>, UpstreamError> {
        let connection = self.open_probe(era, features).await?;
        let listed = tokio::time::timeout(
            self.config.policy.discovery_timeout,
            listing(&connection, if settled { 4 } else { 1 }),
        )
        .await;
        connection.close(std::time::Duration::from_secs(2)).await;
        listed.map_err(|_| UpstreamError::DiscoveryTimeout {
            what: "tools",
            timeout: self.config.policy.discovery_timeout,
        })?
    }
}

/// The names of the tools `connection` lists, once they stop changing: a server may register
/// some as it learns the client's capabilities, just after the handshake. Listed until two
/// listings a moment apart agree, at most `times` times.
async fn listing(connection: &Connection, times: usize) -> Result<HashSet<String>, UpstreamError> {
    let list = || async {
        let tools = (connection.peer().list_all_tools().await).map_err(|error| {
            UpstreamError::Discovery {
                what: "tools",
                reason: error.to_string(),
            }
        })?;
        Ok::<HashSet<String>, UpstreamError>(
            tools
                .into_iter()
                .map(|tool| tool.name.into_owned())
                .collect(),
        )
    };
    let mut listed = list().await?;
    for _ in 1..times {
        tokio::time::sleep(SETTLE).await;
        let again = list().await?;
        if again == listed {
            break;
        }
        listed = again;
    }
    Ok(listed)
}
