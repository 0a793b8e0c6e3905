//! The token exchange grant of one upstream (RFC 8693): the JWT a user authenticated to the
//! gateway with, exchanged at the organisation's authorization server for a token meant for
//! the upstream, so that the user never has to authorize in a browser.
//!
//! - The user's token is the one their latest request presented (`subjects`, in memory only);
//!   an API key is never one.
//! - The token asked for names the upstream's resource (its resource metadata's, else its
//!   URL) and the configured `audience`; it is kept as any other grant's token (sealed in the
//!   vault, shared with replicas), and renewed by exchanging again.
//! - With `id_jag` (enterprise-managed authorization), what the organisation's server gives is
//!   an identity assertion (ID-JAG) for the upstream's authorization server (the `audience`,
//!   by its issuer), which Switchyard's client there presents for the token (RFC 7523).
//! - A user's token that the server refused is not sent again: the next one they present is.

use std::sync::Arc;

use tracing::Instrument;

use super::{
    Authorizer, OAuthError,
    authorizer::endpoint_of,
    challenge::Challenge,
    discovery,
    extension_grants::{ACCESS_TOKEN_TYPE, Exchange, ID_JAG_TYPE},
    token::{ClientIdentity, TokenEndpoint, TokenSet},
};
use crate::{
    config::{ExchangeServer, GrantKind, TokenExchangeSettings},
    principal::{Presented, Principal},
};

impl Authorizer {
    /// The token `principal` presented, if this upstream exchanges it and the server has not
    /// refused it.
    pub(super) fn subject(&self, principal: &Principal) -> Option<Presented> {
        if !self.config.exchanges() {
            return None;
        }
        let subject = self.oauth.subjects.of(principal)?;
        let refused = self
            .exchange_state
            .refused
            .get(principal)
            .is_some_and(|refused| *refused == subject);
        (!refused).then_some(subject)
    }

    /// Whether `grant`'s user has a token to exchange (one the server has not refused).
    pub fn exchanges_for(&self, grant: &super::Grant) -> bool {
        self.subject(&grant.principal).is_some()
    }

    /// Exchanges the token `principal` just presented, in the background, unless their grant
    /// holds a good token: their calls then find one ready, and an upstream waiting for some
    /// user's token to list its tools gets one.
    pub(super) fn exchange_soon(self: &Arc<Self>, principal: &Principal) {
        let authorizer = self.clone();
        let principal = principal.clone();
        tokio::spawn(async move {
            let grant = authorizer.grant(&principal).await;
            // A good token is kept; a failure is on the grant, for the user's next call to tell.
            authorizer.token(&grant).await;
        });
    }

    /// A token for the upstream in exchange for `subject`, `principal`'s own, with `scopes`
    /// (else the configured ones, else those the upstream's metadata lists): exchanged for it
    /// directly, or (`id_jag`) for an identity assertion that the upstream's authorization
    /// server takes for it. A refusal is remembered, so that the same token is not offered
    /// again.
    pub(super) async fn exchanged(
        &self,
        principal: &Principal,
        subject: &Presented,
        scopes: Option<Vec<String>>,
        challenge: Option<&Challenge>,
    ) -> Result<TokenSet, OAuthError> {
        let settings = self
            .config
            .token_exchange
            .as_ref()
            .ok_or_else(|| OAuthError::Config("the token exchange is not configured".into()))?;
        let asserting = self.config.exchange_grant() == Some(GrantKind::IdJag);
        let scopes = scopes.or_else(|| self.config.scopes.clone());
        // The upstream's own metadata: its authorization server, which takes the assertion,
        // and what to ask for where it is not configured.
        let upstream = match (asserting, &settings.resource, &scopes) {
            (true, _, _) => Some(self.discovered(false, challenge).await?),
            (false, Some(_), Some(_)) => None,
            (false, _, _) => self.discovered(false, challenge).await.ok(),
        };
        let mut at_exchange = (*self.exchange_endpoint(settings).await?).clone();
        at_exchange.resource = Some(match (&settings.resource, &upstream) {
            (Some(resource), _) => resource.clone(),
            (None, Some(found)) if found.resource.is_some() => found.resource.clone().unwrap(),
            (None, _) => self.url.as_str().to_owned(),
        });
        let scopes = scopes
            .or_else(|| upstream.as_ref().map(|found| found.resource_scopes.clone()))
            .unwrap_or_default();
        let client = ClientIdentity {
            client_id: settings.client_id.clone(),
            client_secret: settings.client_secret.clone(),
            auth_method: settings.auth_method,
        };
        let at_upstream = upstream.as_deref().map(endpoint_of);
        let exchanged = async {
            // An assertion is for the upstream's authorization server, by its issuer.
            let audience = match (&settings.audience, &at_upstream) {
                (Some(audience), _) => Some(audience.as_str()),
                (None, Some(server)) if asserting => Some(server.issuer.as_str()),
                (None, _) => None,
            };
            let token = self
                .exchange(&at_exchange, &client)
                .exchange_token(Exchange {
                    subject: subject.reveal(),
                    subject_type: &settings.subject_token_type,
                    requested_type: if asserting {
                        ID_JAG_TYPE
                    } else {
                        ACCESS_TOKEN_TYPE
                    },
                    audience,
                    scopes: &scopes,
                })
                .await?;
            let (true, Some(upstream), Some(server)) = (asserting, &upstream, &at_upstream) else {
                return Ok(token);
            };
            let ours = self.identity_context().identity(upstream).await?;
            self.exchange(server, &ours)
                .jwt_bearer(&token.access_token, &scopes)
                .await
        }
        .instrument(crate::telemetry::child("oauth token exchange"))
        .await;
        match &exchanged {
            Ok(_) => {
                self.exchange_state.refused.remove(principal);
            }
            Err(OAuthError::Provider { .. }) => {
                self.exchange_state
                    .refused
                    .insert(principal.clone(), subject.clone());
            }
            Err(_) => {}
        }
        exchanged
    }

    /// The exchanging server's token endpoint: given, or found in its metadata once.
    async fn exchange_endpoint(
        &self,
        settings: &TokenExchangeSettings,
    ) -> Result<Arc<TokenEndpoint>, OAuthError> {
        let mut known = self.exchange_state.endpoint.lock().await;
        if let Some(endpoint) = known.as_ref() {
            return Ok(endpoint.clone());
        }
        let endpoint = match &settings.server {
            ExchangeServer::TokenEndpoint(url) => TokenEndpoint {
                url: url.as_str().to_owned(),
                issuer: url.origin().ascii_serialization(),
                resource: None,
                revocation: None,
            },
            ExchangeServer::Issuer(issuer) => {
                let issuer = issuer.as_str().trim_end_matches('/');
                let server = discovery::authorization_server(&self.oauth.http, issuer).await?;
                TokenEndpoint {
                    url: server.token_endpoint.clone().ok_or_else(|| {
                        OAuthError::Discovery(format!(
                            "the authorization server `{issuer}` names no token endpoint"
                        ))
                    })?,
                    issuer: server.issuer.clone().unwrap_or_else(|| issuer.to_owned()),
                    resource: None,
                    revocation: server.revocation_endpoint.clone(),
                }
            }
        };
        let endpoint = Arc::new(endpoint);
        *known = Some(endpoint.clone());
        Ok(endpoint)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        config::{AuthMethod, GrantKind, UpstreamOAuth},
        oauth::{
            Need, authorizer::tests::authorizer, fake_endpoint::FakeEndpoint, subjects::tests::user,
        },
        principal::Identity,
    };

    /// An authorizer exchanging tokens at `server`'s `/token` for `https://files.example.com/mcp`.
    fn exchanging(state: &std::path::Path, server: &FakeEndpoint) -> Authorizer {
        let mut auth = authorizer(state);
        auth.config = UpstreamOAuth {
            grants: vec![GrantKind::TokenExchange],
            scopes: Some(vec!["files:read".into()]),
            token_exchange: Some(Box::new(TokenExchangeSettings {
                server: ExchangeServer::TokenEndpoint(
                    url::Url::parse(&format!("{}/token", server.base)).unwrap(),
                ),
                client_id: "gateway".into(),
                client_secret: Some("gateway-secret".into()),
                auth_method: AuthMethod::ClientSecretBasic,
                audience: Some("files".into()),
                resource: Some("https://files.example.com/mcp".into()),
                subject_token_type: "urn:ietf:params:oauth:token-type:jwt".into(),
            })),
            ..UpstreamOAuth::default()
        };
        auth
    }

    #[tokio::test]
    async fn a_users_own_token_is_exchanged_for_theirs_and_an_api_key_never_is() {
        let server = FakeEndpoint::routes(|_| {
            vec![(
                "/token",
                r#"{"access_token":"for-alice","token_type":"Bearer","expires_in":600,
                    "issued_token_type":"urn:ietf:params:oauth:token-type:access_token"}"#
                    .into(),
            )]
        })
        .await;
        let state = tempfile::tempdir().unwrap();
        let auth = exchanging(state.path(), &server);
        let alice = user("alice", "alice-jwt", None);
        auth.oauth.subjects.present(&alice);
        let grant = auth.grant(&alice).await;
        assert!(auth.renews_alone(&grant));
        assert_eq!(auth.token(&grant).await.as_deref(), Some("for-alice"));
        let seen = server.seen();
        assert_eq!(seen.len(), 1);
        let asked = &seen[0];
        for (field, value) in [
            (
                "grant_type",
                "urn:ietf:params:oauth:grant-type:token-exchange",
            ),
            ("subject_token", "alice-jwt"),
            ("subject_token_type", "urn:ietf:params:oauth:token-type:jwt"),
            (
                "requested_token_type",
                "urn:ietf:params:oauth:token-type:access_token",
            ),
            ("resource", "https://files.example.com/mcp"),
            ("audience", "files"),
            ("scope", "files:read"),
        ] {
            assert_eq!(asked.field(field).as_deref(), Some(value), "{field}");
        }
        assert_eq!(asked.field("client_secret"), None, "in the Basic header");
        assert!(
            asked.headers["authorization"]
                .to_str()
                .unwrap()
                .starts_with("Basic ")
        );

        // An API key user has nothing to exchange: nothing is sent for them.
        let carol = Principal::authenticated("key:carol", Identity::default());
        auth.oauth.subjects.present(&carol);
        let grant = auth.grant(&carol).await;
        assert!(!auth.renews_alone(&grant));
        assert_eq!(auth.token(&grant).await, None);
        assert_eq!(server.seen().len(), 1);
    }

    #[tokio::test]
    async fn a_refused_token_is_not_offered_again_and_the_grant_says_why() {
        let server = FakeEndpoint::start(
            400,
            r#"{"error":"invalid_grant","error_description":"subject token expired"}"#,
        )
        .await;
        let state = tempfile::tempdir().unwrap();
        let auth = exchanging(state.path(), &server);
        auth.oauth.subjects.present(&user("alice", "old-jwt", None));
        let grant = auth.grant(&Principal::user("jwt:alice")).await;
        assert_eq!(auth.token(&grant).await, None);
        let Need::Failed(why) = grant.need() else {
            panic!("{:?}", grant.need())
        };
        assert!(
            why.contains("invalid_grant") && why.contains("expired"),
            "{why}"
        );
        assert!(!why.contains("old-jwt"), "{why}");
        assert!(
            !auth.renews_alone(&grant),
            "the same token is not offered again"
        );
        assert_eq!(auth.token(&grant).await, None);
        assert_eq!(server.seen().len(), 1);
        // Signing in again brings a new token, which is tried.
        auth.oauth.subjects.present(&user("alice", "new-jwt", None));
        assert!(auth.renews_alone(&grant));
        assert_eq!(auth.token(&grant).await, None);
        let seen = server.seen();
        assert_eq!(seen.len(), 2);
        assert_eq!(seen[1].field("subject_token").as_deref(), Some("new-jwt"));
    }
}
