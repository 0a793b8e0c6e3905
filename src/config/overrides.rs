//! Settings given on the command line (`--listen`, `--admin-listen`, `--passthrough-listen`):
//! put in place of the file's before validation, so that the same checks apply to them, and
//! named in the problems they cause.

use std::net::SocketAddr;

use super::{ConfigError, raw};

/// Settings given on the command line. They take the place of the file's before validation,
/// so that they are checked exactly as the file is.
#[derive(Debug, Clone, Copy, Default)]
pub struct Overrides {
    /// `--listen`: `server.listen`.
    pub listen: Option<SocketAddr>,
    /// `--admin-listen`: `admin.listen` (and the admin listener on).
    pub admin_listen: Option<SocketAddr>,
    /// `--passthrough-listen`: `server.passthrough_listen`.
    pub passthrough_listen: Option<SocketAddr>,
}

impl Overrides {
    /// The keys overridden, each with the option that set it.
    fn keys(&self) -> Vec<(&'static str, &'static str)> {
        [
            (self.listen.is_some(), "server.listen", "--listen"),
            (
                self.admin_listen.is_some(),
                "admin.listen",
                "--admin-listen",
            ),
            (
                self.passthrough_listen.is_some(),
                "server.passthrough_listen",
                "--passthrough-listen",
            ),
        ]
        .into_iter()
        .filter_map(|(set, key, option)| set.then_some((key, option)))
        .collect()
    }

    pub(super) fn apply(&self, raw: &mut raw::RawConfig) {
        if let Some(listen) = self.listen {
            raw.server.listen = Some(listen.to_string());
        }
        if let Some(listen) = self.admin_listen {
            raw.admin.enabled = Some(true);
            raw.admin.listen = Some(listen.to_string());
        }
        if let Some(listen) = self.passthrough_listen {
            raw.server.passthrough_listen = Some(listen.to_string());
        }
    }

    /// `error` with every problem that concerns an overridden key saying which option set it.
    pub(super) fn annotate(&self, error: ConfigError) -> ConfigError {
        let ConfigError::Invalid { path, mut problems } = error else {
            return error;
        };
        for problem in &mut problems {
            for (key, option) in self.keys() {
                if problem.key.starts_with(key) || problem.message.contains(key) {
                    problem
                        .message
                        .push_str(&format!(" ({key} is set by {option})"));
                }
            }
        }
        ConfigError::Invalid { path, problems }
    }
}
