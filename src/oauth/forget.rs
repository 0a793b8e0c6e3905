//! Forgetting an upstream's tokens: revoked at the authorization server where it supports RFC
//! 7009, deleted from the store, and dropped from the grants (which then need authorization
//! again). Users forget their own; the operator (the admin API) anyone's.

use url::Url;

use super::{Authorizer, authorizer::principal_of, token::TokenSet, vault::RecordKind};
use crate::principal::Principal;

impl Authorizer {
    /// Revokes (where the server supports RFC 7009) and forgets every stored token of this
    /// upstream; how many principals had some.
    pub(super) async fn forget_all(&self) -> usize {
        let index = self.index().await;
        self.forget_principals(index).await
    }

    /// `forget_all` for `principal`'s tokens alone; whether they had some.
    pub(super) async fn forget_one(&self, principal: &Principal) -> bool {
        self.forget_principals(vec![principal.as_str().to_owned()])
            .await
            > 0
    }

    /// Forgets the tokens of the principals `index` lists (as the token index writes them).
    async fn forget_principals(&self, index: Vec<String>) -> usize {
        let mut forgotten = 0;
        for principal in index.iter().map(|p| principal_of(p)) {
            let grant = self.grant(&principal).await;
            // Held to the end: a refresh in flight would otherwise store its new tokens after
            // these are forgotten, and one waiting finds none to refresh.
            let _one = grant.renewing.lock().await;
            if let Some(token) = grant.token() {
                self.revoke(&token).await;
            }
            let key = self.store_key(&principal);
            if matches!(
                self.oauth.vault.delete(RecordKind::Tokens, &key).await,
                Ok(true)
            ) {
                forgotten += 1;
            }
            grant.clear_token();
        }
        // Only those forgotten leave the index: a principal that got tokens meanwhile stays.
        let unindexed = self
            .oauth
            .vault
            .remove_principals(self.upstream.as_str(), &index)
            .await;
        if let Err(error) = unindexed {
            tracing::warn!(%error, "cannot update the token index");
        }
        forgotten
    }

    /// Revokes the access and refresh tokens (RFC 7009), the client authenticating as it does
    /// at the token endpoint.
    async fn revoke(&self, token: &TokenSet) {
        let Some(url) = token
            .endpoint
            .revocation
            .as_deref()
            .and_then(|u| Url::parse(u).ok())
        else {
            return;
        };
        let mut revocations = vec![(&token.access_token, "access_token")];
        if let Some(refresh) = &token.refresh_token {
            revocations.push((refresh, "refresh_token"));
        }
        let exchange = self.exchange(&token.endpoint, &token.client);
        for (value, hint) in revocations {
            // Made anew for each request: a client assertion is good for one use.
            let client = match exchange.client_authentication() {
                Ok(client) => client,
                Err(error) => {
                    tracing::warn!(upstream = %self.upstream, %error, "cannot revoke the tokens");
                    return;
                }
            };
            let mut form = vec![("token", value.as_str()), ("token_type_hint", hint)];
            form.extend(
                client
                    .form
                    .iter()
                    .map(|(name, value)| (*name, value.as_str())),
            );
            let sent = self
                .oauth
                .http
                .post_form(&url, &form, client.basic.as_deref())
                .await;
            if let Err(error) = sent {
                tracing::warn!(upstream = %self.upstream, %error, "token revocation failed");
            }
        }
    }
}
