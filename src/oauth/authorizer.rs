//! One upstream's authorizations: a grant per principal, the token each request carries, and
//! what a 401 or 403 from the upstream means. (The authorization code flow is in `flow`;
//! forgetting tokens in `forget`.)
//!
//! - A request takes the grant's token, refreshing it first when it is due (a quarter of its
//!   lifetime, at most a minute, before expiry). If the refresh fails, the token is used while
//!   it lasts.
//! - A 401 renews the token once (refresh, or for the client credentials grant a new token) and
//!   the request is retried once. Tokens are dropped, and a user must authorize, only on an
//!   authoritative refusal: the authorization server refuses the grant (`invalid_grant`), or the
//!   upstream refuses the very token it was sent and nothing can renew it. A token endpoint
//!   that fails (unreachable, 5xx) leaves the tokens as they are, to try again later.
//! - A 403 `insufficient_scope` asks for the scopes held plus those the upstream names (step
//!   up); if it names only scopes already held, there is nothing more to ask for, and the grant
//!   fails.
//! - Replicas share the vault: a renewal takes the grant's lease first and reads the vault
//!   again, so a token another replica renewed meanwhile is taken instead of renewed twice (a
//!   refresh token is spent once). Without the lease (the shared store is down), nothing is
//!   renewed: the token is used while it lasts.

use std::sync::Arc;

use dashmap::DashMap;
use tracing::Instrument;
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

/// Why no new token could be had.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unrenewed {
    /// The token endpoint failed or could not be reached: worth trying again later, so the
    /// stored tokens are kept.
    Failed,
    /// Nothing can renew the token (or the authorization server refused the grant): a user
    /// must authorize.
    Refused,
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
    refreshes: [std::sync::atomic::AtomicU64; 2],
    /// Bumped whenever any principal's grant gets new tokens.
    authorized: tokio::sync::watch::Sender<u64>,
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

    /// What to do about a refused request; true if it should be sent again (once) because
    /// there is a new token.
    pub async fn rejected(&self, grant: &Grant, rejection: Rejection<'_>) -> bool {
        let challenge = rejection.www_authenticate.and_then(Challenge::parse);
        match rejection.status {
            401 => {
                let sent = rejection.sent_token;
                match self.renew(grant, sent, challenge.as_ref()).await {
                    Ok(_) => true,
                    Err(Unrenewed::Failed) => false,
                    Err(Unrenewed::Refused) => {
                        if !self.is_machine() {
                            if sent.is_some()
                                && grant
                                    .token()
                                    .is_some_and(|t| Some(t.access_token.as_str()) == sent)
                            {
                                // The upstream refused the very token it was sent, and nothing
                                // can renew it. (A 401 to a request that carried no token says
                                // nothing about the stored ones.)
                                self.drop_token(grant).await;
                            }
                            self.user_must_act(grant, challenge, None, None);
                        }
                        false
                    }
                }
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
        if self.renews_alone(grant) {
            let _one = grant.renewing.lock().await;
            let renewed = match self.subject(&grant.principal) {
                Some(subject) => {
                    let exchanged = self
                        .exchanged(&grant.principal, &subject, Some(scopes), Some(&challenge))
                        .await;
                    self.audit_grant(&grant.principal, self.exchange_grant(), exchanged.as_ref());
                    exchanged
                }
                None => {
                    let asked = self
                        .client_credentials(Some(scopes), Some(&challenge))
                        .await;
                    self.audit_grant(&grant.principal, "client_credentials", asked.as_ref());
                    asked
                }
            };
            return match renewed {
                Ok(token) => {
                    self.keep(grant, token).await;
                    true
                }
                Err(error) => {
                    grant.fail(error.to_string());
                    false
                }
            };
        }
        self.user_must_act(grant, Some(challenge), Some(scopes), None);
        false
    }

    /// A token in place of the grant's current one, which is due or was `refused` by the
    /// upstream, once for every waiter of every replica: under the grant's lock and its lease
    /// (with replicas), by refreshing it, or for the client credentials grant by asking again
    /// (discovering with the upstream's `challenge`, if it sent one). If that fails but the
    /// current token is unexpired and not the one refused, that token.
    async fn renew(
        &self,
        grant: &Grant,
        refused: Option<&str>,
        challenge: Option<&Challenge>,
    ) -> Result<String, Unrenewed> {
        let _one = grant.renewing.lock().await;
        let key = self.store_key(&grant.principal);
        let lease = match self.oauth.vault.renewal_lease(&key).await {
            Ok(lease) => lease,
            Err(error) => {
                // Renewing without it could spend a refresh token another replica spends too.
                tracing::warn!(upstream = %self.upstream, principal = %grant.principal, %error, "cannot take the lease on renewing the upstream's token; it is used while it lasts");
                return usable(grant.token().as_deref(), refused).ok_or(Unrenewed::Failed);
            }
        };
        if lease.is_some() {
            // Another replica may have renewed it (or dropped it) meanwhile, whether or not
            // this one has heard yet: read it again.
            grant.unsync();
            self.sync(grant).await;
        }
        let renewed = self.renew_held(grant, refused, challenge).await;
        self.oauth.vault.release(lease).await;
        renewed
    }

    /// `renew`, with the grant's lock (and lease) held.
    async fn renew_held(
        &self,
        grant: &Grant,
        refused: Option<&str>,
        challenge: Option<&Challenge>,
    ) -> Result<String, Unrenewed> {
        let current = grant.token();
        if let Some(token) = &current
            && Some(token.access_token.as_str()) != refused
            && !token.is_due()
        {
            // Renewed while this request waited.
            return Ok(token.access_token.clone());
        }
        let scopes = current.as_ref().map(|t| t.scopes.clone());
        let renewed = match &current {
            Some(token) if token.refresh_token.is_some() => self.refresh(token).await,
            _ if self.is_machine() => {
                let asked = self.client_credentials(scopes, challenge).await;
                self.audit_grant(&grant.principal, "client_credentials", asked.as_ref());
                asked
            }
            _ => match self.subject(&grant.principal) {
                Some(subject) => {
                    let exchanged = self
                        .exchanged(&grant.principal, &subject, scopes, challenge)
                        .await;
                    self.audit_grant(&grant.principal, self.exchange_grant(), exchanged.as_ref());
                    exchanged
                }
                // Nothing to renew it with: use it while it lasts.
                None => return usable(current.as_deref(), refused).ok_or(Unrenewed::Refused),
            },
        };
        let error = match renewed {
            Ok(token) => {
                let access = token.access_token.clone();
                self.keep(grant, token).await;
                return Ok(access);
            }
            Err(error) => error,
        };
        tracing::warn!(upstream = %self.upstream, principal = %grant.principal, %error, "cannot renew the upstream's token");
        let exchange_refused = matches!(error, OAuthError::Provider { .. })
            && current.as_ref().is_none_or(|t| t.refresh_token.is_none())
            && self.config.exchanges();
        if (error.is_invalid_grant() || exchange_refused) && !self.is_machine() {
            // The refresh token is dead, or the user's own was refused: a user must act.
            self.drop_token(grant).await;
            self.user_must_act(grant, None, None, Some(&error));
            return Err(Unrenewed::Refused);
        }
        // Any other failure may pass (the server is down, or overloaded): keep the tokens.
        usable(current.as_deref(), refused).ok_or_else(|| {
            if self.is_machine() {
                grant.fail(error.to_string());
            }
            Unrenewed::Failed
        })
    }

    pub(super) async fn refresh(&self, token: &TokenSet) -> Result<TokenSet, OAuthError> {
        let refresh_token = token.refresh_token.as_deref().unwrap_or_default();
        let refreshed = self
            .exchange(&token.endpoint, &token.client)
            .refresh(refresh_token, &token.scopes)
            .instrument(crate::telemetry::child("oauth refresh"))
            .await;
        self.refreshes[usize::from(refreshed.is_err())]
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        refreshed
    }

    /// Token refreshes so far: (succeeded, failed).
    pub fn refresh_counts(&self) -> (u64, u64) {
        let [ok, failed] = &self.refreshes;
        let load = |n: &std::sync::atomic::AtomicU64| n.load(std::sync::atomic::Ordering::Relaxed);
        (load(ok), load(failed))
    }

    /// A token by the client credentials grant, for `scopes` (else the configured ones, else
    /// those the resource lists).
    async fn client_credentials(
        &self,
        scopes: Option<Vec<String>>,
        challenge: Option<&Challenge>,
    ) -> Result<TokenSet, OAuthError> {
        // The challenge may be the only place the upstream names its resource metadata.
        let discovered = self.discovered(false, challenge).await?;
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

    async fn drop_token(&self, grant: &Grant) {
        grant.clear_token();
        let key = self.store_key(&grant.principal);
        if let Err(error) = self.oauth.vault.delete(RecordKind::Tokens, &key).await {
            tracing::warn!(%error, "cannot delete a stale token");
        }
    }

    /// Reads the grant's tokens from the vault (another replica may have changed them), once
    /// for all who found the grant out of sync at the same time.
    async fn sync(&self, grant: &Grant) {
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

    /// Whether a token for `grant` can be had without a person: by the client credentials
    /// grant, or by exchanging a token its user presented.
    pub fn renews_alone(&self, grant: &Grant) -> bool {
        self.is_machine() || self.subject(&grant.principal).is_some()
    }

    /// Nothing gives `grant` a token: its user must authorize in a browser, where the upstream
    /// allows it (with the upstream's `challenge` and the `scopes` a step-up needs); else the
    /// grant fails, saying what its user can do.
    fn user_must_act(
        &self,
        grant: &Grant,
        challenge: Option<Challenge>,
        scopes: Option<Vec<String>>,
        error: Option<&OAuthError>,
    ) {
        if self.config.in_browser() {
            grant.require_authorization(challenge, scopes);
            return;
        }
        let why = match error {
            Some(error) => format!("the token exchange failed: {error}"),
            None if grant.principal.is_anonymous() => {
                "no user has presented a token to exchange yet: the upstream is reached with \
                 each user's own token, exchanged, once they make a request"
                    .to_owned()
            }
            None if self.exchange_state.refused(&grant.principal) => {
                "the authorization server refused to exchange the user's token: the next one \
                 they present (signing in again) is tried at once"
                    .to_owned()
            }
            None if self.oauth.subjects.of(&grant.principal).is_none() => {
                "the upstream is reached with the user's own token, exchanged: authenticate \
                 to the gateway with a JWT (an API key is never handed on)"
                    .to_owned()
            }
            None => "the upstream refused the exchanged token".to_owned(),
        };
        grant.fail(why);
    }

    /// Records a token had without a browser (`grant` names how) in the audit log: never the
    /// token, only whose it is and whether it came.
    fn audit_grant(
        &self,
        principal: &Principal,
        grant: &str,
        outcome: Result<&TokenSet, &OAuthError>,
    ) {
        let reason = outcome.err().map(ToString::to_string);
        self.oauth.audit.record(&crate::audit::Record {
            kind: "oauth_grant",
            principal: principal.as_str(),
            upstream: Some(self.upstream.as_str()),
            outcome: if outcome.is_ok() { "ok" } else { "error" },
            detail: reason.as_deref(),
            grant: Some(grant),
            ..Default::default()
        });
    }

    /// The name of the grant that exchanges users' tokens, for the audit log.
    fn exchange_grant(&self) -> &'static str {
        self.config
            .exchange_grant()
            .map_or("token_exchange", |grant| grant.as_str())
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

/// `token` if a request may still carry it: unexpired, and not the one `refused`.
fn usable(token: Option<&TokenSet>, refused: Option<&str>) -> Option<String> {
    token
        .filter(|t| !t.is_expired() && Some(t.access_token.as_str()) != refused)
        .map(|t| t.access_token.clone())
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
