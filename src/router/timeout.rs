//! The timeouts of one forwarded request. A request must be answered within its timeout
//! (`default_tool_timeout_seconds`, or the tool's own in `tool_timeout_seconds`); each progress
//! notification the upstream sends starts that wait again, but never past
//! `max_tool_timeout_seconds` from the start. One timer serves both.

use std::{pin::Pin, time::Duration};

use tokio::time::{Instant, Sleep};

use crate::{error::GatewayError, upstream::Upstream};

/// How far a request had got when its time ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Waiting for a place under `max_concurrent_requests`.
    Queued,
    /// Waiting for the client's own upstream session to open.
    Connecting,
    /// Sent; the upstream was told to cancel it.
    Sent,
}

pub struct Timer<'a> {
    tool: Option<&'a str>,
    /// The wait for an answer (or the next progress), and the setting it comes from.
    timeout: Duration,
    tool_specific: bool,
    max: Duration,
    started: Instant,
    progressed: bool,
    /// It times the wait for a task's result.
    for_task: bool,
    sleep: Pin<Box<Sleep>>,
}

impl<'a> Timer<'a> {
    /// Starts timing a request to `upstream` (a call of `tool`, if it is one).
    pub fn start(upstream: &Upstream, tool: Option<&'a str>) -> Self {
        let policy = &upstream.config().policy;
        let specific = tool.and_then(|tool| policy.tool_timeouts.get(tool));
        let timeout = specific.copied().unwrap_or(policy.tool_timeout);
        let max = policy.max_tool_timeout.max(timeout);
        let started = Instant::now();
        Self {
            tool,
            timeout,
            tool_specific: specific.is_some(),
            max,
            started,
            progressed: false,
            for_task: false,
            sleep: Box::pin(tokio::time::sleep_until(started + timeout)),
        }
    }

    /// Times waiting for a task's result: tasks are long by nature, so the wait is bounded by
    /// the upstream's longest tool time (`max_tool_timeout`), not by its tool timeout.
    pub fn for_task(upstream: &Upstream) -> Self {
        let max = upstream.config().policy.max_tool_timeout;
        let started = Instant::now();
        Self {
            tool: None,
            timeout: max,
            tool_specific: false,
            max,
            started,
            progressed: false,
            for_task: true,
            sleep: Box::pin(tokio::time::sleep_until(started + max)),
        }
    }

    /// The upstream reported progress: the wait starts again, within the overall limit.
    pub fn progressed(&mut self) {
        self.progressed = true;
        let deadline = (Instant::now() + self.timeout).min(self.started + self.max);
        self.sleep.as_mut().reset(deadline);
    }

    /// Resolves when the time is up.
    pub async fn expired(&mut self) {
        self.sleep.as_mut().await;
    }

    /// The error for a request whose time ran out at `stage`.
    pub fn error(&self, upstream: &Upstream, stage: Stage) -> GatewayError {
        let what = match self.tool {
            Some(tool) => format!("tool `{tool}`"),
            None if self.for_task => "the task's result".to_owned(),
            None => "the request".to_owned(),
        };
        let setting = if self.for_task {
            "max_tool_timeout_seconds".to_owned()
        } else if self.tool_specific {
            format!("tool_timeout_seconds.{}", self.tool.unwrap_or_default())
        } else {
            "default_tool_timeout_seconds".to_owned()
        };
        let seconds = |d: Duration| d.as_secs_f64();
        let at_max = Instant::now() >= self.started + self.max;
        let (detail, timeout) = match stage {
            Stage::Queued => (
                format!(
                    "had no free place for {what} within {}s ({setting}; all of \
                     max_concurrent_requests were in use)",
                    seconds(self.timeout)
                ),
                self.timeout,
            ),
            Stage::Connecting => (
                format!(
                    "could not open a session for {what} within {}s ({setting})",
                    seconds(self.timeout)
                ),
                self.timeout,
            ),
            Stage::Sent if at_max && self.progressed => (
                format!(
                    "did not finish {what} within {}s (max_tool_timeout_seconds), though it \
                     reported progress; it was cancelled upstream",
                    seconds(self.max)
                ),
                self.max,
            ),
            Stage::Sent if self.progressed => (
                format!(
                    "reported no progress on {what} for {}s ({setting}); it was cancelled \
                     upstream",
                    seconds(self.timeout)
                ),
                self.timeout,
            ),
            Stage::Sent => (
                format!(
                    "did not answer {what} within {}s ({setting}); it was cancelled upstream",
                    seconds(self.timeout)
                ),
                self.timeout,
            ),
        };
        GatewayError::TimedOut {
            upstream: upstream.name().clone(),
            detail,
            timeout,
        }
    }
}
