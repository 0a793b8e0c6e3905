//! Bearer JWTs: signature (pinned algorithms, keys from a JWKS URL, a PEM file or a secret),
//! `iss`, `aud` = the gateway's resource URI, `exp`/`nbf` with a small leeway. A token that
//! passed is remembered until it expires (five minutes at most), so a client's next requests
//! cost a map lookup instead of a signature check.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use dashmap::DashMap;
use jsonwebtoken::{DecodingKey, Validation, errors::ErrorKind};
use serde_json::{Map, Value};

use super::jwks::{Jwks, KeyError, SetKey};
use crate::{
    config::{JwtKeys, JwtSettings, pem_public_key},
    principal::{Identity, Presented, Principal},
};

/// How long a checked token is remembered at most.
const CACHE_TTL: Duration = Duration::from_secs(300);
/// Most tokens remembered; beyond, expired ones are dropped, then all.
const CACHE_SIZE: usize = 10_000;

/// Why a token was not accepted.
pub enum Failure {
    /// The token itself is bad (401 `invalid_token`), said in words.
    Invalid(&'static str),
    /// The keys to check it are unavailable (503).
    Unavailable(String),
}

enum Keys {
    Static(Arc<SetKey>),
    Jwks(Jwks),
}

pub struct Verifier {
    keys: Keys,
    validation: Validation,
    subject_claim: String,
    groups_claim: String,
    checked: DashMap<Box<str>, (Principal, Instant)>,
}

impl Verifier {
    /// A verifier for `settings`, accepting tokens for `resource`. `None` if its key cannot be
    /// read (the configuration check has reported it already).
    pub fn new(settings: &JwtSettings, resource: &str) -> Option<Self> {
        let keys = match &settings.keys {
            JwtKeys::Jwks {
                url,
                max_age,
                min_refresh,
            } => Keys::Jwks(Jwks::new(url.clone(), *max_age, *min_refresh)),
            JwtKeys::Pem(pem) => Keys::Static(Arc::new(SetKey {
                key: pem_public_key(pem)?,
                algorithm: None,
            })),
            JwtKeys::Secret(secret) => Keys::Static(Arc::new(SetKey {
                key: DecodingKey::from_secret(secret),
                algorithm: None,
            })),
        };
        let mut validation = Validation::new(*settings.algorithms.first()?);
        validation.algorithms = settings.algorithms.clone();
        validation.leeway = settings.leeway.as_secs();
        validation.validate_nbf = true;
        validation.set_issuer(&[&settings.issuer]);
        let bare = resource.trim_end_matches('/');
        validation.set_audience(&[bare.to_owned(), format!("{bare}/")]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        Some(Self {
            keys,
            validation,
            subject_claim: settings.subject_claim.clone(),
            groups_claim: settings.groups_claim.clone(),
            checked: DashMap::new(),
        })
    }

    /// The principal `token` stands for, if it is valid.
    pub async fn verify(&self, token: &str) -> Result<Principal, Failure> {
        if let Some(entry) = self.checked.get(token)
            && entry.1 > Instant::now()
        {
            return Ok(entry.0.clone());
        }
        let header = jsonwebtoken::decode_header(token)
            .map_err(|_| Failure::Invalid("the bearer token is neither a JWT nor a known key"))?;
        if !self.validation.algorithms.contains(&header.alg) {
            return Err(Failure::Invalid(
                "the token is signed with an algorithm this gateway does not accept",
            ));
        }
        let candidates = match &self.keys {
            Keys::Static(key) => vec![key.clone()],
            Keys::Jwks(jwks) => match jwks.keys_for(header.kid.as_deref()).await {
                Ok(keys) => keys,
                Err(KeyError::Unknown) => {
                    return Err(Failure::Invalid(
                        "the token is signed with a key its issuer does not publish",
                    ));
                }
                Err(KeyError::Unavailable(reason)) => return Err(Failure::Unavailable(reason)),
            },
        };
        let mut failure = Failure::Invalid("the token's key does not fit its algorithm");
        for candidate in candidates {
            if candidate.algorithm.is_some_and(|a| a != header.alg) {
                continue;
            }
            match jsonwebtoken::decode::<Map<String, Value>>(
                token,
                &candidate.key,
                &self.validation,
            ) {
                Ok(data) => {
                    let principal = self.principal(token, data.claims)?;
                    self.remember(token, &principal);
                    return Ok(principal);
                }
                Err(error) => failure = Failure::Invalid(reason(error.kind())),
            }
        }
        Err(failure)
    }

    fn principal(&self, token: &str, claims: Map<String, Value>) -> Result<Principal, Failure> {
        let Some(subject) = claims.get(&self.subject_claim).and_then(Value::as_str) else {
            return Err(Failure::Invalid("the token names no subject"));
        };
        let scopes = match (claims.get("scope"), claims.get("scp")) {
            (Some(Value::String(scope)), _) => words(scope),
            (_, Some(scp)) => strings(scp),
            _ => Vec::new(),
        };
        let groups = claims
            .get(&self.groups_claim)
            .map(strings)
            .unwrap_or_default();
        let id = format!("jwt:{subject}");
        let presented = Presented::new(token, claims.get("exp").and_then(Value::as_u64));
        Ok(Principal::authenticated(
            &id,
            Identity {
                subject: subject.to_owned(),
                key_name: None,
                scopes,
                groups,
                claims,
                presented: Some(presented),
            },
        ))
    }

    fn remember(&self, token: &str, principal: &Principal) {
        let Some(exp) = principal
            .identity()
            .and_then(|identity| identity.claims.get("exp"))
            .and_then(Value::as_u64)
        else {
            return;
        };
        let now = jsonwebtoken::get_current_timestamp();
        let left = Duration::from_secs(exp.saturating_sub(now)).min(CACHE_TTL);
        if left.is_zero() {
            return;
        }
        if self.checked.len() >= CACHE_SIZE {
            let now = Instant::now();
            self.checked.retain(|_, (_, until)| *until > now);
            if self.checked.len() >= CACHE_SIZE {
                self.checked.clear();
            }
        }
        self.checked
            .insert(token.into(), (principal.clone(), Instant::now() + left));
    }
}

/// What was wrong with a token, in words (never the token or its claims).
fn reason(kind: &ErrorKind) -> &'static str {
    match kind {
        ErrorKind::ExpiredSignature => "the token has expired",
        ErrorKind::ImmatureSignature => "the token is not valid yet",
        ErrorKind::InvalidAudience => {
            "the token is for another resource: its audience is not this gateway"
        }
        ErrorKind::InvalidIssuer => "the token is from another issuer",
        ErrorKind::InvalidSignature => "the token's signature does not verify",
        ErrorKind::MissingRequiredClaim(_) => {
            "the token lacks a required claim (exp, iss and aud are)"
        }
        ErrorKind::InvalidAlgorithm | ErrorKind::InvalidKeyFormat => {
            "the token's algorithm does not fit the issuer's key"
        }
        _ => "the token is not a valid JWT",
    }
}

fn words(text: &str) -> Vec<String> {
    text.split_ascii_whitespace().map(str::to_owned).collect()
}

/// A claim that is a list of strings, or one space-separated string.
fn strings(value: &Value) -> Vec<String> {
    match value {
        Value::String(text) => words(text),
        Value::Array(items) => items
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    }
}
