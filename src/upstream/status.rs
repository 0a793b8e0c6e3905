//! Where an upstream is in its life, for the health endpoint, logs, metrics and the operators'
//! event stream (each change of state, error, retries or authorization link is told there).

use std::{sync::Arc, time::SystemTime};

use serde::Serialize;

use super::Upstream;

/// The phases an upstream goes through; `Ready` is the only one that serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UpstreamState {
    Connecting,
    /// The handshake is done; discovery has not started.
    Connected,
    Discovering,
    Ready,
    /// Waiting for a user to authorize Switchyard at the upstream's authorization server.
    Authenticating,
    Failed,
}

impl UpstreamState {
    pub fn as_str(self) -> &'static str {
        match self {
            UpstreamState::Connecting => "connecting",
            UpstreamState::Connected => "connected",
            UpstreamState::Discovering => "discovering",
            UpstreamState::Ready => "ready",
            UpstreamState::Authenticating => "authenticating",
            UpstreamState::Failed => "failed",
        }
    }
}

/// A snapshot of an upstream's state; replaced whole on every change.
#[derive(Debug, Clone, Serialize)]
pub struct UpstreamStatus {
    pub state: UpstreamState,
    /// When the upstream entered this state.
    #[serde(serialize_with = "unix_seconds")]
    pub since: SystemTime,
    /// What went wrong last, escaped for display, kept after recovery so operators can see it.
    pub last_error: Option<String>,
    /// Failed attempts since the upstream was last ready.
    pub retries: u32,
    /// The transport in use once known: `stdio`, `streamable_http` or `sse`.
    pub transport: Option<&'static str>,
    /// The protocol version agreed on the shared session.
    pub protocol_version: Option<String>,
    /// While `authenticating`: where a user authorizes Switchyard. Never serialized: only
    /// the admin API shows it, to the operator.
    #[serde(skip)]
    pub authorization_url: Option<String>,
}

impl UpstreamStatus {
    pub fn new(state: UpstreamState) -> Self {
        Self {
            state,
            since: SystemTime::now(),
            last_error: None,
            retries: 0,
            transport: None,
            protocol_version: None,
            authorization_url: None,
        }
    }

    /// This status moved to `state`, keeping the rest (but an authorization URL, which only
    /// `authenticating` shows).
    pub fn moved_to(&self, state: UpstreamState) -> Self {
        Self {
            state,
            since: SystemTime::now(),
            authorization_url: None,
            ..self.clone()
        }
    }

    /// This status waiting for a user to authorize at `url`.
    pub fn authenticating(&self, url: String) -> Self {
        Self {
            authorization_url: Some(url),
            ..self.moved_to(UpstreamState::Authenticating)
        }
    }

    /// This status failed with `error` after `retries` consecutive failures.
    pub fn failed(&self, error: &str, retries: u32) -> Self {
        Self {
            last_error: Some(escape_for_display(error)),
            retries,
            ..self.moved_to(UpstreamState::Failed)
        }
    }
}

/// The longest error text kept.
const MAX_ERROR_LEN: usize = 1000;

/// An error text as it may be shown anywhere: control characters escaped, at most
/// `MAX_ERROR_LEN` characters. (It may come from an upstream and contain anything.)
pub fn escape_for_display(text: &str) -> String {
    match text.char_indices().nth(MAX_ERROR_LEN) {
        Some((cut, _)) => format!("{}…", crate::text::printable(&text[..cut])),
        None => crate::text::printable(text).into_owned(),
    }
}

fn unix_seconds<S: serde::Serializer>(time: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(crate::clock::unix_seconds(*time))
}

impl Upstream {
    /// Replaces the status; a new state, error, count of retries or authorization link is
    /// told to operators.
    pub(super) fn set_status(&self, status: UpstreamStatus) {
        let status = Arc::new(status);
        if self.health().replace_status(status.clone()) {
            self.tell_status(&status);
        }
    }

    /// Tells operators the upstream's state is `status`.
    pub(super) fn tell_status(&self, status: &UpstreamStatus) {
        #[derive(serde::Serialize)]
        struct Changed<'a> {
            name: &'a str,
            #[serde(flatten)]
            status: &'a UpstreamStatus,
        }
        let changed = Changed {
            name: self.name().as_str(),
            status,
        };
        self.operators.publish("upstream", &changed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_escaped_and_bounded() {
        assert_eq!(
            escape_for_display("bad\nthing\u{1b}[31m"),
            "bad\\nthing\\u{1b}[31m"
        );
        let long = "x".repeat(5000);
        let shown = escape_for_display(&long);
        assert_eq!(shown.chars().count(), MAX_ERROR_LEN + 1);
        assert!(shown.ends_with('…'));
        assert_eq!(escape_for_display("naïve <b>ok</b>"), "naïve <b>ok</b>");
    }
}
