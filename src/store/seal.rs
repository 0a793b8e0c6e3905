//! Sealing with the keys replicas share (`[store] session_keys`): AES-256-GCM, the first key
//! seals, every key opens, and a purpose is bound into each seal so that nothing sealed for
//! one use opens as another. Session ids and the events of session streams kept in Redis are
//! sealed this way.
//!
//! Sealed bytes: a format byte, the key's id (4 bytes of its SHA-256), a random 96-bit nonce,
//! the ciphertext and its tag.

use aws_lc_rs::{
    aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey},
    digest, rand,
};

const FORMAT: u8 = 1;
const KEY_ID_LEN: usize = 4;
const HEADER: usize = 1 + KEY_ID_LEN + NONCE_LEN;

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

/// Seals with the first key, opens with any.
pub struct Sealer {
    keys: Vec<Key>,
}

impl Sealer {
    /// With no keys: a random key of this process's own (what it seals dies with it).
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

    /// `plain` sealed for `purpose`.
    pub fn seal(&self, purpose: &[u8], plain: &[u8]) -> Vec<u8> {
        let key = &self.keys[0];
        let mut nonce = [0u8; NONCE_LEN];
        fill_random(&mut nonce);
        let mut sealed = Vec::with_capacity(HEADER + plain.len() + AES_256_GCM.tag_len());
        sealed.push(FORMAT);
        sealed.extend_from_slice(&key.id);
        sealed.extend_from_slice(&nonce);
        sealed.extend_from_slice(plain);
        let mut body = sealed.split_off(HEADER);
        key.cipher
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(purpose),
                &mut body,
            )
            .expect("AES-GCM seals anything this size");
        sealed.extend_from_slice(&body);
        sealed
    }

    /// What `sealed` holds, if one of the keys sealed it for `purpose`.
    pub fn open(&self, purpose: &[u8], sealed: &[u8]) -> Option<Vec<u8>> {
        if sealed.len() < HEADER || sealed[0] != FORMAT {
            return None;
        }
        let key = self
            .keys
            .iter()
            .find(|k| k.id == sealed[1..1 + KEY_ID_LEN])?;
        let nonce = Nonce::try_assume_unique_for_key(&sealed[1 + KEY_ID_LEN..HEADER]).ok()?;
        let mut body = sealed[HEADER..].to_vec();
        let plain = key
            .cipher
            .open_in_place(nonce, Aad::from(purpose), &mut body)
            .ok()?
            .len();
        body.truncate(plain);
        Some(body)
    }
}

/// Secure random bytes; the system's generator does not fail on supported systems, and a
/// v4 UUID (also from it) stands in if it ever does.
pub(super) fn fill_random(out: &mut [u8]) {
    if rand::fill(out).is_err() {
        for chunk in out.chunks_mut(16) {
            let uuid = uuid::Uuid::new_v4();
            chunk.copy_from_slice(&uuid.as_bytes()[..chunk.len()]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_what_it_sealed_for_that_purpose_only() {
        let sealer = Sealer::new(&[[3; 32]]);
        let sealed = sealer.seal(b"a", b"secret");
        assert_eq!(sealer.open(b"a", &sealed).as_deref(), Some(&b"secret"[..]));
        assert_eq!(sealer.open(b"b", &sealed), None);
        assert!(!sealed.windows(6).any(|w| w == b"secret"));
        let rotated = Sealer::new(&[[4; 32], [3; 32]]);
        assert!(rotated.open(b"a", &sealed).is_some());
        assert_eq!(Sealer::new(&[[4; 32]]).open(b"a", &sealed), None);
        assert_eq!(sealer.open(b"a", &sealed[..sealed.len() - 1]), None);
        assert_eq!(sealer.open(b"a", b""), None);
    }
}
