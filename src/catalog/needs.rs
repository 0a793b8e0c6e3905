//! What a tool needs of the client: some upstreams list a tool only to clients that declared a
//! capability it uses (sampling, elicitation, roots, tasks, MCP Apps). Switchyard discovers
//! with every capability it can relay, so it learns which tools depend on one by listing them
//! again without it (see `upstream::needs`), and shows each client only the tools it would be
//! offered directly.

use std::fmt;

use rmcp::model::ClientCapabilities;

use super::apps::UI_EXTENSION;

/// A set of client features, as bits.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Features(u8);

impl Features {
    pub const NONE: Self = Self(0);
    pub const SAMPLING: Self = Self(1);
    /// Elicitation, in any mode (servers offer such tools to a client that declares it).
    pub const ELICITATION: Self = Self(2);
    /// Elicitation in URL mode.
    pub const URL_ELICITATION: Self = Self(4);
    pub const ROOTS: Self = Self(8);
    /// Running sampling and elicitation requests as tasks when asked.
    pub const TASKS: Self = Self(16);
    /// Rendering MCP Apps.
    pub const APPS: Self = Self(32);
    /// Every feature Switchyard relays: what its own connections declare.
    pub const ALL: Self = Self(63);

    /// Each feature alone.
    pub const EACH: [Self; 6] = [
        Self::SAMPLING,
        Self::ELICITATION,
        Self::URL_ELICITATION,
        Self::ROOTS,
        Self::TASKS,
        Self::APPS,
    ];

    const NAMES: [&str; 6] = [
        "sampling",
        "elicitation",
        "url elicitation",
        "roots",
        "tasks",
        "apps",
    ];

    /// What a client declared in `capabilities`, and whether it runs tasks when asked.
    #[allow(deprecated)] // sampling and roots: legacy, still relayed
    pub fn declared(capabilities: &ClientCapabilities, runs_tasks: bool) -> Self {
        let mut features = Self::NONE;
        let mut add = |present: bool, feature: Self| {
            if present {
                features = features.with(feature);
            }
        };
        add(capabilities.sampling.is_some(), Self::SAMPLING);
        if let Some(elicitation) = &capabilities.elicitation {
            add(true, Self::ELICITATION);
            add(elicitation.url.is_some(), Self::URL_ELICITATION);
        }
        add(capabilities.roots.is_some(), Self::ROOTS);
        add(runs_tasks, Self::TASKS);
        let apps = capabilities.extensions.as_ref();
        add(
            apps.is_some_and(|extensions| extensions.contains_key(UI_EXTENSION)),
            Self::APPS,
        );
        features
    }

    pub fn with(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }

    /// These, but for those of `other`.
    pub fn without(self, other: Self) -> Self {
        Self(self.0 & !other.0)
    }

    pub fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }

    pub fn meets(self, other: Self) -> bool {
        self.0 & other.0 != 0
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
}

impl fmt::Debug for Features {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// The features by name, `+` between them (`none` for none).
impl fmt::Display for Features {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("none");
        }
        let names = Self::EACH
            .iter()
            .zip(Self::NAMES)
            .filter(|(feature, _)| self.contains(**feature))
            .map(|(_, name)| name);
        for (at, name) in names.enumerate() {
            if at > 0 {
                f.write_str("+")?;
            }
            f.write_str(name)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::{ElicitationCapability, UrlElicitationCapability};

    use super::*;

    #[test]
    #[allow(deprecated)] // sampling and roots: legacy, still relayed
    fn a_client_declares_what_its_capabilities_say() {
        let bare = ClientCapabilities::default();
        assert_eq!(Features::declared(&bare, false), Features::NONE);
        let mut capable = ClientCapabilities::builder()
            .enable_sampling()
            .enable_roots()
            .build();
        capable.elicitation = Some(ElicitationCapability::new());
        assert_eq!(
            Features::declared(&capable, true).to_string(),
            "sampling+elicitation+roots+tasks"
        );
        capable.elicitation =
            Some(ElicitationCapability::new().with_url(UrlElicitationCapability::default()));
        let url_only = Features::declared(&capable, false);
        assert!(url_only.contains(Features::URL_ELICITATION.with(Features::ELICITATION)));
        assert!(Features::ALL.contains(url_only));
        assert!(!url_only.meets(Features::TASKS.with(Features::APPS)));
    }
}
