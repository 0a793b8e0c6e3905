//! Session ids that carry their session: what a replica needs to serve a session it did not
//! open (the client's `initialize` parameters with the agreed version, the principal, the
//! endpoint), sealed with AES-256-GCM under a key the replicas share.
//!
//! An id is the ticket (JSON) sealed by `store::Sealer`, in base64url. The first configured
//! key seals; every configured key opens, so keys rotate by putting a new one first and
//! dropping the old one once its sessions have ended. An id that does not open (forged, altered, or
//! sealed with a key no longer configured) names no session.

use std::sync::Arc;

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use rmcp::model::InitializeRequestParams;
use serde::{Deserialize, Serialize};

use crate::{downstream::TaskSupport, policy::EndpointName, principal::Principal, store::Sealer};

/// Bound into every seal, so that nothing else sealed with the same key opens as a session.
const PURPOSE: &[u8] = b"switchyard session id";
/// The longest id opened: more than any ticket makes, far less than a header may be.
const MAX_ID_LEN: usize = 4096;

/// What a session id carries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ticket {
    /// The principal's identifier (`anonymous`, `user:…`).
    #[serde(rename = "p")]
    pub principal: String,
    /// The virtual endpoint's name; none for the main endpoint.
    #[serde(rename = "e", default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// The client's `initialize` parameters, with the version agreed.
    #[serde(rename = "c")]
    pub client: InitializeRequestParams,
    /// What the client declared it runs as a task when asked (the parameters' model lacks it).
    #[serde(
        rename = "k",
        default,
        skip_serializing_if = "TaskSupport::runs_nothing"
    )]
    pub tasks: TaskSupport,
    /// When the session was opened (seconds since the Unix epoch).
    #[serde(rename = "t")]
    pub opened: u64,
}

impl Ticket {
    /// The ticket of a session opened now for `principal` at `endpoint`. Icons and long texts
    /// of the client's description are left out: they make ids long and no one reads them.
    pub fn new(
        principal: &Principal,
        endpoint: &EndpointName,
        (client, tasks): (&InitializeRequestParams, TaskSupport),
    ) -> Self {
        let mut client = client.clone();
        client.meta = None;
        client.client_info.icons = None;
        client.client_info.description = None;
        client.client_info.website_url = None;
        Self {
            principal: principal.as_str().to_owned(),
            endpoint: endpoint.as_virtual().map(str::to_owned),
            client,
            tasks,
            opened: crate::clock::now_seconds(),
        }
    }

    /// Whether the session is `principal`'s at `endpoint`.
    pub fn belongs_to(&self, principal: &Principal, endpoint: &EndpointName) -> bool {
        self.principal == principal.as_str() && self.endpoint.as_deref() == endpoint.as_virtual()
    }
}

/// Mints and opens session ids.
pub struct SessionIds {
    sealer: Arc<Sealer>,
}

impl SessionIds {
    /// Ids sealed by `sealer` (the store's, with the keys replicas share).
    pub fn new(sealer: Arc<Sealer>) -> Self {
        Self { sealer }
    }

    /// A new id for the session `ticket` describes.
    pub fn mint(&self, ticket: &Ticket) -> Arc<str> {
        let plain = serde_json::to_vec(ticket).expect("a ticket serializes");
        Arc::from(URL_SAFE_NO_PAD.encode(self.sealer.seal(PURPOSE, &plain)))
    }

    /// What `id` carries, if it is an id one of the keys sealed.
    pub fn open(&self, id: &str) -> Option<Ticket> {
        if id.len() > MAX_ID_LEN {
            return None;
        }
        let sealed = URL_SAFE_NO_PAD.decode(id).ok()?;
        serde_json::from_slice(&self.sealer.open(PURPOSE, &sealed)?).ok()
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::{ClientCapabilities, Implementation};

    use super::*;

    fn ids(keys: &[[u8; 32]]) -> SessionIds {
        SessionIds::new(Arc::new(Sealer::new(keys)))
    }

    fn ticket() -> Ticket {
        let mut client = InitializeRequestParams::new(
            ClientCapabilities::builder().enable_roots().build(),
            Implementation::new("inspector", "1.0"),
        );
        client.client_info.icons = Some(Vec::new());
        let tasks = TaskSupport::RELAYED;
        Ticket::new(
            &Principal::user("jwt:alice"),
            &EndpointName::MAIN,
            (&client, tasks),
        )
    }

    #[test]
    fn an_id_opens_to_its_ticket_and_tells_nothing_in_clear() {
        let ids = ids(&[[7; 32]]);
        let ticket = ticket();
        let id = ids.mint(&ticket);
        assert_eq!(ids.open(&id), Some(ticket.clone()));
        assert!(!id.contains("alice") && id.len() < 600, "{id}");
        assert!(id.bytes().all(|b| b.is_ascii_graphic()));
        // Two sessions of one client get different ids.
        assert_ne!(ids.mint(&ticket), id);
        assert!(ticket.belongs_to(&Principal::user("jwt:alice"), &EndpointName::MAIN));
        assert!(!ticket.belongs_to(&Principal::user("jwt:bob"), &EndpointName::MAIN));
        assert!(!ticket.belongs_to(
            &Principal::user("jwt:alice"),
            &EndpointName::named("ops".into())
        ));
    }

    #[test]
    fn old_keys_open_until_retired_and_nothing_forged_opens() {
        let old = ids(&[[1; 32]]);
        let id = old.mint(&ticket());
        let rotated = ids(&[[2; 32], [1; 32]]);
        assert!(rotated.open(&id).is_some(), "an old key still opens");
        assert!(rotated.open(&rotated.mint(&ticket())).is_some());
        let retired = ids(&[[2; 32]]);
        assert_eq!(retired.open(&id), None);
        assert_eq!(ids(&[]).open(&id), None);

        // Any altered byte, truncation, or junk: nothing.
        let bytes = URL_SAFE_NO_PAD.decode(&*id).unwrap();
        for at in [0, 3, 10, 20, bytes.len() - 1] {
            let mut altered = bytes.clone();
            altered[at] ^= 1;
            assert_eq!(
                old.open(&URL_SAFE_NO_PAD.encode(altered)),
                None,
                "byte {at}"
            );
        }
        for junk in [
            "",
            "x",
            "0123456789abcdef0123456789abcdef",
            &id[..id.len() - 4],
        ] {
            assert_eq!(old.open(junk), None, "{junk}");
        }
        assert_eq!(old.open(&"A".repeat(MAX_ID_LEN + 4)), None);
    }
}
