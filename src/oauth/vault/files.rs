//! The vault of one process: files in the state directory, so that a restart needs no new
//! authorization.
//!
//! Each record is one file, `{kind}/{sha256 of its key}.bin`: a version byte, a random 96-bit
//! nonce, and the record's JSON sealed with AES-256-GCM, the record's key bound in as
//! associated data (a file copied under another name does not open). Files are written whole
//! (a temporary file of a unique name, then a rename) and readable by their owner only;
//! directories likewise. `update` is the one read-modify-write of a record.
//!
//! The key comes from the configuration or from a key file, created on first use: once, by one
//! thread of one process; whoever comes second reads back the key that was kept.

use std::{
    fs,
    path::{Path, PathBuf},
    sync::{Mutex, MutexGuard, OnceLock},
};

use aws_lc_rs::{
    aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey},
    digest, rand,
};
use serde::{Serialize, de::DeserializeOwned};

use super::{RecordKind, VaultError};
use crate::{
    config::OAuthKey,
    store::private::{self, Replace},
};

const VERSION: u8 = 1;

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> VaultError + '_ {
    move |source| VaultError::Io {
        path: path.to_owned(),
        source,
    }
}

pub struct Files {
    dir: PathBuf,
    key_source: OAuthKey,
    /// Loaded (or created) on first use, so a gateway without OAuth upstreams touches nothing.
    key: OnceLock<LessSafeKey>,
    /// Held while loading or creating the key: two threads that both found `key` empty would
    /// otherwise each make one, and records sealed with the key not kept would never open.
    loading_key: Mutex<()>,
    /// Held through every `update`, so concurrent read-modify-writes of a record do not lose
    /// each other's changes.
    updating: Mutex<()>,
}

impl Files {
    pub fn new(dir: PathBuf, key: OAuthKey) -> Self {
        Self {
            dir,
            key_source: key,
            key: OnceLock::new(),
            loading_key: Mutex::new(()),
            updating: Mutex::new(()),
        }
    }

    /// The record of `kind` under `key`, if there is one.
    pub fn load<T: DeserializeOwned>(
        &self,
        kind: RecordKind,
        key: &str,
    ) -> Result<Option<T>, VaultError> {
        let path = self.path(kind, key);
        let sealed = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(io(&path)(error)),
        };
        let cipher = self.key()?;
        if sealed.len() < 1 + NONCE_LEN || sealed[0] != VERSION {
            return Err(VaultError::Corrupt {
                path,
                reason: "not a Switchyard store file".into(),
            });
        }
        let nonce = Nonce::try_assume_unique_for_key(&sealed[1..1 + NONCE_LEN]).map_err(|_| {
            VaultError::Corrupt {
                path: path.clone(),
                reason: "bad nonce".into(),
            }
        })?;
        let mut body = sealed[1 + NONCE_LEN..].to_vec();
        let plain = cipher
            .open_in_place(nonce, Aad::from(key.as_bytes()), &mut body)
            .map_err(|_| VaultError::Undecryptable(path.clone()))?;
        serde_json::from_slice(plain)
            .map(Some)
            .map_err(|e| VaultError::Corrupt {
                path,
                reason: e.to_string(),
            })
    }

    /// Writes the record of `kind` under `key`, replacing any earlier one.
    pub fn save<T: Serialize>(
        &self,
        kind: RecordKind,
        key: &str,
        value: &T,
    ) -> Result<(), VaultError> {
        let path = self.path(kind, key);
        let cipher = self.key()?;
        let mut nonce = [0u8; NONCE_LEN];
        rand::fill(&mut nonce).map_err(|e| VaultError::Random(e.to_string()))?;
        let mut body = serde_json::to_vec(value).map_err(|e| VaultError::Corrupt {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        cipher
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(key.as_bytes()),
                &mut body,
            )
            .map_err(|_| VaultError::Random("sealing failed".into()))?;
        let mut sealed = Vec::with_capacity(1 + NONCE_LEN + body.len());
        sealed.push(VERSION);
        sealed.extend_from_slice(&nonce);
        sealed.extend_from_slice(&body);
        private::write(&path, &sealed, Replace::Always)
            .map(drop)
            .map_err(io(&path))
    }

    /// Changes the record of `kind` under `key` in place (`None`: there is none, or it is to
    /// be deleted) while no other `update` of this store runs; `change` says whether it
    /// changed anything, and only then is the record written. A record that cannot be read is
    /// an error, so that a wrong key never overwrites what it could not open.
    pub fn update<T: Serialize + DeserializeOwned>(
        &self,
        kind: RecordKind,
        key: &str,
        change: impl FnOnce(&mut Option<T>) -> bool,
    ) -> Result<(), VaultError> {
        let _one = lock(&self.updating);
        let mut record = self.load(kind, key)?;
        if !change(&mut record) {
            return Ok(());
        }
        match record {
            Some(value) => self.save(kind, key, &value),
            None => self.delete(kind, key).map(drop),
        }
    }

    /// Deletes the record of `kind` under `key`; true if there was one.
    pub fn delete(&self, kind: RecordKind, key: &str) -> Result<bool, VaultError> {
        let path = self.path(kind, key);
        match fs::remove_file(&path) {
            Ok(()) => Ok(true),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(error) => Err(io(&path)(error)),
        }
    }

    fn path(&self, kind: RecordKind, key: &str) -> PathBuf {
        let hash = digest::digest(&digest::SHA256, key.as_bytes());
        let name: String = hash.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        self.dir.join(kind.name()).join(format!("{name}.bin"))
    }

    fn key(&self) -> Result<&LessSafeKey, VaultError> {
        if let Some(key) = self.key.get() {
            return Ok(key);
        }
        let _one = lock(&self.loading_key);
        if let Some(key) = self.key.get() {
            // Another thread loaded it while this one waited.
            return Ok(key);
        }
        let bytes = match &self.key_source {
            OAuthKey::Inline(bytes) => *bytes,
            OAuthKey::File(path) => read_or_create_key(path)?,
        };
        let unbound = UnboundKey::new(&AES_256_GCM, &bytes)
            .map_err(|_| VaultError::Random("bad key length".into()))?;
        Ok(self.key.get_or_init(|| LessSafeKey::new(unbound)))
    }
}

fn lock(mutex: &Mutex<()>) -> MutexGuard<'_, ()> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The key in `path`, or a new random one written there (readable by its owner only).
fn read_or_create_key(path: &Path) -> Result<[u8; 32], VaultError> {
    private::read_or_create_key(path, "the token store key").map_err(|error| {
        if error.kind() == std::io::ErrorKind::InvalidData {
            VaultError::BadKeyFile(path.to_owned())
        } else {
            io(path)(error)
        }
    })
}

/// Writes `bytes` to `path` (mode 0600, new directories 0700) unless a file is there already;
/// false if one was (it is left as it was).
pub fn write_new_private(path: &Path, bytes: &[u8]) -> Result<bool, VaultError> {
    private::write(path, bytes, Replace::Never).map_err(io(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
    struct Secret {
        token: String,
    }

    #[test]
    fn round_trips_encrypted_with_owner_only_files() {
        let dir = tempfile::tempdir().unwrap();
        let store = Files::new(
            dir.path().join("state"),
            OAuthKey::File(dir.path().join("state/key")),
        );
        let secret = Secret {
            token: "tok-123".into(),
        };
        store
            .save(RecordKind::Tokens, "github\0alice", &secret)
            .unwrap();
        assert_eq!(
            store
                .load::<Secret>(RecordKind::Tokens, "github\0alice")
                .unwrap(),
            Some(secret)
        );
        assert_eq!(
            store
                .load::<Secret>(RecordKind::Tokens, "github\0bob")
                .unwrap(),
            None
        );

        let path = store.path(RecordKind::Tokens, "github\0alice");
        let raw = fs::read(&path).unwrap();
        assert!(
            !raw.windows(7).any(|w| w == b"tok-123"),
            "encrypted at rest"
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(&path), 0o600);
            assert_eq!(mode(&dir.path().join("state/key")), 0o600);
            assert_eq!(mode(path.parent().unwrap()), 0o700);
        }

        // The same key file opens it after a restart; another key does not.
        let again = Files::new(
            dir.path().join("state"),
            OAuthKey::File(dir.path().join("state/key")),
        );
        assert!(
            again
                .load::<Secret>(RecordKind::Tokens, "github\0alice")
                .unwrap()
                .is_some()
        );
        let other = Files::new(dir.path().join("state"), OAuthKey::Inline([7; 32]));
        assert!(matches!(
            other.load::<Secret>(RecordKind::Tokens, "github\0alice"),
            Err(VaultError::Undecryptable(_))
        ));

        assert!(store.delete(RecordKind::Tokens, "github\0alice").unwrap());
        assert!(!store.delete(RecordKind::Tokens, "github\0alice").unwrap());
    }

    #[test]
    fn a_record_does_not_open_under_another_key() {
        let dir = tempfile::tempdir().unwrap();
        let store = Files::new(dir.path().to_owned(), OAuthKey::Inline([1; 32]));
        store.save(RecordKind::Clients, "a", &"one").unwrap();
        fs::copy(
            store.path(RecordKind::Clients, "a"),
            store.path(RecordKind::Clients, "b"),
        )
        .unwrap();
        assert!(matches!(
            store.load::<String>(RecordKind::Clients, "b"),
            Err(VaultError::Undecryptable(_))
        ));
    }

    #[test]
    fn concurrent_first_uses_agree_on_one_key() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        let key_file = state.join("key");
        let shared = Files::new(state.clone(), OAuthKey::File(key_file.clone()));
        std::thread::scope(|scope| {
            for i in 0..8 {
                let (shared, state, key_file) = (&shared, &state, &key_file);
                scope.spawn(move || {
                    shared
                        .save(RecordKind::Tokens, &format!("shared{i}"), &i)
                        .unwrap();
                    // A store of its own, as another process has.
                    let own = Files::new(state.clone(), OAuthKey::File(key_file.clone()));
                    own.save(RecordKind::Tokens, &format!("own{i}"), &i)
                        .unwrap();
                });
            }
        });
        let restarted = Files::new(state, OAuthKey::File(key_file));
        for i in 0..8 {
            for name in [format!("shared{i}"), format!("own{i}")] {
                assert_eq!(
                    restarted.load::<i32>(RecordKind::Tokens, &name).unwrap(),
                    Some(i),
                    "{name} opens with the key kept"
                );
            }
        }
    }

    #[test]
    fn concurrent_writes_and_updates_lose_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = Files::new(dir.path().to_owned(), OAuthKey::Inline([2; 32]));
        std::thread::scope(|scope| {
            for i in 0..8 {
                let store = &store;
                scope.spawn(move || {
                    for round in 0..10 {
                        store.save(RecordKind::Tokens, "same", &(i, round)).unwrap();
                        store
                            .update(RecordKind::Index, "list", |list: &mut Option<Vec<i32>>| {
                                list.get_or_insert_default().push(i * 10 + round);
                                true
                            })
                            .unwrap();
                    }
                });
            }
        });
        let list: Vec<i32> = store.load(RecordKind::Index, "list").unwrap().unwrap();
        assert_eq!(list.len(), 80, "every update kept");
        assert!(
            store
                .load::<(i32, i32)>(RecordKind::Tokens, "same")
                .unwrap()
                .is_some()
        );
        let leftovers: Vec<_> = fs::read_dir(dir.path().join("tokens"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .filter(|name| !name.to_string_lossy().ends_with(".bin"))
            .collect();
        assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");

        store
            .update(RecordKind::Index, "list", |list: &mut Option<Vec<i32>>| {
                *list = None;
                true
            })
            .unwrap();
        assert_eq!(
            store.load::<Vec<i32>>(RecordKind::Index, "list").unwrap(),
            None
        );
    }
}
