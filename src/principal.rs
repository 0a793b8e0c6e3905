//! Who a request is made for. Upstream tokens are kept per (upstream, principal), so that each
//! user authorizes once with their own account; sessions belong to the principal that opened
//! them. Without `[auth]`, every request is made for the anonymous principal.

use std::{
    fmt,
    hash::{Hash, Hasher},
    sync::{Arc, LazyLock},
};

use serde_json::{Map, Value};

/// A user (or the anonymous one), by a stable identifier, with what their authentication said
/// of them. Two principals are the same user when their identifiers are equal.
#[derive(Debug, Clone)]
pub struct Principal {
    id: Arc<str>,
    identity: Option<Arc<Identity>>,
}

/// What authentication established about a user.
#[derive(Debug, Default, PartialEq)]
pub struct Identity {
    /// The subject (a JWT's `sub`, or an API key's name).
    pub subject: String,
    /// The API key used, if it was one.
    pub key_name: Option<String>,
    pub scopes: Vec<String>,
    pub groups: Vec<String>,
    /// A JWT's validated claims (empty for an API key).
    pub claims: Map<String, Value>,
    /// The JWT itself (never an API key): what a token exchange hands on as the user's own.
    pub presented: Option<Presented>,
}

/// The JWT a user authenticated with, and when it expires. Its `Debug` hides it.
#[derive(Clone, PartialEq, Eq)]
pub struct Presented {
    token: Arc<str>,
    /// Seconds since the epoch (the `exp` claim).
    pub expires_at: Option<u64>,
}

impl Presented {
    pub fn new(token: &str, expires_at: Option<u64>) -> Self {
        Self {
            token: Arc::from(token),
            expires_at,
        }
    }

    pub fn reveal(&self) -> &str {
        &self.token
    }
}

impl fmt::Debug for Presented {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Presented")
            .field("expires_at", &self.expires_at)
            .finish_non_exhaustive()
    }
}

const ANONYMOUS: &str = "anonymous";

/// One shared anonymous principal, so that requests need not allocate one each.
static THE_ANONYMOUS: LazyLock<Principal> = LazyLock::new(|| Principal {
    id: Arc::from(ANONYMOUS),
    identity: None,
});

impl Principal {
    pub fn anonymous() -> Self {
        THE_ANONYMOUS.clone()
    }

    /// An authenticated user, by the identifier its authentication gave (`jwt:SUB`,
    /// `key:NAME`), without the details (as restored from the token store).
    pub fn user(id: &str) -> Self {
        Self {
            id: Arc::from(format!("user:{id}")),
            identity: None,
        }
    }

    /// An authenticated user with what their authentication established.
    pub fn authenticated(id: &str, identity: Identity) -> Self {
        Self {
            identity: Some(Arc::new(identity)),
            ..Self::user(id)
        }
    }

    /// The principal an identifier as displayed names (`anonymous`, `user:…`).
    pub fn parse(id: &str) -> Option<Self> {
        match id.strip_prefix("user:") {
            Some(user) if !user.is_empty() => Some(Self::user(user)),
            _ => (id == ANONYMOUS).then(Self::anonymous),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.id
    }

    pub fn is_anonymous(&self) -> bool {
        &*self.id == ANONYMOUS
    }

    /// What authentication established, for an authenticated request.
    pub fn identity(&self) -> Option<&Identity> {
        self.identity.as_deref()
    }
}

impl PartialEq for Principal {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
    }
}

impl Eq for Principal {}

impl Hash for Principal {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.id.hash(state);
    }
}

impl Default for Principal {
    fn default() -> Self {
        Self::anonymous()
    }
}

impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.id)
    }
}
