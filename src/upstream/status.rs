//! Where an upstream is in its life, for the health endpoint, logs and (later) metrics.

use std::time::SystemTime;

use serde::Serialize;

/// The phases an upstream goes through; `Ready` is the only one that serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UpstreamState {
    Connecting,
    Discovering,
    Ready,
    Failed,
}

/// A snapshot of an upstream's state; replaced whole on every change.
#[derive(Debug, Clone, Serialize)]
pub struct UpstreamStatus {
    pub state: UpstreamState,
    /// When the upstream entered this state.
    #[serde(serialize_with = "unix_seconds")]
    pub since: SystemTime,
    /// What went wrong last, kept after recovery so operators can see it.
    pub last_error: Option<String>,
    /// Failed attempts since the upstream was last ready.
    pub retries: u32,
}

impl UpstreamStatus {
    pub fn new(state: UpstreamState) -> Self {
        Self {
            state,
            since: SystemTime::now(),
            last_error: None,
            retries: 0,
        }
    }

    /// This status moved to `state`, keeping the error history.
    pub fn moved_to(&self, state: UpstreamState) -> Self {
        Self {
            state,
            since: SystemTime::now(),
            last_error: self.last_error.clone(),
            retries: self.retries,
        }
    }
}

fn unix_seconds<S: serde::Serializer>(time: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
    let secs = time
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    s.serialize_u64(secs)
}
