//! Checking `[auth]`: who may use the MCP endpoint. Bearer JWTs (keys from a JWKS URL, a PEM
//! public key or a shared secret), static API keys stored as SHA-256 hashes, whether
//! anonymous requests are served, and what the gateway says of itself as an OAuth protected
//! resource (RFC 9728).

use std::{fmt, net::SocketAddr, time::Duration};

use jsonwebtoken::{Algorithm, AlgorithmFamily, DecodingKey};
use schemars::JsonSchema;
use serde::Deserialize;
use url::Url;

use super::{
    keys::{Checker, Entries},
    kinds::{Expanded, Seconds},
};

const DEFAULT_LEEWAY: Duration = Duration::from_secs(30);
const DEFAULT_JWKS_MAX_AGE: Duration = Duration::from_secs(3600);
const DEFAULT_JWKS_MIN_REFRESH: Duration = Duration::from_secs(30);

/// `[auth]` as written: requests carry `Authorization: Bearer TOKEN`, a JWT or an API key.
/// It must admit someone: `[auth.jwt]`, `[auth.api_keys]` or `anonymous = true`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[schemars(rename = "Auth")]
pub struct RawAuth {
    /// Serve requests without credentials too, as the anonymous user.
    #[schemars(extend("default" = false))]
    pub anonymous: Option<bool>,
    /// The gateway's resource URI, what tokens' `aud` must name. Default: the endpoint's URL
    /// under `[oauth] public_url`.
    #[schemars(with = "Option<Expanded>")]
    pub resource: Option<String>,
    /// The gateway's name in its protected-resource metadata (RFC 9728).
    pub resource_name: Option<String>,
    /// The authorization servers named in the protected-resource metadata. Default: the JWT
    /// issuer.
    #[schemars(with = "Option<Vec<Expanded>>")]
    pub authorization_servers: Option<Vec<String>>,
    /// Scopes every request needs (without them: 403 `insufficient_scope`).
    #[schemars(extend("default" = []))]
    pub scopes: Option<Vec<String>>,
    /// Bearer JWTs from an identity provider.
    pub jwt: Option<RawJwt>,
    /// Static API keys, `[auth.api_keys.NAME]`, stored as SHA-256 hashes.
    pub api_keys: Option<Entries<RawApiKey>>,
    /// How Switchyard signs users in at the first authorization server, in their browser.
    pub signin: Option<RawSignIn>,
}

/// `[auth.signin]` as written: the client Switchyard is at its own authorization server.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[schemars(rename = "SignIn")]
pub struct RawSignIn {
    /// Switchyard's client ID there. Default: it registers itself (or uses its client ID
    /// metadata document).
    #[schemars(with = "Option<Expanded>")]
    pub client_id: Option<String>,
    /// The secret of `client_id`.
    #[schemars(with = "Option<Expanded>")]
    pub client_secret: Option<String>,
}

/// `[auth.signin]`: the client Switchyard is at its own authorization server, when it signs a
/// user in in their browser (to check who follows an upstream's authorization link). Without
/// a `client_id` it registers itself (or uses its client ID metadata document). Its `Debug`
/// never shows the secret.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct SignInClient {
    pub client_id: Option<String>,
    pub client_secret: Option<String>,
}

impl fmt::Debug for SignInClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SignInClient")
            .field("client_id", &self.client_id)
            .field("client_secret", &self.client_secret.as_ref().map(|_| "…"))
            .finish()
    }
}

/// `[auth.jwt]` as written: the keys come from exactly one of `jwks_url`, `public_key_file`
/// and `secret`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[schemars(rename = "Jwt")]
pub struct RawJwt {
    /// The `iss` tokens must carry. Required.
    #[schemars(required, with = "Option<Expanded>")]
    pub issuer: Option<String>,
    /// The issuer's JWKS URL, `http(s)://`.
    #[schemars(with = "Option<Expanded>")]
    pub jwks_url: Option<String>,
    /// A PEM public key (RSA, EC P-256/P-384 or Ed25519), relative to this file's directory.
    #[schemars(with = "Option<Expanded>")]
    pub public_key_file: Option<String>,
    /// A shared HMAC secret, at least 32 bytes.
    #[schemars(with = "Option<Expanded>")]
    pub secret: Option<String>,
    /// The algorithms accepted, all of one family and fitting the key. Default: `HS256` with
    /// a secret, `ES256` or `EdDSA` for such a PEM key, else `RS256`.
    #[schemars(extend("minItems" = 1))]
    pub algorithms: Option<Vec<String>>,
    /// Clock skew allowed on `exp` and `nbf`. Seconds, 0 to 300.
    #[schemars(range(min = 0.0, max = 300.0), extend("default" = DEFAULT_LEEWAY.as_secs()))]
    pub leeway_seconds: Option<f64>,
    /// How long keys fetched from `jwks_url` are kept. Seconds.
    #[schemars(with = "Option<Seconds>", extend("default" = DEFAULT_JWKS_MAX_AGE.as_secs()))]
    pub jwks_max_age_seconds: Option<f64>,
    /// An unknown `kid` fetches the keys again, at most this often. Seconds.
    #[schemars(
        with = "Option<Seconds>",
        extend("default" = DEFAULT_JWKS_MIN_REFRESH.as_secs())
    )]
    pub jwks_min_refresh_seconds: Option<f64>,
    /// The claim that names the user.
    #[schemars(extend("default" = "sub"))]
    pub subject_claim: Option<String>,
    /// The claim that lists the user's groups.
    #[schemars(extend("default" = "groups"))]
    pub groups_claim: Option<String>,
}

/// `[auth.api_keys.NAME]` as written: one static API key.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[schemars(rename = "ApiKey")]
pub struct RawApiKey {
    /// The SHA-256 of the key, 64 hexadecimal digits (`switchyard hash-key` prints it).
    /// Required.
    #[schemars(required, with = "Option<Expanded>")]
    pub sha256: Option<String>,
    /// The scopes the key grants.
    #[schemars(extend("default" = []))]
    pub scopes: Option<Vec<String>>,
    /// The groups the key's user is in.
    #[schemars(extend("default" = []))]
    pub groups: Option<Vec<String>>,
}

/// Who may use the MCP endpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct AuthSettings {
    /// Whether `[auth]` was written at all (without it, requests are anonymous).
    pub configured: bool,
    /// Whether requests without credentials are served, as the anonymous principal.
    pub anonymous: bool,
    /// The gateway's resource URI (what its tokens' `aud` must name); `None`: the endpoint's
    /// URL under `[oauth] public_url` (see `resource_or`).
    pub resource: Option<Url>,
    pub resource_name: Option<String>,
    /// Named in the protected-resource metadata; by default the JWT issuer.
    pub authorization_servers: Vec<Url>,
    /// Scopes every request needs (403 `insufficient_scope` without them).
    pub scopes: Vec<String>,
    pub jwt: Option<JwtSettings>,
    pub api_keys: Vec<ApiKey>,
    /// How Switchyard signs users in at the first authorization server, in their browser.
    pub signin: SignInClient,
}

impl AuthSettings {
    /// No `[auth]`: everyone is anonymous.
    pub fn open() -> Self {
        Self {
            configured: false,
            anonymous: true,
            resource: None,
            resource_name: None,
            authorization_servers: Vec::new(),
            scopes: Vec::new(),
            jwt: None,
            api_keys: Vec::new(),
            signin: SignInClient::default(),
        }
    }

    /// The resource URI: the configured one, else `public_url` joined with the endpoint path.
    pub fn resource_or(&self, public_url: &Url, endpoint_path: &str) -> Url {
        if let Some(resource) = &self.resource {
            return resource.clone();
        }
        let mut url = public_url.clone();
        let base = url.path().trim_end_matches('/').to_owned();
        url.set_path(&format!("{base}{endpoint_path}"));
        url
    }

    /// Why serving on `listen` with these settings would expose every upstream to anyone who
    /// can reach it, if it would.
    pub fn exposure(&self, listen: SocketAddr) -> Option<String> {
        (!self.configured && !listen.ip().is_loopback()).then(|| {
            format!(
                "server.listen ({listen}) is not a loopback address and [auth] is not \
                 configured: anyone who can reach it could use every upstream. Configure \
                 [auth.jwt] or [auth.api_keys], or set [auth] anonymous = true to serve \
                 everyone on purpose"
            )
        })
    }
}

/// `[auth.jwt]`: bearer JWTs from one issuer.
#[derive(Debug, Clone, PartialEq)]
pub struct JwtSettings {
    pub issuer: String,
    pub keys: JwtKeys,
    /// The algorithms accepted, all of the keys' family.
    pub algorithms: Vec<Algorithm>,
    pub leeway: Duration,
    /// The claim naming the user (`sub`), and the one listing their groups.
    pub subject_claim: String,
    pub groups_claim: String,
}

/// Where JWT signature keys come from.
#[derive(Clone, PartialEq)]
pub enum JwtKeys {
    /// A JWKS document, cached for `max_age`; fetched again early for an unknown `kid`, at
    /// most once per `min_refresh`.
    Jwks {
        url: Url,
        max_age: Duration,
        min_refresh: Duration,
    },
    /// A public key in PEM (RSA, EC or Ed25519), read from a file.
    Pem(Vec<u8>),
    /// A shared secret (HS256/384/512).
    Secret(Vec<u8>),
}

impl fmt::Debug for JwtKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JwtKeys::Jwks { url, .. } => f.debug_tuple("Jwks").field(&url.as_str()).finish(),
            JwtKeys::Pem(_) => f.write_str("Pem(…)"),
            JwtKeys::Secret(_) => f.write_str("Secret(…)"),
        }
    }
}

/// `[auth.api_keys.NAME]`: one static key, known only by its hash.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey {
    pub name: String,
    pub sha256: [u8; 32],
    pub scopes: Vec<String>,
    pub groups: Vec<String>,
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApiKey")
            .field("name", &self.name)
            .field("scopes", &self.scopes)
            .field("groups", &self.groups)
            .finish()
    }
}

impl Checker<'_> {
    pub(super) fn auth(&mut self, raw: Option<&RawAuth>) -> AuthSettings {
        let Some(auth) = raw else {
            return AuthSettings::open();
        };
        let resource = auth.resource.as_deref().and_then(|text| {
            let url = self.url("auth.resource", text)?;
            if url.fragment().is_some() {
                self.problem("auth.resource", "must not have a fragment (RFC 8707)");
            }
            Some(url)
        });
        let jwt = auth.jwt.as_ref().map(|jwt| self.jwt(jwt));
        let mut authorization_servers: Vec<Url> = auth
            .authorization_servers
            .iter()
            .flatten()
            .enumerate()
            .filter_map(|(i, text)| self.url(&format!("auth.authorization_servers[{i}]"), text))
            .collect();
        if auth.authorization_servers.is_none()
            && let Some(issuer) = jwt.as_ref().and_then(|jwt| Url::parse(&jwt.issuer).ok())
        {
            authorization_servers.push(issuer);
        }
        let api_keys = auth
            .api_keys
            .iter()
            .flat_map(Entries::iter)
            .filter_map(|(name, key)| self.api_key(name, key))
            .collect::<Vec<_>>();
        let anonymous = auth.anonymous.unwrap_or(false);
        if !anonymous && jwt.is_none() && api_keys.is_empty() {
            self.problem(
                "auth",
                "admits nobody: configure [auth.jwt] or [auth.api_keys], or set anonymous = true",
            );
        }
        AuthSettings {
            configured: true,
            anonymous,
            resource,
            resource_name: auth.resource_name.clone(),
            authorization_servers,
            scopes: auth.scopes.clone().unwrap_or_default(),
            jwt,
            api_keys,
            signin: self.signin(auth.signin.as_ref()),
        }
    }

    fn signin(&mut self, raw: Option<&RawSignIn>) -> SignInClient {
        let Some(raw) = raw else {
            return SignInClient::default();
        };
        let mut expanded = |key: &str, value: &Option<String>| {
            value.as_deref().and_then(|text| self.expand(key, text))
        };
        let client = SignInClient {
            client_id: expanded("auth.signin.client_id", &raw.client_id),
            client_secret: expanded("auth.signin.client_secret", &raw.client_secret),
        };
        if client.client_secret.is_some() && client.client_id.is_none() {
            self.problem(
                "auth.signin.client_secret",
                "needs the client_id it is the secret of",
            );
        }
        client
    }

    fn jwt(&mut self, raw: &RawJwt) -> JwtSettings {
        let issuer = match raw.issuer.as_deref() {
            Some(text) => self.expand("auth.jwt.issuer", text).unwrap_or_default(),
            None => {
                self.problem(
                    "auth.jwt.issuer",
                    "is required: the `iss` tokens must carry",
                );
                String::new()
            }
        };
        let given = [
            raw.jwks_url.is_some(),
            raw.public_key_file.is_some(),
            raw.secret.is_some(),
        ];
        if given.iter().filter(|g| **g).count() != 1 {
            self.problem(
                "auth.jwt",
                "give exactly one of `jwks_url`, `public_key_file` and `secret`",
            );
        }
        let keys = if let Some(text) = &raw.jwks_url {
            let url = self.url("auth.jwt.jwks_url", text);
            JwtKeys::Jwks {
                url: url.unwrap_or_else(|| Url::parse("http://invalid/").expect("a URL")),
                max_age: self.seconds(
                    "auth.jwt.jwks_max_age_seconds",
                    raw.jwks_max_age_seconds,
                    DEFAULT_JWKS_MAX_AGE,
                ),
                min_refresh: self.seconds(
                    "auth.jwt.jwks_min_refresh_seconds",
                    raw.jwks_min_refresh_seconds,
                    DEFAULT_JWKS_MIN_REFRESH,
                ),
            }
        } else if let Some(file) = &raw.public_key_file {
            let path = self.path("auth.jwt.public_key_file", file);
            match std::fs::read(&path) {
                Ok(pem) => JwtKeys::Pem(pem),
                Err(error) => {
                    self.problem(
                        "auth.jwt.public_key_file",
                        format!("cannot read {}: {error}", path.display()),
                    );
                    JwtKeys::Pem(Vec::new())
                }
            }
        } else {
            let secret = raw
                .secret
                .as_deref()
                .and_then(|text| self.expand("auth.jwt.secret", text))
                .unwrap_or_default();
            if !secret.is_empty() && secret.len() < 32 {
                self.problem("auth.jwt.secret", "must be at least 32 bytes long");
            }
            JwtKeys::Secret(secret.into_bytes())
        };
        let family = match &keys {
            JwtKeys::Secret(_) => Some(AlgorithmFamily::Hmac),
            JwtKeys::Pem(pem) if pem.is_empty() => None,
            JwtKeys::Pem(pem) => {
                let family = pem_public_key(pem).map(|key| key.family());
                if family.is_none() {
                    self.problem(
                        "auth.jwt.public_key_file",
                        "is not a PEM public key (RSA, EC P-256/P-384 or Ed25519)",
                    );
                }
                family
            }
            JwtKeys::Jwks { .. } => None,
        };
        let algorithms = self.algorithms(raw.algorithms.as_deref(), family);
        let leeway = match raw.leeway_seconds {
            None => DEFAULT_LEEWAY,
            Some(s) if (0.0..=300.0).contains(&s) => Duration::from_secs_f64(s),
            Some(s) => {
                self.problem(
                    "auth.jwt.leeway_seconds",
                    format!("must be between 0 and 300, not {s}"),
                );
                DEFAULT_LEEWAY
            }
        };
        JwtSettings {
            issuer,
            keys,
            algorithms,
            leeway,
            subject_claim: raw.subject_claim.clone().unwrap_or_else(|| "sub".into()),
            groups_claim: raw.groups_claim.clone().unwrap_or_else(|| "groups".into()),
        }
    }

    /// The algorithms at `auth.jwt.algorithms`: known names, all of one family, and of the
    /// key's family where it is known (pinning them keeps HS/RS confusion out).
    fn algorithms(
        &mut self,
        names: Option<&[String]>,
        family: Option<AlgorithmFamily>,
    ) -> Vec<Algorithm> {
        let key = "auth.jwt.algorithms";
        let default = match family {
            Some(AlgorithmFamily::Hmac) => vec![Algorithm::HS256],
            Some(AlgorithmFamily::Ec) => vec![Algorithm::ES256],
            Some(AlgorithmFamily::Ed) => vec![Algorithm::EdDSA],
            _ => vec![Algorithm::RS256],
        };
        let Some(names) = names else {
            return default;
        };
        let mut algorithms = Vec::new();
        for name in names {
            match name.parse::<Algorithm>() {
                Ok(algorithm) => algorithms.push(algorithm),
                Err(_) => self.problem(
                    key,
                    format!("`{name}` is not an algorithm (RS256, PS256, ES256, EdDSA, HS256, …)"),
                ),
            }
        }
        let families: Vec<_> = algorithms.iter().map(|a| a.family()).collect();
        if algorithms.is_empty() {
            self.problem(key, "must name at least one algorithm");
            return default;
        }
        if families.iter().any(|f| *f != families[0]) {
            self.problem(
                key,
                "must all be of one family (RSA, EC, Ed25519 or HMAC): mixing them lets a \
                 token choose how it is checked",
            );
        } else if let Some(family) = family
            && families[0] != family
        {
            self.problem(key, format!("do not fit the key, which is {family:?}"));
        }
        algorithms
    }

    fn api_key(&mut self, name: &str, raw: &RawApiKey) -> Option<ApiKey> {
        let key = format!("auth.api_keys.{}.sha256", super::keys::key_segment(name));
        let Some(text) = raw.sha256.as_deref() else {
            self.problem(
                key,
                "is required: the SHA-256 of the key in hex (`switchyard hash-key` prints it)",
            );
            return None;
        };
        let text = self.expand(&key, text)?;
        let Some(sha256) = decode_hex32(text.trim()) else {
            self.problem(
                key,
                "must be 64 hexadecimal digits (`switchyard hash-key` prints them)",
            );
            return None;
        };
        Some(ApiKey {
            name: name.to_owned(),
            sha256,
            scopes: raw.scopes.clone().unwrap_or_default(),
            groups: raw.groups.clone().unwrap_or_default(),
        })
    }
}

/// The public key in `pem` (RSA, EC or Ed25519), if it is one jsonwebtoken reads.
pub fn pem_public_key(pem: &[u8]) -> Option<DecodingKey> {
    DecodingKey::from_rsa_pem(pem)
        .or_else(|_| DecodingKey::from_ec_pem(pem))
        .or_else(|_| DecodingKey::from_ed_pem(pem))
        .ok()
}

fn decode_hex32(text: &str) -> Option<[u8; 32]> {
    if text.len() != 64 || !text.is_ascii() {
        return None;
    }
    let mut bytes = [0u8; 32];
    for (i, byte) in bytes.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(bytes)
}

/// The SHA-256 of an API key, as `[auth.api_keys.NAME] sha256` takes it.
pub fn hash_api_key(key: &str) -> String {
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, key.as_bytes());
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}
