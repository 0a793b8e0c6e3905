//! Each HTTP upstream's `[upstreams.NAME.oauth]`: the grants tried in order, Switchyard's
//! client identity there (a secret or a private key), the scopes, and where users' tokens are
//! exchanged, as written, as checked and as the runtime uses them.

use std::fmt;

use schemars::JsonSchema;
use serde::Deserialize;

use super::{
    exchange::{RawTokenExchange, TokenExchangeSettings},
    keys::Checker,
    kinds::Expanded,
};

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

impl Checker<'_> {
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
