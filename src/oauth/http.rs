//! HTTP towards authorization servers: metadata documents (JSON, same-origin redirects only) and
//! the token and registration endpoints (no redirects), each with a timeout and a size limit;
//! and the adapter through which the `oauth2` crate sends its requests.
//!
//! A client that cannot be built with its redirect policy is never replaced by one with
//! another: every request through it fails, saying why.

use std::{future::Future, time::Duration};

use serde::de::DeserializeOwned;
use url::Url;

use super::OAuthError;

const TIMEOUT: Duration = Duration::from_secs(30);
/// The largest response read from an authorization server.
const MAX_BODY: usize = 1024 * 1024;
const MAX_REDIRECTS: usize = 5;

#[derive(Clone)]
pub struct Http {
    /// Metadata: follows redirects within one origin.
    metadata: Built,
    /// Token, registration and revocation endpoints, and the authorization step: no redirects.
    direct: Built,
}

/// A client, or why it could not be built.
type Built = Result<reqwest::Client, String>;

/// A failed request, as the `oauth2` crate wants its HTTP client's errors.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct HttpFailure(String);

impl Http {
    pub fn new() -> Self {
        let same_origin = reqwest::redirect::Policy::custom(|attempt| {
            let same = attempt
                .previous()
                .last()
                .is_some_and(|from| from.origin() == attempt.url().origin());
            if attempt.previous().len() > MAX_REDIRECTS || !same {
                attempt.stop()
            } else {
                attempt.follow()
            }
        });
        let build = |policy| {
            reqwest::Client::builder()
                .timeout(TIMEOUT)
                .redirect(policy)
                .build()
                .map_err(|error| {
                    tracing::error!(%error, "cannot make the HTTP client for authorization servers; OAuth will fail");
                    format!("no HTTP client for authorization servers: {error}")
                })
        };
        Self {
            metadata: build(same_origin),
            direct: build(reqwest::redirect::Policy::none()),
        }
    }

    /// The JSON document at `url`, or `None` if the server has none there (any non-2xx answer).
    pub async fn get_json<T: DeserializeOwned>(&self, url: &Url) -> Result<Option<T>, OAuthError> {
        let response = client(&self.metadata)?
            .get(url.clone())
            .header(http::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|e| OAuthError::Http(format!("GET {url}: {e}")))?;
        if !response.status().is_success() {
            tracing::debug!(%url, status = %response.status(), "no metadata here");
            return Ok(None);
        }
        let body = limited_body(response)
            .await
            .map_err(|e| OAuthError::Http(format!("GET {url}: {e}")))?;
        match serde_json::from_slice(&body) {
            Ok(document) => Ok(Some(document)),
            Err(error) => {
                tracing::debug!(%url, %error, "not a metadata document");
                Ok(None)
            }
        }
    }

    /// POSTs `body` as JSON (dynamic client registration); the answer's status and body.
    pub async fn post_json(
        &self,
        url: &Url,
        body: &serde_json::Value,
    ) -> Result<(reqwest::StatusCode, Vec<u8>), OAuthError> {
        let response = client(&self.direct)?
            .post(url.clone())
            .json(body)
            .send()
            .await
            .map_err(|e| OAuthError::Http(format!("POST {url}: {e}")))?;
        let status = response.status();
        let body = limited_body(response)
            .await
            .map_err(|e| OAuthError::Http(format!("POST {url}: {e}")))?;
        Ok((status, body))
    }

    /// POSTs a form (token revocation), with an `Authorization` header if one is given; the
    /// answer's status.
    pub async fn post_form(
        &self,
        url: &Url,
        form: &[(&str, &str)],
        authorization: Option<&str>,
    ) -> Result<reqwest::StatusCode, OAuthError> {
        let mut request = client(&self.direct)?.post(url.clone()).form(form);
        if let Some(authorization) = authorization {
            request = request.header(http::header::AUTHORIZATION, authorization);
        }
        let response = request
            .send()
            .await
            .map_err(|e| OAuthError::Http(format!("POST {url}: {e}")))?;
        Ok(response.status())
    }

    /// Sends one request for the `oauth2` crate (token endpoint requests).
    pub fn oauth2(
        &self,
        request: oauth2::HttpRequest,
    ) -> impl Future<Output = Result<oauth2::HttpResponse, HttpFailure>> + Send + 'static {
        let client = self.direct.clone();
        async move {
            let client = client.map_err(HttpFailure)?;
            let (parts, body) = request.into_parts();
            let response = client
                .request(parts.method, parts.uri.to_string())
                .headers(parts.headers)
                .body(body)
                .send()
                .await
                .map_err(|e| HttpFailure(e.to_string()))?;
            let status = response.status();
            let mut answer = http::Response::builder().status(status);
            for (name, value) in response.headers() {
                answer = answer.header(name, value);
            }
            let body = limited_body(response)
                .await
                .map_err(|e| HttpFailure(e.to_string()))?;
            if !status.is_success() && !is_oauth_error(&body) {
                // A proxy's error page, say: its status is all that can be told of it.
                return Err(HttpFailure(format!(
                    "the token endpoint answered HTTP {status}"
                )));
            }
            answer.body(body).map_err(|e| HttpFailure(e.to_string()))
        }
    }
}

impl Default for Http {
    fn default() -> Self {
        Self::new()
    }
}

fn client(built: &Built) -> Result<&reqwest::Client, OAuthError> {
    built
        .as_ref()
        .map_err(|reason| OAuthError::Http(reason.clone()))
}

/// Whether `body` is an OAuth error answer (RFC 6749 §5.2): a JSON object with an `error`.
fn is_oauth_error(body: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(body).is_ok_and(|answer| {
        answer
            .get("error")
            .is_some_and(serde_json::Value::is_string)
    })
}

async fn limited_body(mut response: reqwest::Response) -> Result<Vec<u8>, String> {
    let too_large = || format!("the answer is larger than {MAX_BODY} bytes");
    if response
        .content_length()
        .is_some_and(|n| n as usize > MAX_BODY)
    {
        return Err(too_large());
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| e.to_string())? {
        if body.len() + chunk.len() > MAX_BODY {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn without_its_client_every_request_fails_saying_why() {
        let broken = Http {
            metadata: Err("no client: the reason".into()),
            direct: Err("no client: the reason".into()),
        };
        let url = Url::parse("http://127.0.0.1:1/x").unwrap();
        let says = |error: OAuthError| assert_eq!(error.to_string(), "no client: the reason");
        says(
            broken
                .get_json::<serde_json::Value>(&url)
                .await
                .unwrap_err(),
        );
        says(broken.post_form(&url, &[], None).await.unwrap_err());
        says(
            broken
                .post_json(&url, &serde_json::json!({}))
                .await
                .unwrap_err(),
        );
        let request = http::Request::builder()
            .uri("http://127.0.0.1:1/token")
            .body(Vec::new())
            .unwrap();
        let failure = broken.oauth2(request).await.unwrap_err();
        assert_eq!(failure.to_string(), "no client: the reason");
    }
}
