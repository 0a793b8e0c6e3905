//! An issuer's signing keys from its JWKS URL: fetched on first need, kept for `max_age`, and
//! fetched again early when a token names a key id the set lacks (a rotation), at most once
//! per `min_refresh` so that tokens with made-up key ids cannot make the gateway hammer the
//! issuer. One fetch at a time; a failed fetch keeps the keys known so far.

use std::{
    collections::HashMap,
    sync::Arc,
    time::{Duration, Instant},
};

use arc_swap::ArcSwap;
use jsonwebtoken::{
    Algorithm, DecodingKey,
    jwk::{Jwk, KeyAlgorithm, PublicKeyUse},
};
use url::Url;

/// Largest JWKS document read.
const MAX_DOCUMENT: usize = 1024 * 1024;
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// One key of the set, with the algorithm it is restricted to, if the set says.
pub struct SetKey {
    pub key: DecodingKey,
    pub algorithm: Option<Algorithm>,
}

/// The keys as last fetched.
#[derive(Default)]
struct KeySet {
    by_id: HashMap<String, Arc<SetKey>>,
    /// Keys without a `kid`.
    unnamed: Vec<Arc<SetKey>>,
    fetched: Option<Instant>,
    /// When a fetch was last tried, successful or not (for the rate limit).
    tried: Option<Instant>,
}

pub struct Jwks {
    url: Url,
    http: reqwest::Client,
    max_age: Duration,
    min_refresh: Duration,
    set: ArcSwap<KeySet>,
    fetching: tokio::sync::Mutex<()>,
}

/// Why no key could be had for a token.
pub enum KeyError {
    /// The set (fresh enough, or just fetched) has no key with this id.
    Unknown,
    /// The set could not be fetched and none is known.
    Unavailable(String),
}

impl Jwks {
    pub fn new(url: Url, max_age: Duration, min_refresh: Duration) -> Self {
        let http = reqwest::Client::builder()
            .timeout(FETCH_TIMEOUT)
            .redirect(reqwest::redirect::Policy::limited(3))
            .build()
            .unwrap_or_default();
        Self {
            url,
            http,
            max_age,
            min_refresh,
            set: ArcSwap::from_pointee(KeySet::default()),
            fetching: tokio::sync::Mutex::new(()),
        }
    }

    /// The keys that may have signed a token naming `kid` (all unnamed ones without a `kid`).
    pub async fn keys_for(&self, kid: Option<&str>) -> Result<Vec<Arc<SetKey>>, KeyError> {
        let set = self.set.load_full();
        if let Some(found) = self.lookup(&set, kid)
            && !self.stale(&set)
        {
            return Ok(found);
        }
        let _one_at_a_time = self.fetching.lock().await;
        // Another request may have fetched while this one waited.
        let set = self.set.load_full();
        if let Some(found) = self.lookup(&set, kid)
            && !self.stale(&set)
        {
            return Ok(found);
        }
        let may_fetch = set.tried.is_none_or(|t| t.elapsed() >= self.min_refresh);
        if may_fetch {
            self.refresh(&set).await;
        }
        let set = self.set.load_full();
        match self.lookup(&set, kid) {
            Some(found) => Ok(found),
            None if set.fetched.is_none() => Err(KeyError::Unavailable(format!(
                "the issuer's keys could not be fetched from {}",
                self.url
            ))),
            None => Err(KeyError::Unknown),
        }
    }

    fn stale(&self, set: &KeySet) -> bool {
        set.fetched.is_none_or(|t| t.elapsed() >= self.max_age)
    }

    fn lookup(&self, set: &KeySet, kid: Option<&str>) -> Option<Vec<Arc<SetKey>>> {
        match kid {
            Some(kid) => set.by_id.get(kid).map(|key| vec![key.clone()]),
            None if set.unnamed.is_empty() && set.by_id.len() == 1 => {
                Some(set.by_id.values().cloned().collect())
            }
            None => (!set.unnamed.is_empty()).then(|| set.unnamed.clone()),
        }
    }

    /// Fetches the set; on failure keeps `old`'s keys, noting when it tried.
    async fn refresh(&self, old: &KeySet) {
        let now = Instant::now();
        match self.fetch().await {
            Ok(mut set) => {
                tracing::debug!(url = %self.url, keys = set.by_id.len() + set.unnamed.len(), "fetched the issuer's signing keys");
                set.fetched = Some(now);
                set.tried = Some(now);
                self.set.store(Arc::new(set));
            }
            Err(error) => {
                tracing::warn!(url = %self.url, %error, "cannot fetch the issuer's signing keys");
                self.set.store(Arc::new(KeySet {
                    by_id: old.by_id.clone(),
                    unnamed: old.unnamed.clone(),
                    fetched: old.fetched,
                    tried: Some(now),
                }));
            }
        }
    }

    async fn fetch(&self) -> Result<KeySet, String> {
        let mut answer = self
            .http
            .get(self.url.clone())
            .header(http::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|e| format!("the request failed: {e}"))?;
        if !answer.status().is_success() {
            return Err(format!("it answered HTTP {}", answer.status()));
        }
        let mut body = Vec::new();
        while let Some(chunk) = answer.chunk().await.map_err(|e| e.to_string())? {
            if body.len() + chunk.len() > MAX_DOCUMENT {
                return Err(format!("the document is larger than {MAX_DOCUMENT} bytes"));
            }
            body.extend_from_slice(&chunk);
        }
        parse_set(&body)
    }
}

/// The usable signature keys of a JWKS document. Keys of unknown types, or meant for
/// encryption, are skipped (a set may hold them), not fatal.
fn parse_set(body: &[u8]) -> Result<KeySet, String> {
    #[derive(serde::Deserialize)]
    struct Document {
        keys: Vec<serde_json::Value>,
    }
    let document: Document =
        serde_json::from_slice(body).map_err(|e| format!("not a JWKS document: {e}"))?;
    let mut by_id = HashMap::new();
    let mut unnamed = Vec::new();
    for value in document.keys {
        let Ok(jwk) = serde_json::from_value::<Jwk>(value) else {
            continue;
        };
        if matches!(jwk.common.public_key_use, Some(ref u) if *u != PublicKeyUse::Signature) {
            continue;
        }
        let Ok(key) = DecodingKey::from_jwk(&jwk) else {
            continue;
        };
        let algorithm = jwk.common.key_algorithm.and_then(signing_algorithm);
        let key = Arc::new(SetKey { key, algorithm });
        match jwk.common.key_id {
            Some(kid) => {
                by_id.insert(kid, key);
            }
            None => unnamed.push(key),
        }
    }
    if by_id.is_empty() && unnamed.is_empty() {
        return Err("the document has no usable signature key".into());
    }
    Ok(KeySet {
        by_id,
        unnamed,
        ..KeySet::default()
    })
}

/// The signature algorithm a JWK's `alg` names (encryption ones name none).
fn signing_algorithm(algorithm: KeyAlgorithm) -> Option<Algorithm> {
    algorithm.to_string().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_keeps_its_signature_keys_and_skips_the_rest() {
        let body = serde_json::json!({"keys": [
            {"kty": "EC", "crv": "P-256", "kid": "ec",  "alg": "ES256", "use": "sig",
             "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU",
             "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"},
            {"kty": "EC", "crv": "P-256", "kid": "enc", "use": "enc",
             "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU",
             "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"},
            {"kty": "whatever", "kid": "odd"}
        ]});
        let set = parse_set(body.to_string().as_bytes()).unwrap();
        assert_eq!(set.by_id.keys().collect::<Vec<_>>(), vec!["ec"]);
        assert_eq!(set.by_id["ec"].algorithm, Some(Algorithm::ES256));
        assert!(set.unnamed.is_empty());
    }

    #[test]
    fn a_set_without_usable_keys_is_an_error() {
        assert!(parse_set(br#"{"keys": []}"#).is_err());
        assert!(parse_set(b"<html>").is_err());
    }
}
