//! Calls that wait for an operator's approval: the queue operators see (admin API, status
//! page, operator's MCP tools, `/api/events`) and decide on. A call is put in with what
//! whoever decides may see of it (its arguments masked as its rule says, and their SHA-256),
//! and waits for the one decision made on its own entry: an entry is taken out by the first
//! decision, by its call's timeout, or by its call going away, so that a decision is never
//! used twice, nor for another call. The queue is this process's (a replica's own calls).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use serde::Serialize;
use serde_json::Value;
use tokio::sync::oneshot;

use crate::events::Events;

/// A call waiting in the queue, as operators see it.
#[derive(Debug, Clone, Serialize)]
pub struct Pending {
    /// The entry's own id (random): what a decision names.
    pub id: String,
    /// Whose call it is.
    pub principal: String,
    pub upstream: String,
    /// The upstream's own name for the tool.
    pub tool: String,
    /// The `[[policy]]` rule that wants the approval.
    pub rule: String,
    /// The arguments, masked as the rule says.
    pub arguments: Value,
    /// The SHA-256 (hex) of the arguments as the client sent them.
    pub arguments_sha256: String,
    /// Seconds since the epoch.
    pub requested_at: u64,
    /// When the call is refused for want of a decision, in seconds since the epoch.
    pub expires_at: u64,
}

/// What was decided, and by whom.
#[derive(Debug, Clone)]
pub struct Decision {
    pub allowed: bool,
    /// Who decided, for the audit log (`operator`, or the name an operator gave).
    pub by: String,
    pub reason: Option<String>,
}

/// Why a decision was not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("no call waits under this id (it was decided, it expired, or its client left)")]
    Unknown,
    #[error("the call waiting under this id has other arguments than the ones decided on")]
    OtherArguments,
}

struct Waiting {
    pending: Pending,
    decision: oneshot::Sender<Decision>,
}

/// The queue of calls waiting for an operator.
pub struct Approvals {
    waiting: Mutex<HashMap<String, Waiting>>,
    events: Arc<Events>,
}

impl Approvals {
    pub fn new(events: Arc<Events>) -> Arc<Self> {
        Arc::new(Self {
            waiting: Mutex::default(),
            events,
        })
    }

    /// Puts `pending` (its `id` made here) in the queue and announces it: the ticket that
    /// takes it out when dropped, and the decision to wait for.
    pub fn enqueue(
        self: &Arc<Self>,
        mut pending: Pending,
    ) -> (Ticket, oneshot::Receiver<Decision>) {
        pending.id = uuid::Uuid::new_v4().simple().to_string();
        let (decision, decided) = oneshot::channel();
        let id = pending.id.clone();
        self.events.publish("approval_requested", &pending);
        self.lock()
            .insert(id.clone(), Waiting { pending, decision });
        let ticket = Ticket {
            approvals: self.clone(),
            id,
        };
        (ticket, decided)
    }

    /// Every call waiting, oldest first.
    pub fn list(&self) -> Vec<Pending> {
        let mut pending: Vec<Pending> = (self.lock().values())
            .map(|waiting| waiting.pending.clone())
            .collect();
        pending.sort_by(|a, b| (a.requested_at, &a.id).cmp(&(b.requested_at, &b.id)));
        pending
    }

    /// Decides on the call waiting under `id` (whose arguments must have the digest
    /// `arguments_sha256`, where the decision names one): the call goes on or is refused at
    /// once, and its entry is gone.
    pub fn decide(
        &self,
        id: &str,
        arguments_sha256: Option<&str>,
        decision: Decision,
    ) -> Result<Pending, Refused> {
        let waiting = {
            let mut waiting = self.lock();
            let entry = waiting.get(id).ok_or(Refused::Unknown)?;
            if arguments_sha256.is_some_and(|digest| digest != entry.pending.arguments_sha256) {
                return Err(Refused::OtherArguments);
            }
            waiting.remove(id).expect("looked up under the lock")
        };
        self.events.publish(
            "approval_decided",
            &serde_json::json!({
                "id": id,
                "allowed": decision.allowed,
                "by": decision.by,
            }),
        );
        let pending = waiting.pending;
        // A call that went away meanwhile simply does not hear it.
        let _ = waiting.decision.send(decision);
        Ok(pending)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Waiting>> {
        self.waiting
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// A call's place in the queue: dropped (decided, timed out, or the call gone), it is out.
pub struct Ticket {
    approvals: Arc<Approvals>,
    id: String,
}

impl Ticket {
    pub fn id(&self) -> &str {
        &self.id
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if self.approvals.lock().remove(&self.id).is_some() {
            self.approvals
                .events
                .publish("approval_withdrawn", &serde_json::json!({ "id": self.id }));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending(digest: &str) -> Pending {
        Pending {
            id: String::new(),
            principal: "user:key:alice".into(),
            upstream: "repo".into(),
            tool: "delete_branch".into(),
            rule: "destructive".into(),
            arguments: serde_json::json!({"branch": "main"}),
            arguments_sha256: digest.into(),
            requested_at: 1,
            expires_at: 2,
        }
    }

    fn allow() -> Decision {
        Decision {
            allowed: true,
            by: "operator".into(),
            reason: None,
        }
    }

    #[tokio::test]
    async fn a_decision_releases_its_own_call_once() {
        let events = Arc::new(Events::default());
        let mut heard = events.follow(None).next;
        let approvals = Approvals::new(events);
        let (ticket, decided) = approvals.enqueue(pending("aa"));
        let (other, other_decided) = approvals.enqueue(pending("aa"));
        assert_ne!(ticket.id(), other.id(), "each call its own entry");
        assert_eq!(approvals.list().len(), 2);
        assert_eq!(
            approvals
                .decide(ticket.id(), Some("bb"), allow())
                .unwrap_err(),
            Refused::OtherArguments
        );
        approvals.decide(ticket.id(), Some("aa"), allow()).unwrap();
        assert!(decided.await.unwrap().allowed);
        assert_eq!(
            approvals.decide(ticket.id(), None, allow()).unwrap_err(),
            Refused::Unknown,
            "not twice"
        );
        assert_eq!(approvals.list().len(), 1, "the other call still waits");
        drop(other);
        assert!(other_decided.await.is_err(), "withdrawn, never decided");
        assert!(approvals.list().is_empty());
        assert_eq!(
            approvals.decide(ticket.id(), None, allow()).unwrap_err(),
            Refused::Unknown
        );
        let mut kinds = Vec::new();
        while let Ok(event) = heard.try_recv() {
            kinds.push(event.kind);
        }
        assert_eq!(
            kinds,
            [
                "approval_requested",
                "approval_requested",
                "approval_decided",
                "approval_withdrawn"
            ]
        );
    }
}
