//! Task handles: the task ids clients see. A handle seals which upstream runs the task, in
//! which upstream session, the upstream's own id for it and whose it is, with the keys the
//! replicas share, so any replica can open it (and ask after the task in the session it lives
//! in) and no one can forge or read one. A handle reads the same each time it is made
//! (a client matches status notifications to the id it got), and opens only for its owner:
//! another user's handle is as unknown as a made-up one.

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};

use crate::{names::UpstreamName, store::Sealer};

/// What sealed handles are bound to, so that nothing else sealed opens as one.
const PURPOSE: &[u8] = b"task handle";

/// A task, as Switchyard knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskHandle {
    pub upstream: UpstreamName,
    /// The upstream session the task lives in (none for a server without sessions).
    pub session: Option<String>,
    /// The id the upstream gave the task.
    pub task: String,
    /// Whose task it is (the principal's id).
    pub owner: String,
}

impl TaskHandle {
    /// The handle's text, for the client.
    pub fn seal(&self, sealer: &Sealer) -> String {
        let plain =
            serde_json::json!([self.upstream.as_str(), self.owner, self.session, self.task])
                .to_string();
        URL_SAFE_NO_PAD.encode(sealer.seal_stable(PURPOSE, plain.as_bytes()))
    }

    /// The task `text` names, if it is a handle Switchyard made for `owner`.
    pub fn open(sealer: &Sealer, text: &str, owner: &str) -> Option<Self> {
        let sealed = URL_SAFE_NO_PAD.decode(text).ok()?;
        let plain = sealer.open(PURPOSE, &sealed)?;
        let (upstream, sealed_owner, session, task): (String, String, Option<String>, String) =
            serde_json::from_slice(&plain).ok()?;
        if sealed_owner != owner {
            return None;
        }
        Some(Self {
            upstream: UpstreamName::new(&upstream).ok()?,
            session,
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
        let handle = TaskHandle {
            upstream: UpstreamName::new("research").unwrap(),
            session: Some("upstream-session".into()),
            task: "4f1c-upstream-id".into(),
            owner: "user:alice".into(),
        };
        let text = handle.seal(&sealer);
        assert_eq!(handle.seal(&sealer), text);
        assert!(!text.contains("4f1c") && !text.contains("alice"), "{text}");
        assert_eq!(TaskHandle::open(&sealer, &text, "user:alice"), Some(handle));
        assert_eq!(TaskHandle::open(&sealer, &text, "user:bob"), None);
        assert_eq!(
            TaskHandle::open(&sealer, "4f1c-upstream-id", "user:alice"),
            None
        );
        let other_replica_keys = Sealer::new(&[[8; 32], [7; 32]]);
        assert!(TaskHandle::open(&other_replica_keys, &text, "user:alice").is_some());
        assert_eq!(
            TaskHandle::open(&Sealer::new(&[[8; 32]]), &text, "user:alice"),
            None
        );
    }
}
