//! The client side of a request, as the layers below the front see it: where messages for the
//! client go (`Outlet`), how to ask it something and get the answer (`Asks`), what it can do,
//! and which log messages it wants.
//!
//! The front creates these for each request and each session; the router and the upstream
//! relay use them to pass on what an upstream sends back while it serves a request.

// Logging is deprecated by SEP-2577 but still relayed on the legacy protocol.
#![allow(deprecated)]

mod asks;
mod bridge;
mod outlet;
mod pipe;
mod shared_stream;
mod tasks;

use std::sync::{
    Arc,
    atomic::{AtomicU8, Ordering},
};

use rmcp::model::{ClientCapabilities, LoggingLevel, ProgressToken};

pub use asks::{Asks, ask_client, ask_client_raw, cannot_forward, check_capability, kind};
pub use bridge::{Bridge, CLIENT_REQUESTS, Question};
pub use outlet::{Attached, Outlet, Standalone};
pub use tasks::{Report, Reports, STATUS as TASK_STATUS, TaskRequest, TaskSupport};

/// The stream a message was meant for is not open (any more).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the client has no open stream to send this on")]
pub struct Closed;
pub use pipe::{PipeReceiver, PipeSender, pipe};
pub use shared_stream::SharedStream;

use crate::{
    policy::{EndpointName, Viewer},
    principal::Principal,
};

/// The downstream side of one forwarded request, or of a whole session.
pub struct Downstream {
    /// Where messages for the client go: the request's own response stream, or (for what a
    /// session's upstreams send outside any request) the session's standalone stream.
    pub outlet: Outlet,
    /// Where the client's answers to requests sent to it arrive; `None` for a 2026-07-28
    /// request, whose client cannot be sent requests while it waits.
    pub asks: Option<Arc<Asks>>,
    /// For a 2026-07-28 request: where the questions of an upstream of an earlier era go, to
    /// be asked with `input_required` (`None` where they cannot be).
    pub bridge: Option<Bridge>,
    /// The token the client asked progress for, if it did.
    pub progress_token: Option<ProgressToken>,
    /// What the client declared it can answer.
    pub capabilities: Arc<ClientCapabilities>,
    /// Whose upstream tokens the request uses.
    pub principal: Principal,
    /// The endpoint the client came to (what it may see depends on it).
    pub endpoint: EndpointName,
    /// The least severe log messages the client wants.
    pub log_level: LogLevel,
}

impl Downstream {
    /// A 2026-07-28 request: the client cannot be sent requests while it waits.
    pub fn is_stateless(&self) -> bool {
        self.asks.is_none()
    }

    /// Whom the catalog is shown to.
    pub fn viewer(&self) -> Viewer<'_> {
        Viewer {
            endpoint: &self.endpoint,
            principal: &self.principal,
        }
    }

    /// Whether this client wants a log message of `level`.
    pub fn wants_log(&self, level: LoggingLevel) -> bool {
        self.log_level.wants(level, self.is_stateless())
    }
}

/// The log level a client asked for: set for its whole session by `logging/setLevel`, or per
/// request in `_meta` (2026-07-28). Upstream log messages below it are not passed on.
#[derive(Clone, Default)]
pub enum LogLevel {
    /// Never asked: a session client gets everything, a 2026-07-28 request nothing.
    #[default]
    Unset,
    Session(Arc<SessionLogLevel>),
    Request(LoggingLevel),
}

impl LogLevel {
    /// Whether a client with this level wants a message of `level`.
    pub fn wants(&self, level: LoggingLevel, stateless: bool) -> bool {
        let least = match self {
            LogLevel::Unset => return !stateless,
            LogLevel::Session(session) => match session.get() {
                Some(least) => least,
                None => return true,
            },
            LogLevel::Request(least) => *least,
        };
        level as u8 >= least as u8
    }
}

/// A session's log level, changed by `logging/setLevel` while its requests are in flight.
pub struct SessionLogLevel(AtomicU8);

impl Default for SessionLogLevel {
    fn default() -> Self {
        Self::new()
    }
}

impl SessionLogLevel {
    /// No level set yet.
    const UNSET: u8 = u8::MAX;

    pub fn new() -> Self {
        Self(AtomicU8::new(Self::UNSET))
    }

    pub fn set(&self, level: LoggingLevel) {
        self.0.store(level as u8, Ordering::Relaxed);
    }

    pub fn get(&self) -> Option<LoggingLevel> {
        let severity = self.0.load(Ordering::Relaxed);
        LEVELS.get(usize::from(severity)).copied()
    }
}

/// Every level, least severe first (the order of their discriminants).
const LEVELS: [LoggingLevel; 8] = [
    LoggingLevel::Debug,
    LoggingLevel::Info,
    LoggingLevel::Notice,
    LoggingLevel::Warning,
    LoggingLevel::Error,
    LoggingLevel::Critical,
    LoggingLevel::Alert,
    LoggingLevel::Emergency,
];
