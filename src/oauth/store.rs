//! The encrypted store: tokens per (upstream, principal) and dynamic client registrations per
//! (upstream, authorization server), so that a restart needs no new authorization.
//!
//! Each record is one file, `{kind}/{sha256 of its key}.bin`: a version byte, a random 96-bit
//! nonce, and the record's JSON sealed with AES-256-GCM, the record's key bound in as
//! associated data (a file copied under another name does not open). Files are written whole
//! (a temporary file, then a rename) and readable by their owner only; directories likewise.
//!
//! The key comes from the configuration or from a key file, created on first use.

use std::{
    fs,
    io::Write,
    path::{Path, PathBuf},
    sync::OnceLock,
};

use aws_lc_rs::{
    aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey},
    digest, rand,
};
use base64::{Engine, engine::general_purpose::STANDARD};
use serde::{Serialize, de::DeserializeOwned};

use crate::config::OAuthKey;

const VERSION: u8 = 1;

/// Why the store could not be used.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: the key file does not hold a base64 key of 32 bytes", .0.display())]
    BadKeyFile(PathBuf),
    #[error("{}: cannot be decrypted with this key (was the key changed?)", .0.display())]
    Undecryptable(PathBuf),
    #[error("{}: {reason}", path.display())]
    Corrupt { path: PathBuf, reason: String },
    #[error("no secure random numbers: {0}")]
    Random(String),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        path: path.to_owned(),
        source,
    }
}

/// What a record is, which is also its directory.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    Tokens,
    Clients,
    /// Which principals of an upstream have tokens.
    Index,
}

impl Kind {
    fn dir(self) -> &'static str {
        match self {
            Kind::Tokens => "tokens",
            Kind::Clients => "clients",
            Kind::Index => "index",
        }
    }
}

pub struct Store {
    dir: PathBuf,
    key_source: OAuthKey,
    /// Loaded (or created) on first use, so a gateway without OAuth upstreams touches nothing.
    key: OnceLock<LessSafeKey>,
}

impl Store {
    pub fn new(dir: PathBuf, key: OAuthKey) -> Self {
        Self {
            dir,
            key_source: key,
            key: OnceLock::new(),
        }
    }

    /// The record of `kind` under `key`, if there is one.
    pub fn load<T: DeserializeOwned>(
        &self,
        kind: Kind,
        key: &str,
    ) -> Result<Option<T>, StoreError> {
        let path = self.path(kind, key);
        let sealed = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(io(&path)(error)),
        };
        let cipher = self.key()?;
        if sealed.len() < 1 + NONCE_LEN || sealed[0] != VERSION {
            return Err(StoreError::Corrupt {
                path,
                reason: "not a Switchyard store file".into(),
            });
        }
        let nonce = Nonce::try_assume_unique_for_key(&sealed[1..1 + NONCE_LEN]).map_err(|_| {
            StoreError::Corrupt {
                path: path.clone(),
                reason: "bad nonce".into(),
            }
        })?;
        let mut body = sealed[1 + NONCE_LEN..].to_vec();
        let plain = cipher
            .open_in_place(nonce, Aad::from(key.as_bytes()), &mut body)
            .map_err(|_| StoreError::Undecryptable(path.clone()))?;
        serde_json::from_slice(plain)
            .map(Some)
            .map_err(|e| StoreError::Corrupt {
                path,
                reason: e.to_string(),
            })
    }

    /// Writes the record of `kind` under `key`, replacing any earlier one.
    pub fn save<T: Serialize>(&self, kind: Kind, key: &str, value: &T) -> Result<(), StoreError> {
        let path = self.path(kind, key);
        let cipher = self.key()?;
        let mut nonce = [0u8; NONCE_LEN];
        rand::fill(&mut nonce).map_err(|e| StoreError::Random(e.to_string()))?;
        let mut body = serde_json::to_vec(value).map_err(|e| StoreError::Corrupt {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        cipher
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(key.as_bytes()),
                &mut body,
            )
            .map_err(|_| StoreError::Random("sealing failed".into()))?;
        let mut sealed = Vec::with_capacity(1 + NONCE_LEN + body.len());
        sealed.push(VERSION);
        sealed.extend_from_slice(&nonce);
        sealed.extend_from_slice(&body);
        write_private(&path, &sealed)
    }

    /// Deletes the record of `kind` under `key`; true if there was one.
    pub fn delete(&self, kind: Kind, key: &str) -> Result<bool, StoreError> {
        let path = self.path(kind, key);
        match fs::remove_file(&path) {
            Ok(()) => Ok(true),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(error) => Err(io(&path)(error)),
        }
    }

    fn path(&self, kind: Kind, key: &str) -> PathBuf {
        let hash = digest::digest(&digest::SHA256, key.as_bytes());
        let name: String = hash.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        self.dir.join(kind.dir()).join(format!("{name}.bin"))
    }

    fn key(&self) -> Result<&LessSafeKey, StoreError> {
        if let Some(key) = self.key.get() {
            return Ok(key);
        }
        let bytes = match &self.key_source {
            OAuthKey::Inline(bytes) => *bytes,
            OAuthKey::File(path) => read_or_create_key(path)?,
        };
        let unbound = UnboundKey::new(&AES_256_GCM, &bytes)
            .map_err(|_| StoreError::Random("bad key length".into()))?;
        Ok(self.key.get_or_init(|| LessSafeKey::new(unbound)))
    }
}

/// The key in `path`, or a new random one written there (readable by its owner only).
fn read_or_create_key(path: &Path) -> Result<[u8; 32], StoreError> {
    match fs::read_to_string(path) {
        Ok(text) => STANDARD
            .decode(text.trim())
            .ok()
            .and_then(|bytes| <[u8; 32]>::try_from(bytes).ok())
            .ok_or_else(|| StoreError::BadKeyFile(path.to_owned())),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            let mut key = [0u8; 32];
            rand::fill(&mut key).map_err(|e| StoreError::Random(e.to_string()))?;
            write_private(path, format!("{}\n", STANDARD.encode(key)).as_bytes())?;
            tracing::info!(path = %path.display(), "created the token store key");
            Ok(key)
        }
        Err(error) => Err(io(path)(error)),
    }
}

/// Writes `bytes` to `path` atomically, the file mode 0600 and new directories 0700.
fn write_private(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    create_private_dir(dir)?;
    let temporary = path.with_extension(format!("tmp{}", std::process::id()));
    let mut options = fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(&temporary).map_err(io(&temporary))?;
    file.write_all(bytes).map_err(io(&temporary))?;
    file.sync_all().map_err(io(&temporary))?;
    fs::rename(&temporary, path).map_err(io(path))
}

fn create_private_dir(dir: &Path) -> Result<(), StoreError> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir).map_err(io(dir))
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
        let store = Store::new(
            dir.path().join("state"),
            OAuthKey::File(dir.path().join("state/key")),
        );
        let secret = Secret {
            token: "tok-123".into(),
        };
        store.save(Kind::Tokens, "github\0alice", &secret).unwrap();
        assert_eq!(
            store.load::<Secret>(Kind::Tokens, "github\0alice").unwrap(),
            Some(secret)
        );
        assert_eq!(
            store.load::<Secret>(Kind::Tokens, "github\0bob").unwrap(),
            None
        );

        let path = store.path(Kind::Tokens, "github\0alice");
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
        let again = Store::new(
            dir.path().join("state"),
            OAuthKey::File(dir.path().join("state/key")),
        );
        assert!(
            again
                .load::<Secret>(Kind::Tokens, "github\0alice")
                .unwrap()
                .is_some()
        );
        let other = Store::new(dir.path().join("state"), OAuthKey::Inline([7; 32]));
        assert!(matches!(
            other.load::<Secret>(Kind::Tokens, "github\0alice"),
            Err(StoreError::Undecryptable(_))
        ));

        assert!(store.delete(Kind::Tokens, "github\0alice").unwrap());
        assert!(!store.delete(Kind::Tokens, "github\0alice").unwrap());
    }

    #[test]
    fn a_record_does_not_open_under_another_key() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path().to_owned(), OAuthKey::Inline([1; 32]));
        store.save(Kind::Clients, "a", &"one").unwrap();
        fs::copy(
            store.path(Kind::Clients, "a"),
            store.path(Kind::Clients, "b"),
        )
        .unwrap();
        assert!(matches!(
            store.load::<String>(Kind::Clients, "b"),
            Err(StoreError::Undecryptable(_))
        ));
    }
}
