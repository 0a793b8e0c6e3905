//! Who is calling: the MCP endpoint's authentication (`[auth]`). A request carries a bearer
//! token, either a static API key (known by its SHA-256) or a JWT from the configured issuer;
//! the result is the request's `Principal`. Refusals follow the MCP authorization spec: 401
//! with `WWW-Authenticate: Bearer resource_metadata="…"` pointing at the gateway's own
//! protected-resource metadata (RFC 9728), which names the authorization servers, so standard
//! clients find where to get a token; 403 `insufficient_scope` when a scope is missing.

mod admin;
mod jwks;
mod jwt;

pub use admin::{AdminToken, Origin as AdminTokenOrigin};

use std::collections::HashMap;

use axum::body::Body;
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Response, StatusCode, header};
use url::Url;

use crate::{
    config::{AuthSettings, Config, hash_api_key},
    principal::{Identity, Principal},
    wire,
};

/// The path of RFC 9728 metadata, before the resource's own path.
pub const METADATA_PREFIX: &str = "/.well-known/oauth-protected-resource";

/// Why a request was not admitted.
pub enum Denial {
    /// No credentials, and anonymous requests are not served.
    Missing,
    /// Credentials that are not valid, and why (said without echoing them).
    Invalid(&'static str),
    /// A valid principal lacking a required scope.
    Scope,
    /// The credentials cannot be checked now (the issuer's keys are unreachable).
    Unavailable(String),
}

impl Denial {
    /// Why, in a few words (never the credentials).
    pub fn reason(&self) -> &str {
        match self {
            Denial::Missing => "no credentials",
            Denial::Invalid(reason) => reason,
            Denial::Scope => "a required scope is missing",
            Denial::Unavailable(_) => "the credentials cannot be checked now",
        }
    }
}

/// The endpoint's authentication, as of one configuration.
pub struct Authenticator {
    /// `[auth]` as configured (without it, every request is anonymous, no header is read).
    settings: AuthSettings,
    resource: Url,
    jwt: Option<jwt::Verifier>,
    /// API keys by the SHA-256 of the key, each with its principal made once.
    api_keys: HashMap<[u8; 32], Principal>,
    /// `resource_metadata="…"` (and the scopes), for every challenge.
    challenge_params: String,
    metadata: Bytes,
}

impl Authenticator {
    pub fn new(config: &Config) -> Self {
        let auth = &config.auth;
        let public_url = config.oauth.public_url_or(config.server.listen);
        let resource = auth.resource_or(&public_url, &config.server.endpoint_path);
        let jwt = auth
            .jwt
            .as_ref()
            .and_then(|jwt| jwt::Verifier::new(jwt, resource.as_str()));
        let api_keys = auth
            .api_keys
            .iter()
            .map(|key| {
                let identity = Identity {
                    subject: key.name.clone(),
                    key_name: Some(key.name.clone()),
                    scopes: key.scopes.clone(),
                    groups: key.groups.clone(),
                    claims: Default::default(),
                    // An API key is Switchyard's own secret: it is never handed on.
                    presented: None,
                };
                let principal = Principal::authenticated(&format!("key:{}", key.name), identity);
                (key.sha256, principal)
            })
            .collect();
        let mut challenge_params = format!("resource_metadata=\"{}\"", metadata_url(&resource));
        if !auth.scopes.is_empty() {
            challenge_params.push_str(&format!(", scope=\"{}\"", auth.scopes.join(" ")));
        }
        Self {
            settings: auth.clone(),
            metadata: metadata(auth, &resource),
            resource,
            jwt,
            api_keys,
            challenge_params,
        }
    }

    /// Where users sign in in their browser, when they authenticate with JWTs from an
    /// authorization server the gateway can send a browser to (its first one).
    pub fn signin(&self) -> Option<crate::oauth::SignIn> {
        self.settings.jwt.as_ref()?;
        let issuer = self.settings.authorization_servers.first()?;
        Some(crate::oauth::SignIn {
            issuer: issuer.as_str().trim_end_matches('/').to_owned(),
            resource: self.resource.to_string(),
            scopes: self.settings.scopes.clone(),
            client: self.settings.signin.clone(),
        })
    }

    /// The `[auth]` this authenticator was made for.
    pub fn settings(&self) -> &AuthSettings {
        &self.settings
    }

    /// The protected-resource metadata document (RFC 9728) if `path` is where it is served:
    /// the well-known path, alone or followed by the resource's own path; only with `[auth]`.
    pub fn metadata_at(&self, path: &str) -> Option<Bytes> {
        let suffix = path.strip_prefix(METADATA_PREFIX)?;
        let resource_path = self.resource.path().trim_end_matches('/');
        (self.settings.configured && (suffix.is_empty() || suffix == resource_path))
            .then(|| self.metadata.clone())
    }

    /// The principal a request with `headers` is made for, or why it is refused. Presented
    /// credentials are checked even where anonymous requests are served: a bad token is
    /// refused, never served as anonymous.
    pub async fn authenticate(&self, headers: &HeaderMap) -> Result<Principal, Denial> {
        if !self.settings.configured {
            return Ok(Principal::anonymous());
        }
        let Some(value) = headers.get(header::AUTHORIZATION) else {
            return if self.settings.anonymous {
                Ok(Principal::anonymous())
            } else {
                Err(Denial::Missing)
            };
        };
        let token = bearer_token(value).ok_or(Denial::Invalid(
            "the Authorization header must be `Bearer <token>`",
        ))?;
        self.authenticate_token(token).await
    }

    /// The principal `token` (an API key or a JWT) stands for, checked exactly as a
    /// request's bearer token is (scopes included).
    pub async fn authenticate_token(&self, token: &str) -> Result<Principal, Denial> {
        if !self.settings.configured {
            return Ok(Principal::anonymous());
        }
        let principal = self.principal_of(token).await?;
        let identity = principal.identity();
        let has_scopes = self.settings.scopes.iter().all(|needed| {
            identity.is_some_and(|identity| identity.scopes.iter().any(|s| s == needed))
        });
        if !has_scopes {
            return Err(Denial::Scope);
        }
        Ok(principal)
    }

    async fn principal_of(&self, token: &str) -> Result<Principal, Denial> {
        if !self.api_keys.is_empty() {
            let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, token.as_bytes());
            if let Some(principal) = digest
                .as_ref()
                .try_into()
                .ok()
                .and_then(|hash: [u8; 32]| self.api_keys.get(&hash))
            {
                return Ok(principal.clone());
            }
        }
        match &self.jwt {
            Some(verifier) if token.bytes().filter(|b| *b == b'.').count() == 2 => verifier
                .verify(token)
                .await
                .map_err(|failure| match failure {
                    jwt::Failure::Invalid(reason) => Denial::Invalid(reason),
                    jwt::Failure::Unavailable(reason) => Denial::Unavailable(reason),
                }),
            _ => Err(Denial::Invalid("the bearer token is not a known API key")),
        }
    }

    /// The answer refusing a request: a JSON-RPC error body, with the challenge that tells a
    /// client where to get a token.
    pub fn refuse(&self, denial: &Denial) -> Response<Body> {
        let (status, challenge, message) = match denial {
            Denial::Missing => (
                StatusCode::UNAUTHORIZED,
                format!("Bearer {}", self.challenge_params),
                "Unauthorized: this endpoint requires a bearer token (see WWW-Authenticate)"
                    .to_owned(),
            ),
            Denial::Invalid(reason) => (
                StatusCode::UNAUTHORIZED,
                format!(
                    "Bearer error=\"invalid_token\", error_description=\"{reason}\", {}",
                    self.challenge_params
                ),
                format!("Unauthorized: {reason}"),
            ),
            Denial::Scope => (
                StatusCode::FORBIDDEN,
                format!(
                    "Bearer error=\"insufficient_scope\", {}",
                    self.challenge_params
                ),
                format!(
                    "Forbidden: the token lacks a required scope ({})",
                    self.settings.scopes.join(" ")
                ),
            ),
            Denial::Unavailable(reason) => (
                StatusCode::SERVICE_UNAVAILABLE,
                String::new(),
                format!("Service Unavailable: the token cannot be checked now: {reason}"),
            ),
        };
        let body = wire::write::error(None, -32001, &message, None);
        let mut response = Response::new(Body::from(body));
        *response.status_mut() = status;
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        if let Ok(value) = HeaderValue::from_str(&challenge)
            && !challenge.is_empty()
        {
            headers.insert(header::WWW_AUTHENTICATE, value);
        }
        response
    }
}

/// The token of a `Bearer` Authorization header (the scheme is case-insensitive).
fn bearer_token(value: &HeaderValue) -> Option<&str> {
    let text = value.to_str().ok()?;
    let (scheme, token) = text.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty() && !token.contains(' '))
        .then_some(token)
}

/// Where the metadata of `resource` is served: the well-known prefix inserted before its path.
pub fn metadata_url(resource: &Url) -> String {
    let path = resource.path().trim_end_matches('/');
    format!(
        "{}{METADATA_PREFIX}{path}",
        resource.origin().ascii_serialization()
    )
}

fn metadata(auth: &AuthSettings, resource: &Url) -> Bytes {
    let mut document = serde_json::json!({
        "resource": resource.as_str(),
        "bearer_methods_supported": ["header"],
    });
    if !auth.authorization_servers.is_empty() {
        document["authorization_servers"] = auth
            .authorization_servers
            .iter()
            .map(|url| serde_json::Value::from(url.as_str().trim_end_matches('/')))
            .collect();
    }
    if !auth.scopes.is_empty() {
        document["scopes_supported"] = auth.scopes.clone().into();
    }
    if let Some(name) = &auth.resource_name {
        document["resource_name"] = name.clone().into();
    }
    Bytes::from(document.to_string())
}

/// `switchyard hash-key`: the line to put in `[auth.api_keys.NAME]` for `key`.
pub fn api_key_line(key: &str) -> String {
    format!("sha256 = \"{}\"", hash_api_key(key))
}
