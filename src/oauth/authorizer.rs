//! One upstream's authorizations: a grant per principal, the token each request carries (read
//! lock-free, renewed by `renewal` when due or refused), and the grants' tokens kept in step
//! with the vault that replicas share. (The authorization code flow is in `flow`; forgetting
//! tokens in `forget`; exchanging users' own tokens in `exchange`.)

use std::sync::Arc;

use dashmap::DashMap;
use url::Url;

use super::{
    Link, Need, OAuth, OAuthError,
    challenge::Challenge,
    discovery::{self, Discovered},
    grant::Grant,
    identity,
    subjects::ExchangeState,
    token::{TokenEndpoint, TokenExchange, TokenSet},
    vault::RecordKind,
};
use crate::{config::UpstreamOAuth, names::UpstreamName, principal::Principal, store::record_hash};

/// An upstream refused a request: its status, its `WWW-Authenticate`, and the access token the
/// request carried, if any.
#[derive(Debug, Clone, Copy)]
pub struct Rejection<'a> {
    pub status: u16,
    pub www_authenticate: Option<&'a str>,
    pub sent_token: Option<&'a str>,
}

pub struct Authorizer {
    pub(super) oauth: Arc<OAuth>,
    pub(super) upstream: UpstreamName,
    pub(super) url: Url,
    pub(super) config: UpstreamOAuth,
    /// What the token exchange grant learned (unused by other grants).
    pub(super) exchange_state: ExchangeState,
    /// The last discovery, which the client credentials grant reuses.
    discovered: tokio::sync::Mutex<Option<Arc<Discovered>>>,
    pub(super) grants: DashMap<Principal, Arc<Grant>>,
    /// Token refreshes that succeeded, and those that failed (for metrics).
    pub(super) refreshes: [std::sync::atomic::AtomicU64; 2],
    /// Bumped whenever any principal's grant gets new tokens.
    pub(super) authorized: tokio::sync::watch::Sender<u64>,
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
            exchange_state: ExchangeState::default(),
            discovered: tokio::sync::Mutex::new(None),
            grants: DashMap::new(),
            refreshes: Default::default(),
            authorized: tokio::sync::watch::Sender::new(0),
        }
    }

    pub fn upstream(&self) -> &UpstreamName {
        &self.upstream
    }

    /// The grant of `principal`, with its stored tokens.
    pub async fn grant(&self, principal: &Principal) -> Arc<Grant> {
        let grant = match self.grants.get(principal) {
            Some(grant) => grant.clone(),
            None => self
                .grants
                .entry(principal.clone())
                .or_insert_with(|| Arc::new(Grant::unsynced(principal.clone())))
                .clone(),
        };
        if !grant.is_synced() {
            self.sync(&grant).await;
        }
        grant
    }

    /// The grant of `principal` if this replica made it already (else it has nothing to show:
    /// no link, no failure).
    pub fn grant_if_made(&self, principal: &Principal) -> Option<Arc<Grant>> {
        self.grants.get(principal).map(|grant| grant.clone())
    }

    /// The grant the upstream's shared connection uses (discovery, health checks, and the
    /// requests of that principal). Without client authentication it is the anonymous one, as
    /// every request is anonymous. With it, it is the anonymous grant if that has tokens (or
    /// the grant needs no user), else that of the first user with stored tokens: the lists of
    /// an upstream are found with some user's token; each user's calls still use their own.
    pub async fn service_grant(&self) -> Arc<Grant> {
        let anonymous = self.grant(&Principal::anonymous()).await;
        if !self.oauth.users_authenticate() || self.is_machine() || anonymous.token().is_some() {
            return anonymous;
        }
        for stored in self.index().await {
            let grant = self.grant(&principal_of(&stored)).await;
            if grant.token().is_some() {
                return grant;
            }
        }
        anonymous
    }

    /// The link `principal` follows to authorize Switchyard at the upstream for themselves,
    /// if their grant wants authorization or they have no tokens yet (made now); `None` for a
    /// grant that involves no user.
    pub async fn link_for(&self, principal: &Principal) -> Result<Option<Link>, OAuthError> {
        if !self.config.in_browser() {
            return Ok(None);
        }
        let grant = self.grant(principal).await;
        let wanted = matches!(grant.need(), Need::Authorization { .. });
        if !wanted && (self.is_machine() || grant.token().is_some()) {
            return Ok(None);
        }
        if matches!(grant.need(), Need::Nothing) {
            grant.require_authorization(None, None);
        }
        self.link(&grant).await
    }

    /// Whether each user reaches the upstream with their own tokens: clients authenticate to
    /// the gateway, and the grant involves a user.
    pub fn per_user(&self) -> bool {
        self.oauth.users_authenticate() && !self.is_machine()
    }

    /// Changes whenever some principal's grant gets new tokens.
    pub fn authorizations(&self) -> tokio::sync::watch::Receiver<u64> {
        self.authorized.subscribe()
    }

    /// The access token for a request now, if one is at hand without renewing anything.
    pub fn current_token(&self, grant: &Grant) -> Option<String> {
        grant
            .token()
            .filter(|token| !token.is_due())
            .map(|token| token.access_token.clone())
    }

    /// Whether `token` would give no token at once: the grant, as read from the vault, has
    /// none, and nothing gets one without a person (most upstreams, which need no OAuth).
    pub fn has_no_token(&self, grant: &Grant) -> bool {
        grant.is_synced() && grant.token().is_none() && !self.renews_alone(grant)
    }

    /// The access token for a request now: renewed first if due, acquired first for the client
    /// credentials grant; `None` if there is none (the request then meets a 401).
    pub async fn token(&self, grant: &Grant) -> Option<String> {
        if !grant.is_synced() {
            self.sync(grant).await;
        }
        match grant.token() {
            Some(token) if !token.is_due() => Some(token.access_token.clone()),
            Some(token) if token.refresh_token.is_none() && !self.renews_alone(grant) => {
                // Nothing to renew it with: use it while it lasts.
                (!token.is_expired()).then(|| token.access_token.clone())
            }
            // Due: if renewing fails, `renew` still gives the token while it lasts.
            Some(_) => self.renew(grant, None, None).await.ok(),
            None if self.renews_alone(grant) => self.renew(grant, None, None).await.ok(),
            None => None,
        }
    }

    /// The last discovery; or a new one if `fresh` or there is none (with the upstream's
    /// `challenge`, if there is one).
    pub(super) async fn discovered(
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

    /// Keeps new tokens: in the grant (waking its waiters) and in the vault (where other
    /// replicas hear of them).
    pub(super) async fn keep(&self, grant: &Grant, token: TokenSet) {
        let key = self.store_key(&grant.principal);
        if let Err(error) = self
            .oauth
            .vault
            .save(RecordKind::Tokens, &key, &token)
            .await
        {
            tracing::error!(upstream = %self.upstream, %error, "cannot store the upstream's tokens; they will not survive a restart, nor reach other replicas");
        }
        let indexed = self
            .oauth
            .vault
            .add_principal(self.upstream.as_str(), grant.principal.as_str())
            .await;
        if let Err(error) = indexed {
            tracing::warn!(%error, "cannot update the token index");
        }
        grant.set_token(token);
        self.authorized.send_modify(|n| *n += 1);
    }

    pub(super) async fn drop_token(&self, grant: &Grant) {
        grant.clear_token();
        let key = self.store_key(&grant.principal);
        if let Err(error) = self.oauth.vault.delete(RecordKind::Tokens, &key).await {
            tracing::warn!(%error, "cannot delete a stale token");
        }
    }

    /// Reads the grant's tokens from the vault (another replica may have changed them), once
    /// for all who found the grant out of sync at the same time.
    pub(super) async fn sync(&self, grant: &Grant) {
        let _one = grant.syncing.lock().await;
        if grant.is_synced() {
            // Read by another request while this one waited.
            return;
        }
        let key = self.store_key(&grant.principal);
        let stored = match self.oauth.vault.load(RecordKind::Tokens, &key).await {
            Ok(stored) => stored,
            Err(error) => {
                tracing::warn!(upstream = %self.upstream, %error, "cannot read the stored tokens");
                if self.oauth.vault.shared().is_some() {
                    // Read again at the next use.
                    return;
                }
                None
            }
        };
        if grant.adopt(stored) {
            self.authorized.send_modify(|n| *n += 1);
        }
    }

    /// Another replica stored or dropped the tokens whose key has the record hash `hash`:
    /// the grant they belong to takes them now.
    pub(super) fn tokens_changed(self: &Arc<Self>, hash: &str) {
        let Some(grant) = self
            .grants
            .iter()
            .find(|grant| record_hash(&self.store_key(&grant.principal)) == hash)
            .map(|grant| grant.clone())
        else {
            return;
        };
        grant.unsync();
        let authorizer = self.clone();
        tokio::spawn(async move { authorizer.sync(&grant).await });
    }

    /// Announcements may have been missed: every grant reads its tokens again.
    pub(super) fn unsync_all(self: &Arc<Self>) {
        let grants: Vec<_> = self.grants.iter().map(|grant| grant.clone()).collect();
        for grant in &grants {
            grant.unsync();
        }
        let authorizer = self.clone();
        tokio::spawn(async move {
            for grant in grants {
                authorizer.sync(&grant).await;
            }
        });
    }

    /// The principals of this upstream with tokens: those stored, and those of this replica.
    pub(super) async fn index(&self) -> Vec<String> {
        let mut principals = match self.oauth.vault.principals(self.upstream.as_str()).await {
            Ok(principals) => principals,
            Err(error) => {
                tracing::warn!(upstream = %self.upstream, %error, "cannot read the token index");
                Vec::new()
            }
        };
        for grant in &self.grants {
            let principal = grant.principal.as_str().to_owned();
            if grant.token().is_some() && !principals.contains(&principal) {
                principals.push(principal);
            }
        }
        principals
    }

    pub(super) fn store_key(&self, principal: &Principal) -> String {
        format!("{}\0{}", self.upstream, principal)
    }

    /// Whether the upstream uses the client credentials grant (no user involved).
    pub fn is_machine(&self) -> bool {
        self.config.is_machine()
    }

    pub(super) fn exchange<'a>(
        &'a self,
        endpoint: &'a TokenEndpoint,
        client: &'a super::token::ClientIdentity,
    ) -> TokenExchange<'a> {
        TokenExchange {
            http: &self.oauth.http,
            endpoint,
            client,
            private_key: self.config.private_key.as_ref(),
        }
    }

    pub(super) fn identity_context(&self) -> identity::Context<'_> {
        identity::Context {
            http: &self.oauth.http,
            vault: &self.oauth.vault,
            config: &self.config,
            client_name: &self.oauth.settings.client_name,
            metadata_url: self.oauth.metadata_url.as_ref(),
            redirect_uri: &self.oauth.redirect_uri,
            registration_key: self.upstream.to_string(),
        }
    }
}

pub(super) fn endpoint_of(discovered: &Discovered) -> TokenEndpoint {
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

pub(super) fn principal_of(stored: &str) -> Principal {
    Principal::parse(stored).unwrap_or_default()
}

pub(super) fn split_scopes(scope: Option<&str>) -> Vec<String> {
    scope
        .unwrap_or_default()
        .split_ascii_whitespace()
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
pub(super) mod tests;
