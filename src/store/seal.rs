//! Sealing with the keys replicas share (`[store] session_keys`): AES-256-GCM, the first key
//! seals, every key opens, and a purpose is bound into each seal so that nothing sealed for
//! one use opens as another. Session ids and the events of session streams kept in Redis are
//! sealed this way.
//!
//! Sealed bytes: a format byte, the key's id (4 bytes of its SHA-256), a 96-bit nonce, the
//! ciphertext and its tag. The nonce is random, or, for handles that must read the same every
//! time they are made (`seal_stable`), derived from the sealed bytes with a key of its own:
//! equal handles then reveal only that they are equal.

use aws_lc_rs::{
    aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey},
    digest, hmac, rand,
};

const FORMAT: u8 = 1;
const KEY_ID_LEN: usize = 4;
const HEADER: usize = 1 + KEY_ID_LEN + NONCE_LEN;

struct Key {
    id: [u8; KEY_ID_LEN],
    cipher: LessSafeKey,
    /// Derives the nonces of stable seals.
    nonces: hmac::Key,
}

impl Key {
    fn new(bytes: &[u8; 32]) -> Self {
        let digest = digest::digest(&digest::SHA256, bytes);
        let mut id = [0; KEY_ID_LEN];
        id.copy_from_slice(&digest.as_ref()[..KEY_ID_LEN]);
        let unbound = UnboundKey::new(&AES_256_GCM, bytes).expect("32 bytes is an AES-256 key");
        let mut nonce_key = digest::Context::new(&digest::SHA256);
        nonce_key.update(b"switchyard stable nonces\0");
        nonce_key.update(bytes);
        Self {
            id,
            cipher: LessSafeKey::new(unbound),
            nonces: hmac::Key::new(hmac::HMAC_SHA256, nonce_key.finish().as_ref()),
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
        let mut nonce = [0u8; NONCE_LEN];
        fill_random(&mut nonce);
        self.seal_with(nonce, purpose, plain)
    }

    /// `plain` sealed for `purpose`, the same bytes every time (with the same first key): for
    /// handles a client compares, such as task ids. The nonce is a keyed digest of purpose and
    /// plain text, so it repeats only with both.
    pub fn seal_stable(&self, purpose: &[u8], plain: &[u8]) -> Vec<u8> {
        let mut context = hmac::Context::with_key(&self.keys[0].nonces);
        context.update(&(purpose.len() as u64).to_be_bytes());
        context.update(purpose);
        context.update(plain);
        let mut nonce = [0u8; NONCE_LEN];
        nonce.copy_from_slice(&context.sign().as_ref()[..NONCE_LEN]);
        self.seal_with(nonce, purpose, plain)
    }

    fn seal_with(&self, nonce: [u8; NONCE_LEN], purpose: &[u8], plain: &[u8]) -> Vec<u8> {
        let key = &self.keys[0];
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

    #[test]
    fn stable_seals_repeat_only_for_the_same_purpose_and_text() {
        let sealer = Sealer::new(&[[3; 32]]);
        let once = sealer.seal_stable(b"task", b"alice/1");
        assert_eq!(sealer.seal_stable(b"task", b"alice/1"), once);
        assert_ne!(sealer.seal_stable(b"task", b"alice/2"), once);
        assert_ne!(sealer.seal_stable(b"other", b"alice/1"), once);
        assert_ne!(
            Sealer::new(&[[4; 32]]).seal_stable(b"task", b"alice/1"),
            once
        );
        assert_eq!(
            sealer.open(b"task", &once).as_deref(),
            Some(&b"alice/1"[..])
        );
        assert_eq!(sealer.open(b"other", &once), None);
    }
}
