//! Task handles: the task ids clients see. A handle seals which upstream runs the task, where
//! the upstream's id for it is unique (`TaskScope`), that id, and whose task it is, with the keys
//! the replicas share, so any replica can open it and no one can forge or read one. A handle
//! reads the same each time it is made (a client matches status notifications to the id it
//! got), and opens only for its owner: another user's handle is as unknown as a made-up one.
//!
//! Upstreams reuse task ids (a server that numbers its tasks from 1 at each start), so a handle
//! also names the run its task belongs to: the upstream session, or the connection for a
//! transport without sessions (a stdio process). An old handle then leads to no new task.

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};

use crate::{names::UpstreamName, store::Sealer, upstream::Connection};

/// What sealed handles are bound to, so that nothing else sealed opens as one.
const PURPOSE: &[u8] = b"task handle v2";

/// Where an upstream's task id is unique.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskScope {
    /// In the upstream session of this id: a restarted server has new sessions.
    Session(String),
    /// On the connection of this run (a stdio process, a legacy event stream): replaced when
    /// the upstream restarts.
    Run(String),
    /// Everywhere on the upstream (streamable HTTP without sessions): a restart is invisible,
    /// and who created an id last is what the store keeps (`Store::task_owner`).
    Server,
}

impl TaskScope {
    /// The scope of the tasks created through `connection`.
    pub fn of(connection: &Connection) -> Self {
        match connection.session().id() {
            Some(session) => Self::Session(session),
            None if connection.transport() == "streamable_http" => Self::Server,
            None => Self::Run(connection.run().to_owned()),
        }
    }

    /// The upstream session the task's requests must go in, if it lives in one.
    pub fn session(&self) -> Option<&str> {
        match self {
            Self::Session(session) => Some(session),
            _ => None,
        }
    }

    /// The run of the connection the task's requests must go on, if it is bound to one.
    pub fn run(&self) -> Option<&str> {
        match self {
            Self::Run(run) => Some(run),
            _ => None,
        }
    }

    fn sealed(&self) -> (&'static str, Option<&str>) {
        match self {
            Self::Session(session) => ("session", Some(session)),
            Self::Run(run) => ("run", Some(run)),
            Self::Server => ("server", None),
        }
    }

    fn opened(kind: &str, value: Option<String>) -> Option<Self> {
        match (kind, value) {
            ("session", Some(session)) => Some(Self::Session(session)),
            ("run", Some(run)) => Some(Self::Run(run)),
            ("server", None) => Some(Self::Server),
            _ => None,
        }
    }
}

/// A task, as Switchyard knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskHandle {
    pub upstream: UpstreamName,
    pub scope: TaskScope,
    /// The id the upstream gave the task.
    pub task: String,
    /// Whose task it is (the principal's id).
    pub owner: String,
}

impl TaskHandle {
    /// The handle's text, for the client.
    pub fn seal(&self, sealer: &Sealer) -> String {
        let (kind, value) = self.scope.sealed();
        let plain = serde_json::json!([self.upstream.as_str(), self.owner, kind, value, self.task])
            .to_string();
        URL_SAFE_NO_PAD.encode(sealer.seal_stable(PURPOSE, plain.as_bytes()))
    }

    /// The task `text` names, if it is a handle Switchyard made for `owner`.
    pub fn open(sealer: &Sealer, text: &str, owner: &str) -> Option<Self> {
        let sealed = URL_SAFE_NO_PAD.decode(text).ok()?;
        let plain = sealer.open(PURPOSE, &sealed)?;
        type Fields = (String, String, String, Option<String>, String);
        let (upstream, sealed_owner, kind, value, task): Fields =
            serde_json::from_slice(&plain).ok()?;
        if sealed_owner != owner {
            return None;
        }
        Some(Self {
            upstream: UpstreamName::new(&upstream).ok()?,
            scope: TaskScope::opened(&kind, value)?,
            task,
            owner: sealed_owner,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handle_opens_for_its_owner_only_and_reads_the_same_each_time() {
        let sealer = Sealer::new(&[[7; 32]]);
        for scope in [
            TaskScope::Session("upstream-session".into()),
            TaskScope::Run("run-1".into()),
            TaskScope::Server,
        ] {
            let handle = TaskHandle {
                upstream: UpstreamName::new("research").unwrap(),
                scope,
                task: "4f1c-upstream-id".into(),
                owner: "user:alice".into(),
            };
            let text = handle.seal(&sealer);
            assert_eq!(handle.seal(&sealer), text);
            assert!(!text.contains("4f1c") && !text.contains("alice"), "{text}");
            assert_eq!(TaskHandle::open(&sealer, &text, "user:alice"), Some(handle));
            assert_eq!(TaskHandle::open(&sealer, &text, "user:bob"), None);
            let other_replica_keys = Sealer::new(&[[8; 32], [7; 32]]);
            assert!(TaskHandle::open(&other_replica_keys, &text, "user:alice").is_some());
            assert_eq!(
                TaskHandle::open(&Sealer::new(&[[8; 32]]), &text, "user:alice"),
                None
            );
        }
        assert_eq!(
            TaskHandle::open(&sealer, "4f1c-upstream-id", "user:alice"),
            None
        );
    }

    #[test]
    fn handles_of_two_runs_of_one_task_id_differ() {
        let sealer = Sealer::new(&[[7; 32]]);
        let handle = |run: &str| TaskHandle {
            upstream: UpstreamName::new("jobs").unwrap(),
            scope: TaskScope::Run(run.into()),
            task: "t-1".into(),
            owner: "user:alice".into(),
        };
        assert_ne!(handle("a").seal(&sealer), handle("b").seal(&sealer));
    }
}
