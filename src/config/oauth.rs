//! `[oauth]` (Switchyard as an OAuth client: its public URL, token store and key) and each HTTP
//! upstream's `[upstreams.NAME.oauth]` (grant, client identity, scopes), as written, as checked
//! and as the runtime uses them; and the public URL a gateway without one configured uses.

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
    exchange::{RawTokenExchange, TokenExchangeSettings},
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

/// `[upstreams.NAME.oauth]`: how Switchyard authorizes itself to one HTTP upstream. Its
/// `Debug` shows whether there is a client secret, never the secret.
#[derive(Clone, PartialEq)]
pub struct UpstreamOAuth {
    /// False: a 401 from the upstream is a plain failure.
    pub enabled: bool,
    /// The grants to try, in order: `[ClientCredentials]` alone, or any of `TokenExchange`
    /// and `AuthorizationCode` (which waits for a person, so it comes last).
    pub grants: Vec<GrantKind>,
    /// Where `TokenExchange` exchanges tokens.
    pub token_exchange: Option<Box<TokenExchangeSettings>>,
    /// A client registered beforehand with the upstream's authorization server.
    pub client_id: Option<String>,
    pub client_secret: Option<String>,
    /// How the client authenticates at the token endpoint; `None`: as the server supports.
    pub auth_method: Option<AuthMethod>,
    /// For `private_key_jwt`: the PEM key and algorithm that sign client assertions.
    pub private_key: Option<PrivateKey>,
    /// The scopes to ask for; `None`: those the upstream's challenge or metadata name.
    pub scopes: Option<Vec<String>>,
}

impl fmt::Debug for UpstreamOAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UpstreamOAuth")
            .field("enabled", &self.enabled)
            .field("grants", &self.grants)
            .field("token_exchange", &self.token_exchange)
            .field("client_id", &self.client_id)
            .field("client_secret", &self.client_secret.as_ref().map(|_| "…"))
            .field("auth_method", &self.auth_method)
            .field("private_key", &self.private_key)
            .field("scopes", &self.scopes)
            .finish()
    }
}

impl Default for UpstreamOAuth {
    fn default() -> Self {
        Self {
            enabled: true,
            grants: vec![GrantKind::AuthorizationCode],
            token_exchange: None,
            client_id: None,
            client_secret: None,
            auth_method: None,
            private_key: None,
            scopes: None,
        }
    }
}

impl UpstreamOAuth {
    /// Whether tokens come from the client credentials grant (no user involved).
    pub fn is_machine(&self) -> bool {
        self.grants == [GrantKind::ClientCredentials]
    }

    /// Whether a user's own token is exchanged, for the upstream's token or for an identity
    /// assertion to present to the upstream's authorization server.
    pub fn exchanges(&self) -> bool {
        self.exchange_grant().is_some()
    }

    /// `TokenExchange` or `IdJag`, whichever is used.
    pub fn exchange_grant(&self) -> Option<GrantKind> {
        (self.grants.iter())
            .find(|grant| matches!(grant, GrantKind::TokenExchange | GrantKind::IdJag))
            .copied()
    }

    /// Whether a user may authorize in a browser (first, or when nothing else gave a token).
    pub fn in_browser(&self) -> bool {
        self.grants.contains(&GrantKind::AuthorizationCode)
    }
}

/// An OAuth grant used with an upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrantKind {
    /// A user authorizes in a browser (authorization code with PKCE).
    AuthorizationCode,
    /// Machine to machine, with the client's own credentials.
    ClientCredentials,
    /// The user's own token exchanged for the upstream's (RFC 8693).
    TokenExchange,
    /// The user's own token exchanged for an identity assertion (ID-JAG), which the
    /// upstream's authorization server takes for a token (enterprise-managed authorization).
    IdJag,
}

impl GrantKind {
    fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "authorization_code" => GrantKind::AuthorizationCode,
            "client_credentials" => GrantKind::ClientCredentials,
            "token_exchange" => GrantKind::TokenExchange,
            "id_jag" => GrantKind::IdJag,
            _ => return None,
        })
    }

    /// Its name in the configuration (and in audit records).
    pub fn as_str(self) -> &'static str {
        match self {
            GrantKind::AuthorizationCode => "authorization_code",
            GrantKind::ClientCredentials => "client_credentials",
            GrantKind::TokenExchange => "token_exchange",
            GrantKind::IdJag => "id_jag",
        }
    }
}

/// `grant` as written: one name, or several in the order they are tried.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum RawGrants {
    One(String),
    Several(Vec<String>),
}

/// Token endpoint client authentication (RFC 6749 §2.3, RFC 7523).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthMethod {
    ClientSecretBasic,
    ClientSecretPost,
    PrivateKeyJwt,
    None,
}

impl AuthMethod {
    pub fn as_str(self) -> &'static str {
        match self {
            AuthMethod::ClientSecretBasic => "client_secret_basic",
            AuthMethod::ClientSecretPost => "client_secret_post",
            AuthMethod::PrivateKeyJwt => "private_key_jwt",
            AuthMethod::None => "none",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "client_secret_basic" => AuthMethod::ClientSecretBasic,
            "client_secret_post" => AuthMethod::ClientSecretPost,
            "private_key_jwt" => AuthMethod::PrivateKeyJwt,
            "none" => AuthMethod::None,
            _ => return None,
        })
    }
}

/// A private key that signs client assertions.
#[derive(Clone, PartialEq)]
pub struct PrivateKey {
    pub pem: String,
    pub algorithm: jsonwebtoken::Algorithm,
}

impl fmt::Debug for PrivateKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PrivateKey")
            .field("algorithm", &self.algorithm)
            .finish_non_exhaustive()
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

/// `[upstreams.NAME.oauth]`: how Switchyard authorizes itself to one upstream.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[schemars(rename = "UpstreamOAuth")]
pub struct RawUpstreamOAuth {
    /// `false`: a 401 from the upstream is a plain failure (e.g. with a static token in
    /// `headers`).
    #[schemars(extend("default" = true))]
    pub enabled: Option<bool>,
    /// `authorization_code` (a user authorizes in a browser), `client_credentials` (machine to
    /// machine), `token_exchange` (the user's own token exchanged for the upstream's),
    /// `id_jag` (the user's own token exchanged for an identity assertion, which the
    /// upstream's authorization server takes: enterprise-managed authorization), or a list
    /// tried in order, such as `["token_exchange", "authorization_code"]`. Default:
    /// `authorization_code`.
    pub grant: Option<RawGrants>,
    /// Where `token_exchange` (or `id_jag`) exchanges the user's token.
    pub token_exchange: Option<RawTokenExchange>,
    /// A client registered with the authorization server beforehand. Default: the client ID
    /// metadata document, or dynamic registration.
    #[schemars(with = "Option<Expanded>")]
    pub client_id: Option<String>,
    /// The secret of `client_id`.
    #[schemars(with = "Option<Expanded>")]
    pub client_secret: Option<String>,
    /// How the client authenticates at the token endpoint. Default: as the server supports
    /// (`private_key_jwt` with a private key).
    #[schemars(extend(
        "enum" = ["client_secret_basic", "client_secret_post", "private_key_jwt", "none"]
    ))]
    pub token_endpoint_auth_method: Option<String>,
    /// For `private_key_jwt`: the client's PEM private key (not with `private_key_file`).
    #[schemars(with = "Option<Expanded>")]
    pub private_key: Option<String>,
    /// For `private_key_jwt`: a file holding the PEM private key, relative to this file's
    /// directory.
    #[schemars(with = "Option<Expanded>")]
    pub private_key_file: Option<String>,
    /// The private key's algorithm. Default: `ES256` for an EC key, else `RS256`.
    #[schemars(extend(
        "enum" = ["RS256", "RS384", "RS512", "PS256", "ES256", "ES384", "EdDSA"]
    ))]
    pub signing_algorithm: Option<String>,
    /// The scopes to ask for. Default: those the upstream's metadata names.
    pub scopes: Option<Vec<String>>,
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

    pub(super) fn upstream_oauth(
        &mut self,
        key: &str,
        raw: Option<&RawUpstreamOAuth>,
    ) -> UpstreamOAuth {
        let Some(raw) = raw else {
            return UpstreamOAuth::default();
        };
        let at = |field: &str| format!("{key}.oauth.{field}");
        let grants = self.grants(&at("grant"), raw.grant.as_ref());
        let token_exchange = raw
            .token_exchange
            .as_ref()
            .and_then(|exchange| self.token_exchange(key, exchange))
            .map(Box::new);
        let exchanging: Vec<&str> = (grants.iter())
            .filter(|grant| matches!(grant, GrantKind::TokenExchange | GrantKind::IdJag))
            .map(|grant| grant.as_str())
            .collect();
        match (exchanging.as_slice(), raw.token_exchange.is_some()) {
            ([grant], false) => self.problem(
                at("token_exchange"),
                format!("the `{grant}` grant needs this table: where tokens are exchanged"),
            ),
            ([_, _], _) => self.problem(
                at("grant"),
                "`token_exchange` and `id_jag` both exchange the user's token at the server of \
                 `token_exchange`: choose one",
            ),
            ([], true) => self.problem(
                at("token_exchange"),
                "has no effect unless `grant` names `token_exchange` or `id_jag`",
            ),
            _ => {}
        }
        let mut secret =
            |field: &str, value: Option<&String>| value.and_then(|v| self.expand(&at(field), v));
        let client_id = secret("client_id", raw.client_id.as_ref());
        let client_secret = secret("client_secret", raw.client_secret.as_ref());
        let auth_method = raw.token_endpoint_auth_method.as_deref().and_then(|text| {
            let method = AuthMethod::parse(text);
            if method.is_none() {
                self.problem(
                    at("token_endpoint_auth_method"),
                    format!(
                        "`{text}` is not one of `client_secret_basic`, `client_secret_post`, \
                         `private_key_jwt`, `none`"
                    ),
                );
            }
            method
        });
        let private_key = self.private_key(key, raw);
        if client_secret.is_some() && client_id.is_none() {
            self.problem(at("client_secret"), "needs `client_id`");
        }
        let uses_secret = matches!(
            auth_method,
            Some(AuthMethod::ClientSecretBasic | AuthMethod::ClientSecretPost)
        );
        if uses_secret && client_secret.is_none() {
            self.problem(at("token_endpoint_auth_method"), "needs `client_secret`");
        }
        let auth_method = match (auth_method, &private_key) {
            (None, Some(_)) => Some(AuthMethod::PrivateKeyJwt),
            (Some(AuthMethod::PrivateKeyJwt), None) => {
                self.problem(
                    at("token_endpoint_auth_method"),
                    "`private_key_jwt` needs `private_key` or `private_key_file`",
                );
                Some(AuthMethod::PrivateKeyJwt)
            }
            (method, _) => method,
        };
        if grants == [GrantKind::ClientCredentials] {
            if client_id.is_none() {
                self.problem(
                    at("client_id"),
                    "the client_credentials grant needs a client_id",
                );
            }
            if client_secret.is_none() && private_key.is_none() {
                self.problem(
                    at("grant"),
                    "the client_credentials grant needs `client_secret` or a private key",
                );
            }
        }
        if grants.contains(&GrantKind::IdJag) && client_id.is_none() {
            self.problem(
                at("client_id"),
                "the `id_jag` grant needs Switchyard's client at the upstream's authorization \
                 server, which the identity assertion names",
            );
        }
        if private_key.is_some() && client_id.is_none() {
            self.problem(at("client_id"), "a private key needs `client_id`");
        }
        UpstreamOAuth {
            enabled: raw.enabled.unwrap_or(true),
            grants,
            token_exchange,
            client_id,
            client_secret,
            auth_method,
            private_key,
            scopes: raw.scopes.clone(),
        }
    }

    /// `grant`, one or several: known names, each once, `client_credentials` alone (it
    /// involves no user), `authorization_code` last (it waits for a person).
    fn grants(&mut self, at: &str, raw: Option<&RawGrants>) -> Vec<GrantKind> {
        let names = match raw {
            None => return vec![GrantKind::AuthorizationCode],
            Some(RawGrants::One(name)) => std::slice::from_ref(name),
            Some(RawGrants::Several(names)) => names.as_slice(),
        };
        let mut grants = Vec::new();
        for name in names {
            match GrantKind::parse(name) {
                Some(grant) if grants.contains(&grant) => {
                    self.problem(at, format!("names `{name}` twice"));
                }
                Some(grant) => grants.push(grant),
                None => self.problem(
                    at,
                    format!(
                        "`{name}` is not one of `authorization_code`, `client_credentials`, \
                         `token_exchange`, `id_jag`"
                    ),
                ),
            }
        }
        if grants.contains(&GrantKind::ClientCredentials) && grants.len() > 1 {
            self.problem(
                at,
                "`client_credentials` stands alone: it reaches the upstream as Switchyard, \
                 the others as each user",
            );
        }
        if grants
            .iter()
            .position(|g| *g == GrantKind::AuthorizationCode)
            .is_some_and(|i| i + 1 < grants.len())
        {
            self.problem(
                at,
                "`authorization_code` waits for a person to authorize: it can only come last",
            );
        }
        if grants.is_empty() {
            if names.is_empty() {
                self.problem(at, "names no grant");
            }
            grants.push(GrantKind::AuthorizationCode);
        }
        grants
    }

    fn private_key(&mut self, key: &str, raw: &RawUpstreamOAuth) -> Option<PrivateKey> {
        let at = |field: &str| format!("{key}.oauth.{field}");
        let (field, pem) = match (&raw.private_key, &raw.private_key_file) {
            (None, None) => return None,
            (Some(_), Some(_)) => {
                self.problem(
                    at("private_key"),
                    "give `private_key` or `private_key_file`, not both",
                );
                return None;
            }
            (Some(pem), None) => ("private_key", self.expand(&at("private_key"), pem)?),
            (None, Some(file)) => {
                let path = self.path(&at("private_key_file"), file);
                match std::fs::read_to_string(&path) {
                    Ok(pem) => ("private_key_file", pem),
                    Err(error) => {
                        self.problem(
                            at("private_key_file"),
                            format!("cannot read {}: {error}", path.display()),
                        );
                        return None;
                    }
                }
            }
        };
        let algorithm = match raw.signing_algorithm.as_deref() {
            None if pem.contains("BEGIN EC") => jsonwebtoken::Algorithm::ES256,
            None => jsonwebtoken::Algorithm::RS256,
            Some(text) => {
                match text.parse::<jsonwebtoken::Algorithm>() {
                    Ok(
                        algorithm @ (jsonwebtoken::Algorithm::RS256
                        | jsonwebtoken::Algorithm::RS384
                        | jsonwebtoken::Algorithm::RS512
                        | jsonwebtoken::Algorithm::PS256
                        | jsonwebtoken::Algorithm::ES256
                        | jsonwebtoken::Algorithm::ES384
                        | jsonwebtoken::Algorithm::EdDSA),
                    ) => algorithm,
                    _ => {
                        self.problem(
                        at("signing_algorithm"),
                        format!("`{text}` is not one of RS256, RS384, RS512, PS256, ES256, ES384, EdDSA"),
                    );
                        return None;
                    }
                }
            }
        };
        let key = PrivateKey { pem, algorithm };
        if let Err(error) = key.encoding_key() {
            self.problem(
                at(field),
                format!("is not a usable {algorithm:?} private key: {error}"),
            );
            return None;
        }
        Some(key)
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

impl PrivateKey {
    /// The key in the form `jsonwebtoken` signs with.
    pub fn encoding_key(&self) -> Result<jsonwebtoken::EncodingKey, jsonwebtoken::errors::Error> {
        use jsonwebtoken::{Algorithm::*, EncodingKey};
        let pem = self.pem.as_bytes();
        match self.algorithm {
            ES256 | ES384 => EncodingKey::from_ec_pem(pem),
            EdDSA => EncodingKey::from_ed_pem(pem),
            _ => EncodingKey::from_rsa_pem(pem),
        }
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
