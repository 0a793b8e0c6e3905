//! Token requests of the grants the `oauth2` crate does not make, written as it writes the
//! others (the client authenticated as registered, the answer read as a token response):
//!
//! - the token exchange (RFC 8693): a user's own token for an access token of the upstream,
//!   or for an identity assertion grant (ID-JAG) to present to the upstream's server;
//! - the JWT bearer grant (RFC 7523 §2.1): such an assertion for an access token.

use oauth2::RequestTokenError;

use super::{
    OAuthError,
    answer::{TokenAnswer, read_answer},
    token::{TokenExchange, TokenSet},
};

const TOKEN_EXCHANGE_GRANT: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
const JWT_BEARER_GRANT: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";
/// The token type URI of an access token (RFC 8693 §3).
pub const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";
/// The token type URI of an identity assertion JWT authorization grant.
pub const ID_JAG_TYPE: &str = "urn:ietf:params:oauth:token-type:id-jag";

/// What a token exchange asks for.
pub struct Exchange<'a> {
    /// The user's own token, and its type URI.
    pub subject: &'a str,
    pub subject_type: &'a str,
    /// `ACCESS_TOKEN_TYPE` or `ID_JAG_TYPE`.
    pub requested_type: &'static str,
    pub audience: Option<&'a str>,
    pub scopes: &'a [String],
}

impl TokenExchange<'_> {
    /// The token exchange grant at this endpoint (with its `resource`): what `exchange` asks
    /// for, or why not. An answer of another type than the one asked for is refused.
    pub async fn exchange_token(&self, exchange: Exchange<'_>) -> Result<TokenSet, OAuthError> {
        let mut form = vec![
            ("grant_type", TOKEN_EXCHANGE_GRANT.to_owned()),
            ("subject_token", exchange.subject.to_owned()),
            ("subject_token_type", exchange.subject_type.to_owned()),
            ("requested_token_type", exchange.requested_type.to_owned()),
        ];
        if let Some(audience) = exchange.audience {
            form.push(("audience", audience.to_owned()));
        }
        self.grant(form, exchange.scopes, exchange.requested_type)
            .await
    }

    /// The JWT bearer grant: `assertion` (an ID-JAG) for an access token.
    pub async fn jwt_bearer(
        &self,
        assertion: &str,
        scopes: &[String],
    ) -> Result<TokenSet, OAuthError> {
        let form = vec![
            ("grant_type", JWT_BEARER_GRANT.to_owned()),
            ("assertion", assertion.to_owned()),
        ];
        self.grant(form, scopes, ACCESS_TOKEN_TYPE).await
    }

    /// POSTs the grant's `form`, with the resource, `scopes` and the client's credentials; the
    /// token it gives, which must be of type `issued` where the answer says.
    async fn grant(
        &self,
        mut form: Vec<(&'static str, String)>,
        scopes: &[String],
        issued: &str,
    ) -> Result<TokenSet, OAuthError> {
        let client = self.client_authentication()?;
        if let Some(resource) = &self.endpoint.resource {
            form.push(("resource", resource.clone()));
        }
        if !scopes.is_empty() {
            form.push(("scope", scopes.join(" ")));
        }
        form.extend(client.form);
        let body = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(&form)
            .finish();
        let mut request = http::Request::post(&self.endpoint.url)
            .header(
                http::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .header(http::header::ACCEPT, "application/json");
        if let Some(basic) = client.basic {
            request = request.header(http::header::AUTHORIZATION, basic);
        }
        let request = request
            .body(body.into_bytes())
            .map_err(|e| OAuthError::Discovery(format!("token endpoint: {e}")))?;
        let answer: Result<TokenAnswer, _> = match self.http.oauth2(request).await {
            Ok(response) => read_answer(response),
            Err(failure) => Err(RequestTokenError::Request(failure)),
        };
        if let Ok(answer) = &answer {
            let got = answer.issued_token_type().unwrap_or(ACCESS_TOKEN_TYPE);
            if got != issued {
                return Err(OAuthError::Http(format!(
                    "the token endpoint issued a token of type `{got}`, not `{issued}`"
                )));
            }
        }
        self.token_set(answer, scopes, None)
    }
}
