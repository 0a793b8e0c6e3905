//! The token endpoint's answer as Switchyard reads it: the token response (forgiving an
//! `expires_in` given as a string), or why there is none; and how any answer of an
//! authorization server that cannot be read is told.
//!
//! A failure's text never quotes the answer — a 2xx answer holds the tokens themselves — only
//! what could not be read, or the OAuth `error` and `error_description` of a refusal. That text
//! reaches logs, `/healthz` and the user's browser.

use std::time::Duration;

use oauth2::{
    AccessToken, RefreshToken, RequestTokenError, Scope, TokenResponse,
    basic::{BasicErrorResponse, BasicTokenType},
};
use serde::{Deserialize, Deserializer, Serialize};

use super::OAuthError;

/// A token endpoint's answer (RFC 6749 §5.1): the standard one, except that `expires_in` may
/// also be a string of digits, as some servers send it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TokenAnswer {
    access_token: AccessToken,
    #[serde(deserialize_with = "oauth2::helpers::deserialize_untagged_enum_case_insensitive")]
    token_type: BasicTokenType,
    #[serde(default, deserialize_with = "lenient_seconds")]
    expires_in: Option<u64>,
    refresh_token: Option<RefreshToken>,
    #[serde(
        rename = "scope",
        default,
        deserialize_with = "oauth2::helpers::deserialize_space_delimited_vec",
        serialize_with = "oauth2::helpers::serialize_space_delimited_vec"
    )]
    scopes: Option<Vec<Scope>>,
    /// What a token exchange issued (RFC 8693 §2.2.1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    issued_token_type: Option<String>,
}

impl TokenAnswer {
    pub fn issued_token_type(&self) -> Option<&str> {
        self.issued_token_type.as_deref()
    }
}

impl TokenResponse for TokenAnswer {
    type TokenType = BasicTokenType;

    fn access_token(&self) -> &AccessToken {
        &self.access_token
    }

    fn token_type(&self) -> &BasicTokenType {
        &self.token_type
    }

    fn expires_in(&self) -> Option<Duration> {
        self.expires_in.map(Duration::from_secs)
    }

    fn refresh_token(&self) -> Option<&RefreshToken> {
        self.refresh_token.as_ref()
    }

    fn scopes(&self) -> Option<&Vec<Scope>> {
        self.scopes.as_ref()
    }
}

/// Seconds as a JSON number or a string of digits. (The error names no value: it may be
/// beside a token.)
fn lenient_seconds<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<u64>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Seconds {
        Number(u64),
        Text(String),
    }
    match Option::<Seconds>::deserialize(deserializer)? {
        None => Ok(None),
        Some(Seconds::Number(seconds)) => Ok(Some(seconds)),
        Some(Seconds::Text(text)) => text.trim().parse().map(Some).map_err(|_| {
            serde::de::Error::custom("neither a number of seconds nor a string of digits")
        }),
    }
}

/// The error of a failed token request: the server's OAuth error (`invalid_grant`, …) if it
/// sent one; else what went wrong, never quoting the answer.
pub fn token_error<E: std::error::Error + 'static>(
    error: RequestTokenError<E, BasicErrorResponse>,
) -> OAuthError {
    match error {
        RequestTokenError::ServerResponse(response) => OAuthError::Provider {
            error: response.error().to_string(),
            description: response.error_description().cloned(),
        },
        RequestTokenError::Request(error) => {
            OAuthError::Http(format!("the token request: {error}"))
        }
        RequestTokenError::Parse(error, body) => refusal_in(&body)
            .unwrap_or_else(|| OAuthError::Http(unreadable("the token endpoint's answer", &error))),
        RequestTokenError::Other(text) => OAuthError::Http(format!("the token request: {text}")),
    }
}

/// A token endpoint's answer read as the `oauth2` crate reads it: the token response of a
/// success, else the OAuth error (for requests that crate cannot make).
pub fn read_answer<E: std::error::Error + 'static>(
    response: oauth2::HttpResponse,
) -> Result<TokenAnswer, RequestTokenError<E, BasicErrorResponse>> {
    let body = response.body();
    if !response.status().is_success() {
        return Err(
            match serde_path_to_error::deserialize(&mut serde_json::Deserializer::from_slice(body))
            {
                Ok(error) => RequestTokenError::ServerResponse(error),
                Err(error) => RequestTokenError::Parse(error, body.clone()),
            },
        );
    }
    serde_path_to_error::deserialize(&mut serde_json::Deserializer::from_slice(body))
        .map_err(|error| RequestTokenError::Parse(error, body.clone()))
}

/// The OAuth error in an answer that did not parse as one in full (an `error_uri` that is not
/// a string, say): its `error` and `error_description` only.
fn refusal_in(body: &[u8]) -> Option<OAuthError> {
    let answer: serde_json::Value = serde_json::from_slice(body).ok()?;
    if answer.get("access_token").is_some() {
        return None;
    }
    let text = |name: &str| answer.get(name)?.as_str().map(str::to_owned);
    Some(OAuthError::Provider {
        error: text("error")?,
        description: text("error_description"),
    })
}

/// What in `answer` (an authorization server's JSON answer, named for the reader) could not be
/// read: the field, and what kind of problem, but not the value (serde's messages quote values,
/// and the value may be a token or a client secret).
pub fn unreadable(answer: &str, error: &serde_path_to_error::Error<serde_json::Error>) -> String {
    use serde_json::error::Category;
    let inner = error.inner();
    let what = match inner.classify() {
        Category::Io | Category::Syntax | Category::Eof => {
            return format!("{answer} is not JSON");
        }
        Category::Data => inner.to_string(),
    };
    // Of serde's data errors, only a missing field's names nothing but the field.
    let missing = what.starts_with("missing field `").then(|| {
        let field = what.trim_start_matches("missing field `");
        field.split('`').next().unwrap_or_default().to_owned()
    });
    match (missing, error.path().to_string()) {
        (Some(field), _) => format!("{answer} lacks `{field}`"),
        (None, path) if path == "." => {
            format!("{answer} is not a JSON object of the expected form")
        }
        (None, path) => format!("{answer} has an unusable `{path}`"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oauth::{
        fake_endpoint::FakeEndpoint,
        http::Http,
        token::{TokenEndpoint, TokenExchange, TokenSet, samples},
    };

    /// What a client credentials request to a token endpoint answering `status` with `body`
    /// (of `content_type`) comes to.
    async fn answer(
        status: u16,
        content_type: &'static str,
        body: &str,
    ) -> Result<TokenSet, OAuthError> {
        let server = FakeEndpoint::start_with(status, content_type, body).await;
        let endpoint = TokenEndpoint {
            url: server.url.clone(),
            ..samples::endpoint()
        };
        let exchange = TokenExchange {
            http: &Http::new(),
            endpoint: &endpoint,
            client: &samples::client(),
            private_key: None,
        };
        exchange.client_credentials(&[]).await
    }

    const JSON: &str = "application/json";

    #[tokio::test]
    async fn expires_in_may_be_a_string_of_digits() {
        let body = r#"{"access_token":"a","token_type":"bearer","expires_in":"3600"}"#;
        let token = answer(200, JSON, body).await.unwrap();
        assert_eq!(token.lifetime, Some(3600));
        let body = r#"{"access_token":"a","token_type":"Bearer","expires_in":60,"scope":"x y"}"#;
        let token = answer(200, JSON, body).await.unwrap();
        assert_eq!(token.lifetime, Some(60));
        assert_eq!(token.scopes, ["x", "y"]);
    }

    #[tokio::test]
    async fn errors_never_quote_the_answer() {
        let secret = "SECRET-TOKEN";
        let cases = [
            (
                200,
                JSON,
                format!(
                    r#"{{"access_token":"{secret}","token_type":"Bearer","expires_in":"soon"}}"#
                ),
                "`expires_in`",
            ),
            (
                200,
                JSON,
                format!(
                    r#"{{"access_token":"{secret}","token_type":"Bearer","expires_in":{{"a":1}}}}"#
                ),
                "`expires_in`",
            ),
            (
                200,
                JSON,
                format!(r#"{{"refresh_token":"{secret}","token_type":"Bearer"}}"#),
                "lacks `access_token`",
            ),
            (200, JSON, format!("not json {secret}"), "not JSON"),
            (
                503,
                "text/html",
                format!("<html>{secret}</html>"),
                "HTTP 503 Service Unavailable",
            ),
            (
                400,
                JSON,
                format!(
                    r#"{{"error":"invalid_grant","error_description":"expired","x":"{secret}"}}"#
                ),
                "invalid_grant: expired",
            ),
            (
                400,
                JSON,
                format!(r#"{{"error":"invalid_grant","error_uri":7,"x":"{secret}"}}"#),
                "invalid_grant",
            ),
        ];
        for (status, content_type, body, says) in cases {
            let error = answer(status, content_type, &body).await.unwrap_err();
            let text = error.to_string();
            assert!(!text.contains(secret), "{text}");
            assert!(text.contains(says), "{status} {body}: {text}");
        }
        let refused = r#"{"error":"invalid_grant","error_uri":7}"#;
        assert!(
            answer(400, JSON, refused)
                .await
                .unwrap_err()
                .is_invalid_grant()
        );
    }

    #[test]
    fn an_unreadable_answer_is_told_by_its_field_not_its_value() {
        #[derive(Debug, Deserialize)]
        struct Registered {
            #[allow(dead_code)]
            client_secret: String,
        }
        let mut reader = serde_json::Deserializer::from_str(r#"{"client_secret": 987654321}"#);
        let error = serde_path_to_error::deserialize::<_, Registered>(&mut reader).unwrap_err();
        assert_eq!(
            unreadable("the registration answer", &error),
            "the registration answer has an unusable `client_secret`"
        );
    }
}
