//! Forgetting an upstream's tokens: revoked at the authorization server where it supports RFC
//! 7009, deleted from the store, and dropped from the grants (which then need authorization
//! again).

use url::Url;

use super::{
    Authorizer,
    authorizer::{Index, principal_of},
    store::Kind,
    token::TokenSet,
};
use crate::config::AuthMethod;

impl Authorizer {
    /// Revokes (where the server supports RFC 7009) and forgets every stored token of this
    /// upstream; how many principals had some.
    pub(super) async fn forget_all(&self) -> usize {
        let index = self.index();
        let mut forgotten = 0;
        for principal in index.principals.iter().map(|p| principal_of(p)) {
            let grant = self.grant(&principal);
            if let Some(token) = grant.token() {
                self.revoke(&token).await;
            }
            let key = self.store_key(&principal);
            if matches!(self.oauth.store.delete(Kind::Tokens, &key), Ok(true)) {
                forgotten += 1;
            }
            grant.clear_token();
        }
        // Only those forgotten leave the index: a principal that got tokens meanwhile stays.
        let unindexed = self.oauth.store.update(
            Kind::Index,
            self.upstream.as_str(),
            |stored: &mut Option<Index>| {
                let Some(kept) = stored else {
                    return false;
                };
                kept.principals.retain(|p| !index.principals.contains(p));
                if kept.principals.is_empty() {
                    *stored = None;
                }
                true
            },
        );
        if let Err(error) = unindexed {
            tracing::warn!(%error, "cannot update the token index");
        }
        forgotten
    }

    async fn revoke(&self, token: &TokenSet) {
        let Some(url) = token
            .endpoint
            .revocation
            .as_deref()
            .and_then(|u| Url::parse(u).ok())
        else {
            return;
        };
        let client = &token.client;
        let basic = match (&client.client_secret, client.auth_method) {
            (Some(secret), AuthMethod::ClientSecretBasic) => {
                Some((client.client_id.as_str(), secret.as_str()))
            }
            _ => None,
        };
        let revoke = |value: &str, hint: &str| {
            let mut form = vec![
                ("token", value.to_owned()),
                ("token_type_hint", hint.to_owned()),
            ];
            if basic.is_none() {
                form.push(("client_id", client.client_id.clone()));
            }
            form
        };
        let mut forms = vec![revoke(&token.access_token, "access_token")];
        if let Some(refresh) = &token.refresh_token {
            forms.push(revoke(refresh, "refresh_token"));
        }
        for form in forms {
            let form: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
            if let Err(error) = self.oauth.http.post_form(&url, &form, basic).await {
                tracing::warn!(upstream = %self.upstream, %error, "token revocation failed");
            }
        }
    }
}
