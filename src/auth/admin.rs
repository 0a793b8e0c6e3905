//! The admin token: the credential of the gateway's operators. It is `[admin] token` when
//! configured; otherwise one made at the first start and kept in the state directory, in a
//! file only its owner can read (`admin.token`), so that on loopback too no request acts as
//! the operator without it. Compared in constant time; never logged but once, when made.

use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use http::{HeaderMap, header};

use crate::{config::Config, oauth::VaultError};

/// The file in the state directory that keeps a made token.
pub const TOKEN_FILE: &str = "admin.token";

/// The operators' bearer token. Its `Debug` never shows it.
#[derive(Clone)]
pub struct AdminToken {
    value: Arc<str>,
    /// Written in the configuration, rather than made by the gateway.
    configured: bool,
}

impl std::fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminToken")
            .field("configured", &self.configured)
            .finish_non_exhaustive()
    }
}

/// Where the admin token came from, for the operator to be told once.
pub enum Origin {
    Configured,
    /// Read from this file, made at an earlier start.
    Kept(PathBuf),
    /// Made now and kept in this file.
    Made(PathBuf),
}

impl AdminToken {
    /// `[admin] token` if configured; else the state directory's, made now if there is none.
    pub fn for_config(config: &Config) -> Result<(Self, Origin), VaultError> {
        if let Some(token) = &config.admin.token {
            return Ok((Self::configured(token), Origin::Configured));
        }
        let path = config.oauth.state_dir.join(TOKEN_FILE);
        let (token, made) = read_or_make(&path)?;
        let origin = if made {
            Origin::Made(path)
        } else {
            Origin::Kept(path)
        };
        Ok((Self::new(&token, false), origin))
    }

    /// The token an operator chose (`[admin] token`, or an embedding program's own).
    pub fn configured(value: &str) -> Self {
        Self::new(value, true)
    }

    /// A token made now and kept nowhere: what an embedded gateway without operators has.
    pub fn unknowable() -> Self {
        let mut bytes = [0u8; 32];
        // No secure random numbers: a token that matches nothing a client could send.
        let value = match aws_lc_rs::rand::fill(&mut bytes) {
            Ok(()) => URL_SAFE_NO_PAD.encode(bytes),
            Err(_) => "\u{0}".into(),
        };
        Self::new(&value, false)
    }

    fn new(value: &str, configured: bool) -> Self {
        Self {
            value: Arc::from(value),
            configured,
        }
    }

    /// Whether the operator wrote it in the configuration.
    pub fn is_configured(&self) -> bool {
        self.configured
    }

    /// The token itself, to tell the operator where to find the status page.
    pub fn reveal(&self) -> &str {
        &self.value
    }

    /// Whether `headers` carry `Authorization: Bearer {token}`.
    pub fn admits(&self, headers: &HeaderMap) -> bool {
        headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .is_some_and(|given| same_secret(given.trim(), &self.value))
    }
}

/// Whether two secrets are equal, in a time that does not depend on where they differ.
fn same_secret(given: &str, secret: &str) -> bool {
    let (given, secret) = (given.as_bytes(), secret.as_bytes());
    given.len() == secret.len()
        && given
            .iter()
            .zip(secret)
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

/// The token kept at `path`, or a new one written there (0600) if there is none; true if
/// made now. Two processes starting at once end up with the same one.
fn read_or_make(path: &Path) -> Result<(String, bool), VaultError> {
    let io = |source| VaultError::Io {
        path: path.to_owned(),
        source,
    };
    match std::fs::read_to_string(path) {
        Ok(text) if !text.trim().is_empty() => return Ok((text.trim().to_owned(), false)),
        Ok(_) => {
            return Err(VaultError::Corrupt {
                path: path.to_owned(),
                reason: "the admin token file is empty".into(),
            });
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => return Err(io(error)),
    }
    let mut bytes = [0u8; 32];
    aws_lc_rs::rand::fill(&mut bytes).map_err(|e| VaultError::Random(e.to_string()))?;
    let token = URL_SAFE_NO_PAD.encode(bytes);
    if crate::oauth::write_new_private(path, format!("{token}\n").as_bytes())? {
        return Ok((token, true));
    }
    let text = std::fs::read_to_string(path).map_err(io)?;
    Ok((text.trim().to_owned(), false))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::AUTHORIZATION, value.parse().unwrap());
        headers
    }

    #[test]
    fn the_token_must_match_exactly() {
        let token = AdminToken::new("0123456789abcdef", true);
        assert!(token.admits(&headers("Bearer 0123456789abcdef")));
        assert!(!token.admits(&headers("Bearer 0123456789abcdeF")));
        assert!(!token.admits(&headers("Bearer 0123456789abcde")));
        assert!(!token.admits(&headers("Basic 0123456789abcdef")));
        assert!(!token.admits(&HeaderMap::new()));
        assert!(!format!("{token:?}").contains("0123"));
    }

    #[test]
    fn a_made_token_is_kept_for_its_owner_alone() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state").join(TOKEN_FILE);
        let (made, first) = read_or_make(&path).unwrap();
        assert!(first);
        assert_eq!(made.len(), 43, "32 random bytes");
        let (kept, again) = read_or_make(&path).unwrap();
        assert_eq!((kept.as_str(), again), (made.as_str(), false));
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
