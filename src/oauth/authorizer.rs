//! One upstream's authorizations: a grant per principal, the token each request carries, what
//! a 401 or 403 from the upstream means, and the authorization links users follow.
//!
//! - A request takes the grant's token, refreshing it first when it is due (a quarter of its
//!   lifetime, at most a minute, before expiry).
//! - A 401 for a token that was sent renews it once (refresh, or for the client credentials
//!   grant a new token) and the request is retried once; failing that, or with no token to
//!   renew, a user must authorize.
//! - A 403 `insufficient_scope` asks for the scopes held plus those the upstream names (step
//!   up); if it names only scopes already held, there is nothing more to ask for, and the grant
//!   fails.

use std::{
    sync::Arc,
    time::{Instant, SystemTime},
};

use dashmap::DashMap;
use oauth2::{
    AuthUrl, ClientId, CsrfToken, PkceCodeChallenge, RedirectUrl, Scope, basic::BasicClient,
};
use serde::{Deserialize, Serialize};
use url::Url;

use super::{
    CallbackQuery, OAuth, OAuthError,
    challenge::Challenge,
    discovery::{self, Discovered},
    grant::{Grant, Link, Need},
    identity,
    pending::PendingAuthorization,
    store::Kind,
    token::{Exchange, TokenEndpoint, TokenSet},
};
use crate::{
    config::{GrantKind, UpstreamOAuth},
    names::UpstreamName,
    principal::Principal,
    upstream::escape_for_display,
};

/// An upstream refused a request: its status, its `WWW-Authenticate`, and the access token the
/// request carried, if any.
#[derive(Debug, Clone, Copy)]
pub struct Rejection<'a> {
    pub status: u16,
    pub www_authenticate: Option<&'a str>,
    pub sent_token: Option<&'a str>,
}

/// The principals of one upstream that have stored tokens (so they can all be forgotten).
#[derive(Debug, Default, Serialize, Deserialize)]
struct Index {
    principals: Vec<String>,
}

pub struct Authorizer {
    oauth: Arc<OAuth>,
    upstream: UpstreamName,
    url: Url,
    config: UpstreamOAuth,
    /// The last discovery, which the client credentials grant reuses.
    discovered: tokio::sync::Mutex<Option<Arc<Discovered>>>,
    grants: DashMap<Principal, Arc<Grant>>,
}

impl Authorizer {
    pub(super) fn new(
        oauth: Arc<OAuth>,
        upstream: UpstreamName,
        url: Url,
        config: UpstreamOAuth,
    ) -> Self {
        Self {
            oauth,
            upstream,
            url,
            config,
            discovered: tokio::sync::Mutex::new(None),
            grants: DashMap::new(),
        }
    }

    pub fn upstream(&self) -> &UpstreamName {
        &self.upstream
    }

    /// The grant of `principal`, with its stored tokens.
    pub fn grant(&self, principal: &Principal) -> Arc<Grant> {
        if let Some(grant) = self.grants.get(principal) {
            return grant.clone();
        }
        self.grants
            .entry(principal.clone())
            .or_insert_with(|| Arc::new(Grant::new(principal.clone(), self.load(principal))))
            .clone()
    }

    /// The access token for a request now: renewed first if due, acquired first for the client
    /// credentials grant; `None` if there is none (the request then meets a 401).
    pub async fn token(&self, grant: &Grant) -> Option<String> {
        match grant.token() {
            Some(token) if !token.is_due() => Some(token.access_token.clone()),
            Some(token) if token.refresh_token.is_none() && !self.is_machine() => {
                // Nothing to renew it with: use it while it lasts.
                (!token.is_expired()).then(|| token.access_token.clone())
            }
            Some(token) => self.renew(grant, Some(&token.access_token)).await,
            None if self.is_machine() => self.renew(grant, None).await,
            None => None,
        }
    }

    /// What to do about a refused request; true if it should be sent again (once) because
    /// there is a new token.
    pub async fn rejected(&self, grant: &Grant, rejection: Rejection<'_>) -> bool {
        let challenge = rejection.www_authenticate.and_then(Challenge::parse);
        match rejection.status {
            401 => {
                if (rejection.sent_token.is_some() || self.is_machine())
                    && self.renew(grant, rejection.sent_token).await.is_some()
                {
                    return true;
                }
                if !self.is_machine() {
                    if grant.token().is_some() {
                        self.drop_token(grant);
                    }
                    grant.require_authorization(challenge, None);
                }
                false
            }
            403 if challenge
                .as_ref()
                .is_some_and(Challenge::is_insufficient_scope) =>
            {
                self.step_up(grant, challenge.expect("checked")).await
            }
            _ => false,
        }
    }

    async fn step_up(&self, grant: &Grant, challenge: Challenge) -> bool {
        let required = split_scopes(challenge.scope.as_deref());
        let held = grant.token().map(|t| t.scopes.clone()).unwrap_or_default();
        if required.iter().all(|scope| held.contains(scope)) {
            grant.fail(format!(
                "the upstream refuses the token for lack of scope `{}`, which it already has",
                required.join(" ")
            ));
            return false;
        }
        let mut scopes = held;
        for scope in required {
            if !scopes.contains(&scope) {
                scopes.push(scope);
            }
        }
        if self.is_machine() {
            let _one = grant.renewing.lock().await;
            return match self.client_credentials(Some(scopes)).await {
                Ok(token) => {
                    self.keep(grant, token);
                    true
                }
                Err(error) => {
                    grant.fail(escape_for_display(&error.to_string()));
                    false
                }
            };
        }
        grant.require_authorization(Some(challenge), Some(scopes));
        false
    }

    /// Replaces the token `stale` (`None`: there is none) once for every waiter: by refreshing
    /// it, or for the client credentials grant by asking again. `None` if that fails.
    async fn renew(&self, grant: &Grant, stale: Option<&str>) -> Option<String> {
        let _one = grant.renewing.lock().await;
        let current = grant.token();
        if let Some(token) = &current
            && Some(token.access_token.as_str()) != stale
            && !token.is_due()
        {
            // Another request renewed it while this one waited.
            return Some(token.access_token.clone());
        }
        let renewed = match &current {
            Some(token) if token.refresh_token.is_some() => self.refresh(token).await,
            _ if self.is_machine() => {
                self.client_credentials(current.as_ref().map(|t| t.scopes.clone()))
                    .await
            }
            _ => return None,
        };
        match renewed {
            Ok(token) => {
                let access = token.access_token.clone();
                self.keep(grant, token);
                Some(access)
            }
            Err(error) => {
                tracing::warn!(upstream = %self.upstream, principal = %grant.principal, %error, "cannot renew the upstream's token");
                if error.is_invalid_grant() && !self.is_machine() {
                    // The refresh token is dead: a user must authorize again.
                    self.drop_token(grant);
                    grant.require_authorization(None, None);
                    return None;
                }
                if self.is_machine() {
                    grant.fail(escape_for_display(&error.to_string()));
                }
                current
                    .filter(|t| !t.is_expired() && Some(t.access_token.as_str()) != stale)
                    .map(|t| t.access_token.clone())
            }
        }
    }

    async fn refresh(&self, token: &TokenSet) -> Result<TokenSet, OAuthError> {
        let refresh_token = token.refresh_token.as_deref().unwrap_or_default();
        self.exchange(&token.endpoint, &token.client)
            .refresh(refresh_token, &token.scopes)
            .await
    }

    /// A token by the client credentials grant, for `scopes` (else the configured ones, else
    /// those the resource lists).
    async fn client_credentials(
        &self,
        scopes: Option<Vec<String>>,
    ) -> Result<TokenSet, OAuthError> {
        let discovered = self.discovered(false, None).await?;
        let client = self.identity_context().identity(&discovered).await?;
        let scopes = scopes
            .or_else(|| self.config.scopes.clone())
            .unwrap_or_else(|| discovered.resource_scopes.clone());
        let endpoint = endpoint_of(&discovered);
        self.exchange(&endpoint, &client)
            .client_credentials(&scopes)
            .await
    }

    /// The last discovery; or a new one if `fresh` or there is none (with the upstream's
    /// `challenge`, if there is one).
    async fn discovered(
        &self,
        fresh: bool,
        challenge: Option<&Challenge>,
    ) -> Result<Arc<Discovered>, OAuthError> {
        let mut cached = self.discovered.lock().await;
        if !fresh && let Some(discovered) = cached.as_ref() {
            return Ok(discovered.clone());
        }
        let discovered =
            Arc::new(discovery::discover(&self.oauth.http, &self.url, challenge).await?);
        *cached = Some(discovered.clone());
        Ok(discovered)
    }

    /// The link a user follows to authorize `grant`, made now if it has none (or it expired);
    /// `None` if the grant needs no authorization.
    pub async fn link(&self, grant: &Grant) -> Result<Option<Link>, OAuthError> {
        let _one = grant.linking.lock().await;
        let (challenge, scopes) = match grant.need() {
            Need::Authorization {
                link: Some(link), ..
            } if link.is_live() => return Ok(Some(link)),
            Need::Authorization {
                challenge, scopes, ..
            } => (challenge, scopes),
            Need::Nothing | Need::Failed(_) => return Ok(None),
        };
        let link = self.begin(grant, challenge.as_ref(), scopes).await?;
        grant.set_link(link.clone());
        Ok(Some(link))
    }

    /// Starts an authorization: discovery, the client identity, the scopes, PKCE and `state`;
    /// records it as pending and returns its link.
    async fn begin(
        &self,
        grant: &Grant,
        challenge: Option<&Challenge>,
        step_up: Option<Vec<String>>,
    ) -> Result<Link, OAuthError> {
        // Discovered afresh: the server may have moved to another authorization server.
        let discovered = self.discovered(true, challenge).await?;
        let server = &discovered.server;
        let endpoint = server.authorization_endpoint.as_deref().ok_or_else(|| {
            OAuthError::Discovery("the authorization server has no authorization_endpoint".into())
        })?;
        if !server.confirms_pkce() {
            return Err(OAuthError::Discovery(
                "the authorization server does not list PKCE with S256 \
                 (code_challenge_methods_supported), which MCP requires"
                    .into(),
            ));
        }
        let client = self.identity_context().identity(&discovered).await?;
        let scopes = self.scopes(&discovered, challenge, step_up);
        let redirect_uri = self.oauth.redirect_uri.clone();
        let auth_url = AuthUrl::new(endpoint.to_owned())
            .map_err(|e| OAuthError::Discovery(format!("authorization_endpoint: {e}")))?;
        let redirect = RedirectUrl::new(redirect_uri.clone())
            .map_err(|e| OAuthError::Config(format!("redirect URI: {e}")))?;
        let state = CsrfToken::new_random_len(32).secret().clone();
        let (pkce, verifier) = PkceCodeChallenge::new_random_sha256();
        let authorize = BasicClient::new(ClientId::new(client.client_id.clone()))
            .set_auth_uri(auth_url)
            .set_redirect_uri(redirect);
        let mut request = authorize
            .authorize_url(|| CsrfToken::new(state.clone()))
            .set_pkce_challenge(pkce)
            .add_scopes(scopes.iter().cloned().map(Scope::new));
        if let Some(resource) = &discovered.resource {
            request = request.add_extra_param("resource", resource.clone());
        }
        let (url, _) = request.url();
        self.oauth.pending.insert(
            state.clone(),
            PendingAuthorization {
                upstream: self.upstream.clone(),
                principal: grant.principal.clone(),
                verifier: verifier.secret().clone(),
                redirect_uri,
                scopes,
                endpoint: endpoint_of(&discovered),
                client,
                issuer: server.issuer.clone(),
                require_iss: server.authorization_response_iss_parameter_supported,
                created: Instant::now(),
                superseded: false,
            },
        );
        let created = SystemTime::now();
        tracing::info!(upstream = %self.upstream, principal = %grant.principal, "authorization needed: {url}");
        Ok(Link {
            url: url.to_string(),
            state,
            created,
            expires: created + self.oauth.settings.authorization_lifetime,
            elicitation_id: uuid::Uuid::new_v4().to_string(),
        })
    }

    /// The scopes to ask for: a step-up's; else the configured ones; else the challenge's; else
    /// those the resource lists; and `offline_access` where the server offers it (for a
    /// refresh token).
    fn scopes(
        &self,
        discovered: &Discovered,
        challenge: Option<&Challenge>,
        step_up: Option<Vec<String>>,
    ) -> Vec<String> {
        let mut scopes = step_up
            .or_else(|| self.config.scopes.clone())
            .or_else(|| {
                challenge
                    .and_then(|c| c.scope.as_deref())
                    .map(|s| split_scopes(Some(s)))
            })
            .unwrap_or_else(|| discovered.resource_scopes.clone());
        let offline = "offline_access";
        if discovered
            .server
            .scopes_supported
            .iter()
            .any(|s| s == offline)
            && !scopes.iter().any(|s| s == offline)
        {
            scopes.push(offline.to_owned());
        }
        scopes
    }

    /// Concludes the pending authorization `pending` with the callback's `query`: checks the
    /// issuer, exchanges the code, keeps the tokens. A failure is recorded on the grant.
    pub(super) async fn complete(
        &self,
        pending: PendingAuthorization,
        query: CallbackQuery,
    ) -> Result<(), OAuthError> {
        let grant = self.grant(&pending.principal);
        match self.redeem(&pending, query).await {
            Ok(token) => {
                tracing::info!(upstream = %self.upstream, principal = %grant.principal, "authorized");
                self.keep(&grant, token);
                Ok(())
            }
            Err(error) => {
                tracing::warn!(upstream = %self.upstream, principal = %grant.principal, %error, "authorization failed");
                grant.fail(escape_for_display(&error.to_string()));
                Err(error)
            }
        }
    }

    async fn redeem(
        &self,
        pending: &PendingAuthorization,
        query: CallbackQuery,
    ) -> Result<TokenSet, OAuthError> {
        if let Some(error) = query.error {
            return Err(OAuthError::Provider {
                error,
                description: query.error_description,
            });
        }
        match (&query.iss, &pending.issuer) {
            (Some(iss), Some(expected)) if iss != expected => {
                return Err(OAuthError::Callback(format!(
                    "the authorization response names issuer `{iss}`, not `{expected}`"
                )));
            }
            (Some(iss), None) => {
                return Err(OAuthError::Callback(format!(
                    "the authorization response names issuer `{iss}`, which is unknown"
                )));
            }
            (None, _) if pending.require_iss => {
                return Err(OAuthError::Callback(
                    "the authorization response lacks the `iss` its server promised".into(),
                ));
            }
            _ => {}
        }
        let code = query
            .code
            .ok_or_else(|| OAuthError::Callback("the authorization response has no code".into()))?;
        let exchange = self.exchange(&pending.endpoint, &pending.client);
        let result = exchange
            .code(
                code,
                pending.verifier.clone(),
                &pending.redirect_uri,
                &pending.scopes,
            )
            .await;
        if let Err(OAuthError::Provider { error, .. }) = &result
            && error == "invalid_client"
        {
            // A registration the server no longer knows: register anew next time.
            self.identity_context()
                .forget_registration(&pending.endpoint.issuer);
        }
        result
    }

    /// The live authorization links of this upstream's grants.
    pub fn links(&self) -> Vec<(Principal, Link)> {
        self.grants
            .iter()
            .filter_map(|grant| match grant.need() {
                Need::Authorization {
                    link: Some(link), ..
                } if link.is_live() => Some((grant.principal.clone(), link)),
                _ => None,
            })
            .collect()
    }

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
        if let Err(error) = self.oauth.store.delete(Kind::Index, self.upstream.as_str()) {
            tracing::warn!(%error, "cannot delete the token index");
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
            (Some(secret), crate::config::AuthMethod::ClientSecretBasic) => {
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

    /// Keeps new tokens: in the grant (waking its waiters) and in the store.
    fn keep(&self, grant: &Grant, token: TokenSet) {
        let key = self.store_key(&grant.principal);
        if let Err(error) = self.oauth.store.save(Kind::Tokens, &key, &token) {
            tracing::error!(upstream = %self.upstream, %error, "cannot store the upstream's tokens; they will not survive a restart");
        }
        let mut index = self.index();
        let principal = grant.principal.as_str().to_owned();
        if !index.principals.contains(&principal) {
            index.principals.push(principal);
            if let Err(error) = self
                .oauth
                .store
                .save(Kind::Index, self.upstream.as_str(), &index)
            {
                tracing::warn!(%error, "cannot update the token index");
            }
        }
        grant.set_token(token);
    }

    fn drop_token(&self, grant: &Grant) {
        grant.clear_token();
        let key = self.store_key(&grant.principal);
        if let Err(error) = self.oauth.store.delete(Kind::Tokens, &key) {
            tracing::warn!(%error, "cannot delete a stale token");
        }
    }

    fn load(&self, principal: &Principal) -> Option<TokenSet> {
        match self
            .oauth
            .store
            .load(Kind::Tokens, &self.store_key(principal))
        {
            Ok(token) => token,
            Err(error) => {
                tracing::warn!(upstream = %self.upstream, %error, "cannot read the stored tokens");
                None
            }
        }
    }

    fn index(&self) -> Index {
        let mut index: Index = self
            .oauth
            .store
            .load(Kind::Index, self.upstream.as_str())
            .ok()
            .flatten()
            .unwrap_or_default();
        for grant in &self.grants {
            let principal = grant.principal.as_str().to_owned();
            if grant.token().is_some() && !index.principals.contains(&principal) {
                index.principals.push(principal);
            }
        }
        index
    }

    fn store_key(&self, principal: &Principal) -> String {
        format!("{}\0{}", self.upstream, principal)
    }

    /// Whether the upstream uses the client credentials grant (no user involved).
    pub fn is_machine(&self) -> bool {
        self.config.grant == GrantKind::ClientCredentials
    }

    fn exchange<'a>(
        &'a self,
        endpoint: &'a TokenEndpoint,
        client: &'a super::token::ClientIdentity,
    ) -> Exchange<'a> {
        Exchange {
            http: &self.oauth.http,
            endpoint,
            client,
            private_key: self.config.private_key.as_ref(),
        }
    }

    fn identity_context(&self) -> identity::Context<'_> {
        identity::Context {
            http: &self.oauth.http,
            store: &self.oauth.store,
            config: &self.config,
            client_name: &self.oauth.settings.client_name,
            metadata_url: self.oauth.metadata_url.as_ref(),
            redirect_uri: &self.oauth.redirect_uri,
            registration_key: self.upstream.to_string(),
        }
    }
}

fn endpoint_of(discovered: &Discovered) -> TokenEndpoint {
    let server = &discovered.server;
    TokenEndpoint {
        url: server.token_endpoint.clone().unwrap_or_default(),
        issuer: server
            .issuer
            .clone()
            .unwrap_or_else(|| discovered.issuer.clone()),
        resource: discovered.resource.clone(),
        revocation: server.revocation_endpoint.clone(),
    }
}

fn principal_of(stored: &str) -> Principal {
    match stored.strip_prefix("user:") {
        Some(id) => Principal::user(id),
        None => Principal::anonymous(),
    }
}

fn split_scopes(scope: Option<&str>) -> Vec<String> {
    scope
        .unwrap_or_default()
        .split_ascii_whitespace()
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::config::{OAuthKey, OAuthSettings};

    fn authorizer(state: &std::path::Path) -> Authorizer {
        let settings = OAuthSettings {
            public_url: None,
            state_dir: state.to_owned(),
            key: OAuthKey::Inline([3; 32]),
            client_name: "Switchyard".into(),
            client_metadata_url: None,
            success_redirect: None,
            error_redirect: None,
            authorization_lifetime: Duration::from_secs(600),
        };
        let oauth = OAuth::new(settings, Url::parse("http://127.0.0.1:8080").unwrap());
        Authorizer::new(
            oauth,
            UpstreamName::new("files").unwrap(),
            Url::parse("https://files.example.com/mcp").unwrap(),
            UpstreamOAuth::default(),
        )
    }

    fn token(access: &str) -> TokenSet {
        crate::oauth::token::samples::token(access, None)
    }

    #[tokio::test]
    async fn tokens_are_kept_per_principal_and_survive_a_restart() {
        let state = tempfile::tempdir().unwrap();
        let alice = Principal::user("alice");
        let first = authorizer(state.path());
        first.keep(&first.grant(&alice), token("alice-token"));
        first.keep(&first.grant(&Principal::anonymous()), token("shared-token"));
        assert_eq!(
            first.token(&first.grant(&alice)).await.as_deref(),
            Some("alice-token")
        );
        assert_eq!(
            first.token(&first.grant(&Principal::user("bob"))).await,
            None
        );

        let restarted = authorizer(state.path());
        let grant = restarted.grant(&alice);
        assert_eq!(
            restarted.token(&grant).await.as_deref(),
            Some("alice-token")
        );
        let shared = restarted.grant(&Principal::anonymous());
        assert_eq!(
            restarted.token(&shared).await.as_deref(),
            Some("shared-token")
        );

        assert_eq!(restarted.forget_all().await, 2);
        assert_eq!(restarted.token(&grant).await, None);
        let fresh = authorizer(state.path());
        let again = fresh.grant(&alice);
        assert_eq!(fresh.token(&again).await, None, "forgotten on disk");
    }
}
