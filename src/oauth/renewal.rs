//! Renewing a grant's token, and what a refusal from the upstream means:
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
//! - Without a refresh token, a token is had again by the client credentials grant, or by
//!   exchanging the user's own token (`exchange`); where none of that works, the user must
//!   authorize in a browser if the upstream allows it, else the grant fails saying why.
//! - Replicas share the vault: a renewal takes the grant's lease first and reads the vault
//!   again, so a token another replica renewed meanwhile is taken instead of renewed twice (a
//!   refresh token is spent once). Without the lease (the shared store is down), nothing is
//!   renewed: the token is used while it lasts.

use tracing::Instrument;

use super::{
    Authorizer, OAuthError, Rejection,
    authorizer::{endpoint_of, split_scopes},
    challenge::Challenge,
    grant::Grant,
    token::TokenSet,
};
use crate::principal::Principal;

/// Why no new token could be had.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Unrenewed {
    /// The token endpoint failed or could not be reached: worth trying again later, so the
    /// stored tokens are kept.
    Failed,
    /// Nothing can renew the token (or the authorization server refused the grant): a user
    /// must authorize.
    Refused,
}

impl Authorizer {
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
    pub(super) async fn renew(
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
}

/// `token` if a request may still carry it: unexpired, and not the one `refused`.
fn usable(token: Option<&TokenSet>, refused: Option<&str>) -> Option<String> {
    token
        .filter(|t| !t.is_expired() && Some(t.access_token.as_str()) != refused)
        .map(|t| t.access_token.clone())
}
