//! Where the OAuth client keeps what outlives a restart: tokens per (upstream, principal),
//! client registrations per (upstream, authorization server), and which principals of an
//! upstream have tokens.
//!
//! One process keeps them in files (`files`, sealed with `[oauth] key`). Replicas
//! (`[store] kind = "redis"`) keep them in the shared store, sealed with the session keys, so
//! that a user authorizes once for every replica; a change of tokens is announced, so that
//! every replica takes the new ones at once, and a refresh is made under a lease, so that two
//! replicas never spend one refresh token (see `Authorizer::renew`).

mod files;

use std::{
    path::PathBuf,
    sync::Arc,
    time::{Duration, Instant},
};

use serde::{Deserialize, Serialize, de::DeserializeOwned};

use self::files::Files;
pub use self::files::write_new_private;
use crate::{
    config::OAuthSettings,
    store::{Lease, Store},
};

/// How long a replica may hold the lease on a grant's renewal; it lapses after that, should
/// the replica die while renewing.
const RENEWAL_LEASE: Duration = Duration::from_secs(20);
/// How often a replica waiting for another's renewal looks again.
const LEASE_POLL: Duration = Duration::from_millis(50);

/// Why the vault could not be used.
#[derive(Debug, thiserror::Error)]
pub enum VaultError {
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
    #[error(transparent)]
    Shared(#[from] crate::store::StoreError),
    #[error("the shared store's {kind} record is not what Switchyard wrote: {reason}")]
    Malformed { kind: &'static str, reason: String },
}

/// What a record is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordKind {
    Tokens,
    Clients,
    /// Which principals of an upstream have tokens.
    Index,
}

impl RecordKind {
    /// Its directory in the state directory, and its kind in the shared store.
    fn name(self) -> &'static str {
        match self {
            RecordKind::Tokens => "tokens",
            RecordKind::Clients => "clients",
            RecordKind::Index => "index",
        }
    }

    pub(super) fn shared_name(self) -> &'static str {
        match self {
            RecordKind::Tokens => "oauth-tokens",
            RecordKind::Clients => "oauth-clients",
            RecordKind::Index => "oauth-index",
        }
    }
}

/// The principals of one upstream that have stored tokens, as one file keeps them.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Index {
    principals: Vec<String>,
}

pub enum Vault {
    Files(Files),
    Shared(Arc<Store>),
}

impl Vault {
    /// The shared store if replicas share one, else files in `settings.state_dir`.
    pub fn new(settings: &OAuthSettings, store: &Arc<Store>) -> Self {
        if store.is_shared() {
            Vault::Shared(store.clone())
        } else {
            Vault::Files(Files::new(settings.state_dir.clone(), settings.key.clone()))
        }
    }

    /// The shared store, if replicas share one.
    pub fn shared(&self) -> Option<&Arc<Store>> {
        match self {
            Vault::Files(_) => None,
            Vault::Shared(store) => Some(store),
        }
    }

    /// The record of `kind` under `key`, if there is one.
    pub async fn load<T: DeserializeOwned>(
        &self,
        kind: RecordKind,
        key: &str,
    ) -> Result<Option<T>, VaultError> {
        match self {
            Vault::Files(files) => files.load(kind, key),
            Vault::Shared(store) => {
                let Some(plain) = store.load_record(kind.shared_name(), key).await? else {
                    return Ok(None);
                };
                serde_json::from_slice(&plain)
                    .map(Some)
                    .map_err(|e| VaultError::Malformed {
                        kind: kind.shared_name(),
                        reason: e.to_string(),
                    })
            }
        }
    }

    /// Writes the record of `kind` under `key`, replacing any; replicas hear of new tokens.
    pub async fn save<T: Serialize>(
        &self,
        kind: RecordKind,
        key: &str,
        value: &T,
    ) -> Result<(), VaultError> {
        match self {
            Vault::Files(files) => files.save(kind, key, value),
            Vault::Shared(store) => {
                let plain = serde_json::to_vec(value).map_err(|e| VaultError::Malformed {
                    kind: kind.shared_name(),
                    reason: e.to_string(),
                })?;
                store
                    .save_record(kind.shared_name(), key, &plain, None)
                    .await?;
                store.announce(kind.shared_name(), key).await?;
                Ok(())
            }
        }
    }

    /// Deletes the record of `kind` under `key`; true if there was one. Replicas hear of it.
    pub async fn delete(&self, kind: RecordKind, key: &str) -> Result<bool, VaultError> {
        match self {
            Vault::Files(files) => files.delete(kind, key),
            Vault::Shared(store) => {
                let deleted = store.delete_record(kind.shared_name(), key).await?;
                store.announce(kind.shared_name(), key).await?;
                Ok(deleted)
            }
        }
    }

    /// The principals of `upstream` with stored tokens.
    pub async fn principals(&self, upstream: &str) -> Result<Vec<String>, VaultError> {
        match self {
            Vault::Files(files) => Ok(files
                .load::<Index>(RecordKind::Index, upstream)?
                .unwrap_or_default()
                .principals),
            Vault::Shared(store) => Ok(store
                .members(RecordKind::Index.shared_name(), upstream)
                .await?),
        }
    }

    /// Notes that `principal` has tokens for `upstream`.
    pub async fn add_principal(&self, upstream: &str, principal: &str) -> Result<(), VaultError> {
        match self {
            Vault::Files(files) => {
                files.update(RecordKind::Index, upstream, |index: &mut Option<Index>| {
                    let index = index.get_or_insert_default();
                    let new = !index.principals.iter().any(|p| p == principal);
                    if new {
                        index.principals.push(principal.to_owned());
                    }
                    new
                })
            }
            Vault::Shared(store) => Ok(store
                .add_member(RecordKind::Index.shared_name(), upstream, principal)
                .await?),
        }
    }

    /// Notes that `principals` no longer have tokens for `upstream`.
    pub async fn remove_principals(
        &self,
        upstream: &str,
        principals: &[String],
    ) -> Result<(), VaultError> {
        match self {
            Vault::Files(files) => {
                files.update(RecordKind::Index, upstream, |stored: &mut Option<Index>| {
                    let Some(kept) = stored else {
                        return false;
                    };
                    kept.principals.retain(|p| !principals.contains(p));
                    if kept.principals.is_empty() {
                        *stored = None;
                    }
                    true
                })
            }
            Vault::Shared(store) => Ok(store
                .remove_members(RecordKind::Index.shared_name(), upstream, principals)
                .await?),
        }
    }

    /// The lease on renewing the tokens under `key`, waited for while another replica holds
    /// it (at most until it lapses). `None` without a shared store: the grant's own lock is
    /// all one process needs.
    pub async fn renewal_lease(&self, key: &str) -> Result<Option<Lease>, VaultError> {
        let Vault::Shared(store) = self else {
            return Ok(None);
        };
        let name = format!("renew {key}");
        let deadline = Instant::now() + RENEWAL_LEASE + LEASE_POLL;
        loop {
            if let Some(lease) = store.try_lease(&name, RENEWAL_LEASE).await? {
                return Ok(Some(lease));
            }
            if Instant::now() >= deadline {
                // Held past its lapse: a replica keeps renewing it, which no renewal needs.
                return Err(VaultError::Malformed {
                    kind: "lease",
                    reason: "a renewal lease is held beyond its lifetime".into(),
                });
            }
            tokio::time::sleep(LEASE_POLL).await;
        }
    }

    /// Gives a renewal lease back.
    pub async fn release(&self, lease: Option<Lease>) {
        if let (Vault::Shared(store), Some(lease)) = (self, lease) {
            store.release(lease).await;
        }
    }
}
