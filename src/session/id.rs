//! Session ids that carry their session: what a replica needs to serve a session it did not
//! open (the client's `initialize` parameters with the agreed version, the principal, the
//! endpoint), sealed with AES-256-GCM under a key the replicas share.
//!
//! An id is base64url of: a format byte, the sealing key's id (4 bytes of its SHA-256), a
//! random 96-bit nonce, and the sealed ticket (JSON) with its tag. The first configured key
//! seals; every configured key opens, so keys rotate by putting a new one first and dropping
//! the old one once its sessions have ended. An id that does not open (forged, altered, or
//! sealed with a key no longer configured) names no session.

use std::sync::Arc;

use aws_lc_rs::{
    aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey},
    digest, rand,
};
use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use rmcp::model::InitializeRequestParams;
use serde::{Deserialize, Serialize};

use crate::{policy::EndpointName, principal::Principal};

const FORMAT: u8 = 1;
const KEY_ID_LEN: usize = 4;
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
        client: &InitializeRequestParams,
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
            opened: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |since| since.as_secs()),
        }
    }

    /// Whether the session is `principal`'s at `endpoint`.
    pub fn belongs_to(&self, principal: &Principal, endpoint: &EndpointName) -> bool {
        self.principal == principal.as_str() && self.endpoint.as_deref() == endpoint.as_virtual()
    }
}

struct Key {
    id: [u8; KEY_ID_LEN],
    cipher: LessSafeKey,
}

impl Key {
    fn new(bytes: &[u8; 32]) -> Self {
        let digest = digest::digest(&digest::SHA256, bytes);
        let mut id = [0; KEY_ID_LEN];
        id.copy_from_slice(&digest.as_ref()[..KEY_ID_LEN]);
        let unbound = UnboundKey::new(&AES_256_GCM, bytes).expect("32 bytes is an AES-256 key");
        Self {
            id,
            cipher: LessSafeKey::new(unbound),
        }
    }
}

/// Mints and opens session ids.
pub struct SessionIds {
    /// The first seals; all open.
    keys: Vec<Key>,
}

impl SessionIds {
    /// Ids sealed with the first of `keys`, opened with any; with none, a random key of this
    /// process's own (its sessions then end with it).
    pub fn new(keys: &[[u8; 32]]) -> Self {
        let keys = if keys.is_empty() {
            let mut own = [0u8; 32];
            fill_random(&mut own);
            vec![Key::new(&own)]
        } else {
            keys.iter().map(Key::new).collect()
        };
        Self { keys }
    }

    /// A new id for the session `ticket` describes.
    pub fn mint(&self, ticket: &Ticket) -> Arc<str> {
        let key = &self.keys[0];
        let mut nonce = [0u8; NONCE_LEN];
        fill_random(&mut nonce);
        let mut sealed = serde_json::to_vec(ticket).expect("a ticket serializes");
        key.cipher
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(PURPOSE),
                &mut sealed,
            )
            .expect("AES-GCM seals any ticket");
        let mut bytes = Vec::with_capacity(1 + KEY_ID_LEN + NONCE_LEN + sealed.len());
        bytes.push(FORMAT);
        bytes.extend_from_slice(&key.id);
        bytes.extend_from_slice(&nonce);
        bytes.extend_from_slice(&sealed);
        Arc::from(URL_SAFE_NO_PAD.encode(bytes))
    }

    /// What `id` carries, if it is an id one of the keys sealed.
    pub fn open(&self, id: &str) -> Option<Ticket> {
        if id.len() > MAX_ID_LEN {
            return None;
        }
        let mut bytes = URL_SAFE_NO_PAD.decode(id).ok()?;
        let header = 1 + KEY_ID_LEN + NONCE_LEN;
        if bytes.len() < header || bytes[0] != FORMAT {
            return None;
        }
        let key = self
            .keys
            .iter()
            .find(|k| k.id == bytes[1..1 + KEY_ID_LEN])?;
        let nonce = Nonce::try_assume_unique_for_key(&bytes[1 + KEY_ID_LEN..header]).ok()?;
        let plain = key
            .cipher
            .open_in_place(nonce, Aad::from(PURPOSE), &mut bytes[header..])
            .ok()?;
        serde_json::from_slice(plain).ok()
    }
}

/// Secure random bytes; the system's generator does not fail on supported systems, and a
/// v4 UUID (also from it) stands in if it ever does.
fn fill_random(out: &mut [u8]) {
    if rand::fill(out).is_err() {
        for chunk in out.chunks_mut(16) {
            let uuid = uuid::Uuid::new_v4();
            chunk.copy_from_slice(&uuid.as_bytes()[..chunk.len()]);
        }
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::{ClientCapabilities, Implementation};

    use super::*;

    fn ticket() -> Ticket {
        let mut client = InitializeRequestParams::new(
            ClientCapabilities::builder().enable_roots().build(),
            Implementation::new("inspector", "1.0"),
        );
        client.client_info.icons = Some(Vec::new());
        Ticket::new(&Principal::user("jwt:alice"), &EndpointName::MAIN, &client)
    }

    #[test]
    fn an_id_opens_to_its_ticket_and_tells_nothing_in_clear() {
        let ids = SessionIds::new(&[[7; 32]]);
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
        let old = SessionIds::new(&[[1; 32]]);
        let id = old.mint(&ticket());
        let rotated = SessionIds::new(&[[2; 32], [1; 32]]);
        assert!(rotated.open(&id).is_some(), "an old key still opens");
        assert!(rotated.open(&rotated.mint(&ticket())).is_some());
        let retired = SessionIds::new(&[[2; 32]]);
        assert_eq!(retired.open(&id), None);
        assert_eq!(SessionIds::new(&[]).open(&id), None);

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
