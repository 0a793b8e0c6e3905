//! `[oauth]` (Switchyard as an OAuth client: its public URL, token store and key), as written,
//! as checked and as the runtime uses it; and the public URL a gateway without one configured
//! uses. Each upstream's own `oauth` table is `upstream_oauth`'s.

use std::{
    fmt,
    net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr},
    path::PathBuf,
    time::Duration,
};

use url::Url;

use schemars::JsonSchema;
use serde::Deserialize;

use super::{
    keys::{Checker, decode_key},
    kinds::{Expanded, Seconds},
};

/// `[oauth]`: Switchyard as the OAuth client of the upstreams that require authorization.
#[derive(Debug, Clone, PartialEq)]
pub struct OAuthSettings {
    /// Where browsers and authorization servers reach Switchyard (the redirect URI is
    /// `{public_url}/oauth/callback`); `None`: `http://{server.listen}`, with the loopback
    /// address for an unspecified one (see `public_url_or`).
    pub public_url: Option<Url>,
    /// Where tokens and client registrations are kept, encrypted.
    pub state_dir: PathBuf,
    pub key: OAuthKey,
    /// How Switchyard names itself to authorization servers.
    pub client_name: String,
    /// The client ID metadata document URL to use as `client_id` where authorization servers
    /// accept one; `None`: `{public_url}/oauth/client-metadata.json` when that is https.
    pub client_metadata_url: Option<Url>,
    /// Where the browser goes after an authorization; `None`: Switchyard's own page.
    pub success_redirect: Option<Url>,
    pub error_redirect: Option<Url>,
    /// How long a user has to complete an authorization (its link and `state` then expire).
    pub authorization_lifetime: Duration,
}

/// The key that encrypts the token store.
#[derive(Clone, PartialEq, Eq)]
pub enum OAuthKey {
    /// 32 bytes, given in the configuration (from the environment, normally).
    Inline([u8; 32]),
    /// A file holding the key in base64; created, readable only by its owner, if missing.
    File(PathBuf),
}

impl fmt::Debug for OAuthKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OAuthKey::Inline(_) => f.write_str("Inline(…)"),
            OAuthKey::File(path) => f.debug_tuple("File").field(path).finish(),
        }
    }
}

/// `[oauth]`: Switchyard as the OAuth client of upstream servers. Changes take a restart.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[schemars(rename = "OAuth")]
pub struct RawOAuth {
    /// Where browsers and authorization servers reach Switchyard, an `http(s)://` URL without
    /// query. Default: `http://{server.listen}`, loopback for an unspecified address.
    #[schemars(with = "Option<Expanded>")]
    pub public_url: Option<String>,
    /// Where tokens and client registrations are kept, encrypted, relative to this file's
    /// directory. Default: `$XDG_STATE_HOME/switchyard`, else `~/.local/state/switchyard`.
    #[schemars(with = "Option<Expanded>")]
    pub state_dir: Option<String>,
    /// The store's key: 32 bytes in base64 (not with `key_file`).
    #[schemars(with = "Option<Expanded>")]
    pub key: Option<String>,
    /// A file holding the store's key, created if missing (not with `key`). Default:
    /// `{state_dir}/store.key`.
    #[schemars(with = "Option<Expanded>")]
    pub key_file: Option<String>,
    /// How Switchyard names itself to authorization servers.
    #[schemars(with = "Option<Expanded>", extend("default" = DEFAULT_CLIENT_NAME))]
    pub client_name: Option<String>,
    /// The `https://` URL of Switchyard's client ID metadata document, its `client_id` where
    /// authorization servers accept one. Default: `{public_url}/oauth/client-metadata.json`
    /// when `public_url` is https, else none.
    #[schemars(with = "Option<Expanded>")]
    pub client_metadata_url: Option<String>,
    /// Where the browser goes after an authorization (with `?upstream=NAME`). Default: a page
    /// of Switchyard's.
    #[schemars(with = "Option<Expanded>")]
    pub success_redirect: Option<String>,
    /// Where the browser goes after a failed authorization (with `?upstream=NAME&error=…`).
    /// Default: a page of Switchyard's.
    #[schemars(with = "Option<Expanded>")]
    pub error_redirect: Option<String>,
    /// How long a user has to complete an authorization before its link expires. Seconds.
    #[schemars(
        with = "Option<Seconds>",
        extend("default" = DEFAULT_AUTHORIZATION_LIFETIME.as_secs())
    )]
    pub authorization_lifetime_seconds: Option<f64>,
}

const DEFAULT_CLIENT_NAME: &str = "Switchyard";

/// The state directory where `[oauth] state_dir` names none: `$XDG_STATE_HOME/switchyard`,
/// `~/.local/state/switchyard`, or `.switchyard` in `base_dir` (the configuration's).
pub fn default_state_dir(vars: &dyn super::Vars, base_dir: &std::path::Path) -> PathBuf {
    let var = |name| vars.env(name).filter(|v| !v.is_empty());
    if let Some(state) = var("XDG_STATE_HOME") {
        return PathBuf::from(state).join("switchyard");
    }
    if let Some(home) = var("HOME") {
        return PathBuf::from(home).join(".local/state/switchyard");
    }
    base_dir.join(".switchyard")
}
const DEFAULT_AUTHORIZATION_LIFETIME: Duration = Duration::from_secs(10 * 60);

impl Checker<'_> {
    pub(super) fn oauth(&mut self, raw: &RawOAuth) -> OAuthSettings {
        let public_url = raw.public_url.as_deref().and_then(|text| {
            let url = self.url("oauth.public_url", text)?;
            if url.query().is_some() || url.fragment().is_some() {
                self.problem("oauth.public_url", "must not have a query or fragment");
            }
            Some(url)
        });
        let state_dir = match raw.state_dir.as_deref() {
            Some(dir) => self.path("oauth.state_dir", dir),
            None => self.default_state_dir(),
        };
        let key = match (raw.key.as_deref(), raw.key_file.as_deref()) {
            (Some(_), Some(_)) => {
                self.problem("oauth.key", "give `key` or `key_file`, not both");
                OAuthKey::File(state_dir.join("store.key"))
            }
            (Some(key), None) => match self.expand("oauth.key", key) {
                Some(text) => match decode_key(&text) {
                    Some(key) => OAuthKey::Inline(key),
                    None => {
                        self.problem("oauth.key", "must be 32 bytes in base64");
                        OAuthKey::Inline([0; 32])
                    }
                },
                None => OAuthKey::Inline([0; 32]),
            },
            (None, Some(file)) => OAuthKey::File(self.path("oauth.key_file", file)),
            (None, None) => OAuthKey::File(state_dir.join("store.key")),
        };
        let client_metadata_url = raw.client_metadata_url.as_deref().and_then(|text| {
            let url = self.url("oauth.client_metadata_url", text)?;
            if url.scheme() != "https" || url.path() == "/" {
                self.problem(
                    "oauth.client_metadata_url",
                    "must be an https:// URL with a path (authorization servers require it)",
                );
            }
            Some(url)
        });
        OAuthSettings {
            public_url,
            state_dir,
            key,
            client_name: match raw.client_name.as_deref() {
                Some(name) => self.expand("oauth.client_name", name).unwrap_or_default(),
                None => DEFAULT_CLIENT_NAME.to_owned(),
            },
            client_metadata_url,
            success_redirect: raw
                .success_redirect
                .as_deref()
                .and_then(|text| self.url("oauth.success_redirect", text)),
            error_redirect: raw
                .error_redirect
                .as_deref()
                .and_then(|text| self.url("oauth.error_redirect", text)),
            authorization_lifetime: self.seconds(
                "oauth.authorization_lifetime_seconds",
                raw.authorization_lifetime_seconds,
                DEFAULT_AUTHORIZATION_LIFETIME,
            ),
        }
    }

    /// `$XDG_STATE_HOME/switchyard`, else `~/.local/state/switchyard`, else `.switchyard` next
    /// to the configuration file.
    fn default_state_dir(&self) -> PathBuf {
        default_state_dir(self.vars, &self.base_dir)
    }

    pub(super) fn path(&mut self, key: &str, text: &str) -> PathBuf {
        let path = PathBuf::from(self.expand(key, text).unwrap_or_default());
        if path.is_relative() {
            self.base_dir.join(path)
        } else {
            path
        }
    }

    pub(super) fn url(&mut self, key: &str, text: &str) -> Option<Url> {
        let text = self.expand(key, text)?;
        match Url::parse(&text) {
            Ok(url) if matches!(url.scheme(), "http" | "https") && url.has_host() => Some(url),
            _ => {
                self.problem(key, format!("`{text}` is not an http:// or https:// URL"));
                None
            }
        }
    }
}

impl OAuthSettings {
    /// Where browsers and authorization servers reach this gateway: `public_url`, else
    /// `http://{listen}`, with the loopback address in place of an unspecified one (`0.0.0.0`,
    /// `::`), to which no browser can be sent back.
    pub fn public_url_or(&self, listen: SocketAddr) -> Url {
        if let Some(url) = &self.public_url {
            return url.clone();
        }
        let mut address = listen;
        if address.ip().is_unspecified() {
            address.set_ip(match address.ip() {
                IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
                IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::LOCALHOST),
            });
        }
        Url::parse(&format!("http://{address}")).expect("a socket address is a URL's host")
    }
}

/// A 32-byte key in standard or URL-safe base64.
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_public_url_is_one_a_browser_can_reach() {
        let settings = OAuthSettings {
            public_url: None,
            state_dir: PathBuf::from("state"),
            key: OAuthKey::Inline([0; 32]),
            client_name: DEFAULT_CLIENT_NAME.into(),
            client_metadata_url: None,
            success_redirect: None,
            error_redirect: None,
            authorization_lifetime: DEFAULT_AUTHORIZATION_LIFETIME,
        };
        let default = |listen: &str| settings.public_url_or(listen.parse().unwrap()).to_string();
        assert_eq!(default("0.0.0.0:8080"), "http://127.0.0.1:8080/");
        assert_eq!(default("[::]:8080"), "http://[::1]:8080/");
        assert_eq!(default("127.0.0.1:9000"), "http://127.0.0.1:9000/");
        assert_eq!(default("192.0.2.7:80"), "http://192.0.2.7/");
        let configured = OAuthSettings {
            public_url: Some(Url::parse("https://gw.example.com/base").unwrap()),
            ..settings.clone()
        };
        assert_eq!(
            configured
                .public_url_or("0.0.0.0:8080".parse().unwrap())
                .as_str(),
            "https://gw.example.com/base"
        );
    }
}
