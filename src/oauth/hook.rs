//! The request hook of a connection to an OAuth-protected upstream: the configured headers,
//! and the principal's access token as `Authorization: Bearer`, renewed when due; a refused
//! request goes to the authorizer, which may renew the token for one retry.

use std::sync::Arc;

use futures::future::BoxFuture;
use http::{HeaderName, HeaderValue, header::AUTHORIZATION};

use super::{Authorizer, Grant, Rejection};
use crate::hook::{HookError, Prepared, RequestHeaders, RequestHook, StaticHeaders};

pub struct OAuthHook {
    authorizer: Arc<Authorizer>,
    grant: Arc<Grant>,
    headers: Arc<StaticHeaders>,
}

impl OAuthHook {
    pub fn new(
        authorizer: Arc<Authorizer>,
        grant: Arc<Grant>,
        headers: Vec<(HeaderName, HeaderValue)>,
    ) -> Arc<Self> {
        Arc::new(Self {
            authorizer,
            grant,
            headers: StaticHeaders::new(headers),
        })
    }
}

impl RequestHook for OAuthHook {
    fn prepare<'a>(&'a self, headers: &'a mut RequestHeaders) -> Prepared<'a> {
        self.headers.apply(headers);
        if let Some(token) = self.authorizer.current_token(&self.grant) {
            return Prepared::Ready(put_token(headers, &token));
        }
        if self.authorizer.has_no_token(&self.grant) {
            return Prepared::Ready(Ok(()));
        }
        Prepared::Later(Box::pin(async move {
            match self.authorizer.token(&self.grant).await {
                Some(token) => put_token(headers, &token),
                None => Ok(()),
            }
        }))
    }

    /// Only a token that was sent can be renewed (or, for the client credentials grant and a
    /// user's token to exchange, one can be asked for).
    fn retries(&self) -> bool {
        self.grant.token().is_some() || self.authorizer.renews_alone(&self.grant)
    }

    fn rejected<'a>(
        &'a self,
        status: u16,
        www_authenticate: Option<&'a str>,
        sent: &'a RequestHeaders,
    ) -> BoxFuture<'a, bool> {
        let sent_token = sent
            .get(&AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        let rejection = Rejection {
            status,
            www_authenticate,
            sent_token,
        };
        Box::pin(self.authorizer.rejected(&self.grant, rejection))
    }
}

/// Puts `token` on a request as `Authorization: Bearer`.
fn put_token(headers: &mut RequestHeaders, token: &str) -> Result<(), HookError> {
    let mut value = HeaderValue::from_str(&format!("Bearer {token}"))
        .map_err(|_| HookError("the access token is not a valid header value".into()))?;
    value.set_sensitive(true);
    headers.insert(AUTHORIZATION, value);
    Ok(())
}
