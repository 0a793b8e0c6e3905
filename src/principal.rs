//! Who a request is made for. Upstream tokens are kept per (upstream, principal), so that each
//! user authorizes once with their own account. Until clients authenticate to Switchyard,
//! every request is made for the anonymous principal.

use std::{
    fmt,
    sync::{Arc, LazyLock},
};

/// A user (or the anonymous one), by a stable identifier.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Principal(Arc<str>);

const ANONYMOUS: &str = "anonymous";

/// One shared anonymous principal, so that requests need not allocate one each.
static THE_ANONYMOUS: LazyLock<Principal> = LazyLock::new(|| Principal(Arc::from(ANONYMOUS)));

impl Principal {
    pub fn anonymous() -> Self {
        THE_ANONYMOUS.clone()
    }

    /// An authenticated user, by the identifier its authentication gave (e.g. `iss|sub`).
    pub fn user(id: &str) -> Self {
        Self(Arc::from(format!("user:{id}")))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn is_anonymous(&self) -> bool {
        &*self.0 == ANONYMOUS
    }
}

impl Default for Principal {
    fn default() -> Self {
        Self::anonymous()
    }
}

impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
