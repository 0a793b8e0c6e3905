//! `[upstreams.NAME.oauth.token_exchange]`: where Switchyard exchanges a user's own token (the
//! JWT they authenticated to the gateway with) for a token meant for the upstream (RFC 8693),
//! as written, as checked and as the runtime uses it.

use std::fmt;

use schemars::JsonSchema;
use serde::Deserialize;
use url::Url;

use super::{AuthMethod, keys::Checker, kinds::Expanded};

/// `[upstreams.NAME.oauth.token_exchange]`: the organisation's authorization server and
/// Switchyard's client there. (`Debug` hides the secret.)
#[derive(Clone, PartialEq)]
pub struct TokenExchangeSettings {
    /// Where tokens are exchanged: the token endpoint itself, or the issuer whose metadata
    /// names it.
    pub server: ExchangeServer,
    pub client_id: String,
    pub client_secret: Option<String>,
    /// `client_secret_basic`, `client_secret_post`, or `none`.
    pub auth_method: AuthMethod,
    /// The `audience` to ask for, where the server names the upstream so.
    pub audience: Option<String>,
    /// The `resource` to ask for; `None`: the upstream's (its resource metadata's, else its
    /// URL).
    pub resource: Option<String>,
    /// What kind of token the user's is (an RFC 8693 token type URI).
    pub subject_token_type: String,
}

/// The authorization server that exchanges tokens.
#[derive(Debug, Clone, PartialEq)]
pub enum ExchangeServer {
    /// Its issuer: the token endpoint is found in its metadata (RFC 8414, OpenID Connect).
    Issuer(Url),
    /// Its token endpoint, given.
    TokenEndpoint(Url),
}

impl fmt::Debug for TokenExchangeSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenExchangeSettings")
            .field("server", &self.server)
            .field("client_id", &self.client_id)
            .field("client_secret", &self.client_secret.as_ref().map(|_| "…"))
            .field("auth_method", &self.auth_method)
            .field("audience", &self.audience)
            .field("resource", &self.resource)
            .field("subject_token_type", &self.subject_token_type)
            .finish()
    }
}

/// `[upstreams.NAME.oauth.token_exchange]` as written.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[schemars(rename = "TokenExchange")]
pub struct RawTokenExchange {
    /// The authorization server's issuer; its metadata names the token endpoint (give this or
    /// `token_endpoint`).
    #[schemars(with = "Option<Expanded>")]
    pub issuer: Option<String>,
    /// The token endpoint, for a server that publishes no metadata (give this or `issuer`).
    #[schemars(with = "Option<Expanded>")]
    pub token_endpoint: Option<String>,
    /// Switchyard's client at that server (one allowed to exchange tokens).
    #[schemars(with = "Option<Expanded>")]
    pub client_id: Option<String>,
    /// The secret of `client_id`.
    #[schemars(with = "Option<Expanded>")]
    pub client_secret: Option<String>,
    /// How the client authenticates. Default: `client_secret_basic` with a secret, else
    /// `none`.
    #[schemars(extend("enum" = ["client_secret_basic", "client_secret_post", "none"]))]
    pub token_endpoint_auth_method: Option<String>,
    /// The `audience` to ask for (a name the server knows the upstream by). Default: none.
    #[schemars(with = "Option<Expanded>")]
    pub audience: Option<String>,
    /// The `resource` to ask for. Default: the upstream's resource (its protected resource
    /// metadata's `resource`, else its URL).
    #[schemars(with = "Option<Expanded>")]
    pub resource: Option<String>,
    /// What the user's token is, to the server: `access_token`, `jwt` or `id_token` (or a
    /// token type URI).
    #[schemars(extend("default" = "access_token"))]
    pub subject_token_type: Option<String>,
}

/// The RFC 8693 token type URI of a short name (`access_token`, `jwt`, `id_token`), or the
/// URI as given; `None` for anything else.
fn token_type(text: &str) -> Option<String> {
    const PREFIX: &str = "urn:ietf:params:oauth:token-type:";
    match text {
        "access_token" | "jwt" | "id_token" => Some(format!("{PREFIX}{text}")),
        uri if uri.starts_with("urn:") => Some(uri.to_owned()),
        _ => None,
    }
}

impl Checker<'_> {
    /// `key` is the upstream's (`upstreams.NAME`).
    pub(super) fn token_exchange(
        &mut self,
        key: &str,
        raw: &RawTokenExchange,
    ) -> Option<TokenExchangeSettings> {
        let at = |field: &str| format!("{key}.oauth.token_exchange.{field}");
        let mut text =
            |field: &str, value: Option<&String>| value.and_then(|v| self.expand(&at(field), v));
        let client_id = text("client_id", raw.client_id.as_ref());
        let client_secret = text("client_secret", raw.client_secret.as_ref());
        let audience = text("audience", raw.audience.as_ref());
        let resource = text("resource", raw.resource.as_ref());
        let server = match (&raw.issuer, &raw.token_endpoint) {
            (Some(_), Some(_)) => {
                self.problem(at("issuer"), "give `issuer` or `token_endpoint`, not both");
                None
            }
            (Some(issuer), None) => self.url(&at("issuer"), issuer).map(ExchangeServer::Issuer),
            (None, Some(endpoint)) => self
                .url(&at("token_endpoint"), endpoint)
                .map(ExchangeServer::TokenEndpoint),
            (None, None) => {
                self.problem(
                    at("issuer"),
                    "name the authorization server that exchanges tokens: `issuer` or \
                     `token_endpoint`",
                );
                None
            }
        };
        if client_id.is_none() {
            self.problem(
                at("client_id"),
                "the token exchange needs Switchyard's client at the authorization server",
            );
        }
        let auth_method = match raw.token_endpoint_auth_method.as_deref() {
            None if client_secret.is_some() => AuthMethod::ClientSecretBasic,
            None => AuthMethod::None,
            Some(text) => match AuthMethod::parse(text) {
                Some(method) if method != AuthMethod::PrivateKeyJwt => method,
                _ => {
                    self.problem(
                        at("token_endpoint_auth_method"),
                        format!(
                            "`{text}` is not one of `client_secret_basic`, \
                             `client_secret_post`, `none`"
                        ),
                    );
                    AuthMethod::None
                }
            },
        };
        let needs_secret = matches!(
            auth_method,
            AuthMethod::ClientSecretBasic | AuthMethod::ClientSecretPost
        );
        if needs_secret && client_secret.is_none() {
            self.problem(at("token_endpoint_auth_method"), "needs `client_secret`");
        }
        if auth_method == AuthMethod::None && client_secret.is_some() {
            self.problem(
                at("client_secret"),
                "is never sent with `token_endpoint_auth_method = \"none\"`",
            );
        }
        let kind = raw.subject_token_type.as_deref().unwrap_or("access_token");
        let subject_token_type = token_type(kind).unwrap_or_else(|| {
            self.problem(
                at("subject_token_type"),
                format!(
                    "`{kind}` is not one of `access_token`, `jwt`, `id_token`, nor a token \
                     type URI"
                ),
            );
            String::new()
        });
        Some(TokenExchangeSettings {
            server: server?,
            client_id: client_id?,
            client_secret,
            auth_method,
            audience,
            resource,
            subject_token_type,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::token_type;

    #[test]
    fn token_types_by_short_name_or_uri() {
        assert_eq!(
            token_type("jwt").as_deref(),
            Some("urn:ietf:params:oauth:token-type:jwt")
        );
        assert_eq!(
            token_type("urn:example:custom").as_deref(),
            Some("urn:example:custom")
        );
        assert_eq!(token_type("saml"), None);
    }
}
