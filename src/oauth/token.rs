//! The token endpoint: exchanging an authorization code (with its PKCE verifier), refreshing,
//! and the client credentials grant, always with the RFC 8707 resource indicator (the grants
//! the `oauth2` crate does not make are in `extension_grants`). Clients authenticate as
//! registered: `client_secret_basic`, `client_secret_post`, `none`, or `private_key_jwt` (RFC
//! 7523: a short-lived assertion signed with the configured key, its audience the
//! authorization server's issuer).
//!
//! The result is a `TokenSet` that carries everything a later refresh needs (endpoint, client,
//! resource), so that tokens read back from the store refresh without a new discovery.

use std::{fmt, time::Duration};

use base64::{Engine, engine::general_purpose::STANDARD};
use oauth2::{
    AuthType, AuthorizationCode, Client, ClientId, ClientSecret, EndpointNotSet, EndpointSet,
    PkceCodeVerifier, RedirectUrl, RefreshToken, RequestTokenError, Scope, StandardRevocableToken,
    TokenResponse, TokenUrl,
    basic::{BasicErrorResponse, BasicRevocationErrorResponse, BasicTokenIntrospectionResponse},
};
use serde::{Deserialize, Serialize};

use super::{
    OAuthError,
    answer::{TokenAnswer, token_error},
    http::Http,
};
use crate::config::{AuthMethod, PrivateKey};

/// How Switchyard is known to one authorization server. (`Debug` hides the secret.)
#[derive(Clone, Serialize, Deserialize)]
pub struct ClientIdentity {
    pub client_id: String,
    pub client_secret: Option<String>,
    #[serde(with = "auth_method")]
    pub auth_method: AuthMethod,
}

/// Where tokens for one resource come from.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TokenEndpoint {
    pub url: String,
    /// The authorization server's issuer (the audience of client assertions).
    pub issuer: String,
    /// The resource indicator, sent on every token request.
    pub resource: Option<String>,
    pub revocation: Option<String>,
}

/// Tokens for one (upstream, principal), with what refreshing them takes. (`Debug` hides the
/// tokens.)
#[derive(Clone, Serialize, Deserialize)]
pub struct TokenSet {
    pub access_token: String,
    pub refresh_token: Option<String>,
    /// Seconds since the epoch.
    pub expires_at: Option<u64>,
    /// The lifetime the server gave, in seconds.
    pub lifetime: Option<u64>,
    /// The scopes asked for (what was granted, where the server said).
    pub scopes: Vec<String>,
    pub endpoint: TokenEndpoint,
    pub client: ClientIdentity,
}

impl fmt::Debug for ClientIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientIdentity")
            .field("client_id", &self.client_id)
            .field("client_secret", &self.client_secret.as_ref().map(|_| "…"))
            .field("auth_method", &self.auth_method)
            .finish()
    }
}

impl fmt::Debug for TokenSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenSet")
            .field("access_token", &"…")
            .field("refresh_token", &self.refresh_token.as_ref().map(|_| "…"))
            .field("expires_at", &self.expires_at)
            .field("lifetime", &self.lifetime)
            .field("scopes", &self.scopes)
            .field("endpoint", &self.endpoint)
            .field("client", &self.client)
            .finish()
    }
}

/// The longest time before expiry at which a token is refreshed.
const MAX_REFRESH_MARGIN: Duration = Duration::from_secs(60);

impl TokenSet {
    /// Whether the token should be refreshed now: within a quarter of its lifetime (at most a
    /// minute) of expiring.
    pub fn is_due(&self) -> bool {
        let Some(expires_at) = self.expires_at else {
            return false;
        };
        let lifetime = Duration::from_secs(self.lifetime.unwrap_or(0));
        let margin = (lifetime / 4).min(MAX_REFRESH_MARGIN);
        now() + margin.as_secs() >= expires_at
    }

    pub fn is_expired(&self) -> bool {
        self.expires_at.is_some_and(|at| now() >= at)
    }
}

pub use crate::clock::now_seconds as now;

/// `oauth2`'s client with Switchyard's token answer, before (`EndpointNotSet`) and after its
/// token URL is set.
type OAuthClient<HasTokenUrl = EndpointNotSet> = Client<
    BasicErrorResponse,
    TokenAnswer,
    BasicTokenIntrospectionResponse,
    StandardRevocableToken,
    BasicRevocationErrorResponse,
    EndpointNotSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointNotSet,
    HasTokenUrl,
>;
type TokenClient = OAuthClient<EndpointSet>;

/// A client's credentials for one request, besides the token endpoint's.
pub struct ClientAuthentication {
    /// The `Authorization` header's value, for `client_secret_basic`.
    pub basic: Option<String>,
    /// Form fields: `client_id`, and a secret or an assertion.
    pub form: Vec<(&'static str, String)>,
}

/// One client at one token endpoint.
pub struct TokenExchange<'a> {
    pub http: &'a Http,
    pub endpoint: &'a TokenEndpoint,
    pub client: &'a ClientIdentity,
    pub private_key: Option<&'a PrivateKey>,
}

impl TokenExchange<'_> {
    /// Redeems an authorization code.
    pub async fn code(
        &self,
        code: String,
        verifier: String,
        redirect_uri: &str,
        scopes: &[String],
    ) -> Result<TokenSet, OAuthError> {
        let redirect = RedirectUrl::new(redirect_uri.to_owned())
            .map_err(|e| OAuthError::Config(format!("redirect URI: {e}")))?;
        let client = self.oauth_client()?.set_redirect_uri(redirect);
        let mut request = client
            .exchange_code(AuthorizationCode::new(code))
            .set_pkce_verifier(PkceCodeVerifier::new(verifier));
        for (name, value) in self.extra_params()? {
            request = request.add_extra_param(name, value);
        }
        let response = request.request_async(&|r| self.http.oauth2(r)).await;
        self.token_set(response, scopes, None)
    }

    /// Exchanges `refresh_token` for fresh tokens; a server that does not rotate it leaves the
    /// old one in use.
    pub async fn refresh(
        &self,
        refresh_token: &str,
        scopes: &[String],
    ) -> Result<TokenSet, OAuthError> {
        let client = self.oauth_client()?;
        let token = RefreshToken::new(refresh_token.to_owned());
        let mut request = client.exchange_refresh_token(&token);
        for (name, value) in self.extra_params()? {
            request = request.add_extra_param(name, value);
        }
        let response = request.request_async(&|r| self.http.oauth2(r)).await;
        self.token_set(response, scopes, Some(refresh_token))
    }

    /// The client credentials grant.
    pub async fn client_credentials(&self, scopes: &[String]) -> Result<TokenSet, OAuthError> {
        let client = self.oauth_client()?;
        let mut request = client
            .exchange_client_credentials()
            .add_scopes(scopes.iter().cloned().map(Scope::new));
        for (name, value) in self.extra_params()? {
            request = request.add_extra_param(name, value);
        }
        let response = request.request_async(&|r| self.http.oauth2(r)).await;
        self.token_set(response, scopes, None)
    }

    fn oauth_client(&self) -> Result<TokenClient, OAuthError> {
        let url = TokenUrl::new(self.endpoint.url.clone())
            .map_err(|e| OAuthError::Discovery(format!("token endpoint: {e}")))?;
        let mut client = <OAuthClient>::new(ClientId::new(self.client.client_id.clone()))
            .set_token_uri(url)
            .set_auth_type(match self.client.auth_method {
                AuthMethod::ClientSecretBasic => AuthType::BasicAuth,
                _ => AuthType::RequestBody,
            });
        let sends_secret = matches!(
            self.client.auth_method,
            AuthMethod::ClientSecretBasic | AuthMethod::ClientSecretPost
        );
        if sends_secret && let Some(secret) = &self.client.client_secret {
            client = client.set_client_secret(ClientSecret::new(secret.clone()));
        }
        Ok(client)
    }

    /// The resource indicator, and the client assertion if the client uses one.
    fn extra_params(&self) -> Result<Vec<(&'static str, String)>, OAuthError> {
        let mut params = Vec::new();
        if let Some(resource) = &self.endpoint.resource {
            params.push(("resource", resource.clone()));
        }
        params.extend(self.assertion_params()?);
        Ok(params)
    }

    /// For `private_key_jwt`, a fresh client assertion; nothing for other methods.
    fn assertion_params(&self) -> Result<Vec<(&'static str, String)>, OAuthError> {
        if self.client.auth_method != AuthMethod::PrivateKeyJwt {
            return Ok(Vec::new());
        }
        let key = self
            .private_key
            .ok_or_else(|| OAuthError::Config("private_key_jwt needs a private key".into()))?;
        Ok(vec![
            (
                "client_assertion_type",
                "urn:ietf:params:oauth:client-assertion-type:jwt-bearer".into(),
            ),
            ("client_assertion", self.assertion(key)?),
        ])
    }

    /// How this client authenticates at the authorization server's other endpoints
    /// (revocation, RFC 7009 §2.1): as `oauth_client` and `oauth2` do at the token endpoint.
    /// A secret goes in `Authorization: Basic` for `client_secret_basic` (id and secret each
    /// form-encoded first, RFC 6749 §2.3.1), else in the form for `client_secret_post`; an
    /// assertion for `private_key_jwt`; the form names the client wherever Basic does not.
    pub fn client_authentication(&self) -> Result<ClientAuthentication, OAuthError> {
        let secret = self.client.client_secret.as_deref();
        let basic = match (self.client.auth_method, secret) {
            (AuthMethod::ClientSecretBasic, Some(secret)) => {
                let encode = |text: &str| -> String {
                    url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
                };
                let pair = format!("{}:{}", encode(&self.client.client_id), encode(secret));
                Some(format!("Basic {}", STANDARD.encode(pair)))
            }
            _ => None,
        };
        let mut form = Vec::new();
        if basic.is_none() {
            form.push(("client_id", self.client.client_id.clone()));
        }
        if let (AuthMethod::ClientSecretPost, Some(secret)) = (self.client.auth_method, secret) {
            form.push(("client_secret", secret.to_owned()));
        }
        form.extend(self.assertion_params()?);
        Ok(ClientAuthentication { basic, form })
    }

    /// An RFC 7523 client assertion: issued by and about the client, for the issuer, valid for
    /// five minutes, never reused.
    fn assertion(&self, key: &PrivateKey) -> Result<String, OAuthError> {
        #[derive(Serialize)]
        struct Claims<'a> {
            iss: &'a str,
            sub: &'a str,
            aud: &'a str,
            iat: u64,
            exp: u64,
            jti: String,
        }
        let issued = now();
        let claims = Claims {
            iss: &self.client.client_id,
            sub: &self.client.client_id,
            aud: &self.endpoint.issuer,
            iat: issued,
            exp: issued + 300,
            jti: uuid::Uuid::new_v4().to_string(),
        };
        let header = jsonwebtoken::Header::new(key.algorithm);
        let signing = key
            .encoding_key()
            .map_err(|e| OAuthError::Config(format!("the private key: {e}")))?;
        jsonwebtoken::encode(&header, &claims, &signing)
            .map_err(|e| OAuthError::Config(format!("signing the client assertion: {e}")))
    }

    pub(super) fn token_set<E: std::error::Error + 'static>(
        &self,
        response: Result<TokenAnswer, RequestTokenError<E, BasicErrorResponse>>,
        asked: &[String],
        previous_refresh: Option<&str>,
    ) -> Result<TokenSet, OAuthError> {
        let response = response.map_err(token_error)?;
        let lifetime = response.expires_in().map(|d| d.as_secs());
        let scopes = match response.scopes() {
            Some(granted) => granted.iter().map(|s| s.to_string()).collect(),
            None => asked.to_vec(),
        };
        Ok(TokenSet {
            access_token: response.access_token().secret().clone(),
            refresh_token: response
                .refresh_token()
                .map(|t| t.secret().clone())
                .or_else(|| previous_refresh.map(str::to_owned)),
            expires_at: lifetime.map(|secs| now() + secs),
            lifetime,
            scopes,
            endpoint: self.endpoint.clone(),
            client: self.client.clone(),
        })
    }
}

/// `AuthMethod` by its registered name.
mod auth_method {
    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    use crate::config::AuthMethod;

    pub fn serialize<S: Serializer>(method: &AuthMethod, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(method.as_str())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<AuthMethod, D::Error> {
        let text = String::deserialize(d)?;
        AuthMethod::parse(&text).ok_or_else(|| D::Error::custom(format!("unknown method {text}")))
    }
}

/// Made-up values for unit tests.
#[cfg(test)]
pub mod samples {
    use super::*;

    pub fn endpoint() -> TokenEndpoint {
        TokenEndpoint {
            url: "https://as.example.com/token".into(),
            issuer: "https://as.example.com".into(),
            resource: Some("https://files.example.com/mcp".into()),
            revocation: None,
        }
    }

    pub fn client() -> ClientIdentity {
        ClientIdentity {
            client_id: "switchyard".into(),
            client_secret: None,
            auth_method: AuthMethod::None,
        }
    }

    /// A token `access`, expiring in `expires_in` seconds (if ever).
    pub fn token(access: &str, expires_in: Option<u64>) -> TokenSet {
        TokenSet {
            access_token: access.into(),
            refresh_token: None,
            expires_at: expires_in.map(|s| now() + s),
            lifetime: expires_in,
            scopes: Vec::new(),
            endpoint: endpoint(),
            client: client(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(expires_in: Option<u64>) -> TokenSet {
        samples::token("a", expires_in)
    }

    #[test]
    fn refresh_is_due_within_a_quarter_of_the_lifetime_capped_at_a_minute() {
        assert!(!token(None).is_due());
        assert!(!token(Some(3600)).is_due());
        assert!(!token(Some(20)).is_due());
        let mut short = token(Some(20));
        short.expires_at = Some(now() + 4);
        assert!(short.is_due(), "5 s margin on a 20 s token");
        let mut long = token(Some(3600));
        long.expires_at = Some(now() + 59);
        assert!(long.is_due(), "at most a minute");
    }

    #[test]
    fn debug_output_hides_secrets_and_tokens() {
        let mut token = token(Some(60));
        token.access_token = "access-SECRET".into();
        token.refresh_token = Some("refresh-SECRET".into());
        token.client.client_secret = Some("client-SECRET".into());
        let shown = format!("{token:?}");
        assert!(!shown.contains("SECRET"), "{shown}");
        assert!(shown.contains("switchyard"), "{shown}");
    }
}
