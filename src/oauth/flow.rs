//! The authorization code flow of one upstream: the link a user follows (discovery, client
//! identity, scopes, PKCE and `state`, recorded as pending), and its conclusion when the
//! browser comes back to the callback (the issuer checked, the code exchanged, the tokens
//! kept, or the failure recorded for display).

use std::time::SystemTime;

use oauth2::{
    AuthUrl, ClientId, CsrfToken, PkceCodeChallenge, RedirectUrl, Scope, basic::BasicClient,
};

use super::{
    Authorizer, CallbackQuery, OAuthError,
    authorizer::{endpoint_of, split_scopes},
    challenge::Challenge,
    discovery::{Discovered, ServerMetadata},
    grant::{Grant, Link, Need},
    pending::PendingAuthorization,
    token::TokenSet,
};
use crate::principal::Principal;

impl Authorizer {
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
        let client = self.identity_context().identity(&discovered).await?;
        let scopes = self.scopes(&discovered, challenge, step_up);
        let redirect_uri = self.oauth.redirect_uri.clone();
        let state = CsrfToken::new_random_len(32).secret().clone();
        let (pkce, verifier) = PkceCodeChallenge::new_random_sha256();
        let url = authorization_url(
            server,
            &client.client_id,
            (&redirect_uri, &state),
            pkce,
            &scopes,
            discovered.resource.as_deref(),
        )?;
        let created = SystemTime::now();
        let link = Link {
            url: self.oauth.connect_url(&state),
            state: state.clone(),
            created,
            expires: created + self.oauth.settings.authorization_lifetime,
            elicitation_id: uuid::Uuid::new_v4().to_string(),
        };
        let pending = PendingAuthorization {
            upstream: self.upstream.clone(),
            principal: grant.principal.clone(),
            verifier: verifier.secret().clone(),
            authorize_url: url,
            redirect_uri,
            scopes,
            endpoint: endpoint_of(&discovered),
            client,
            issuer: server.issuer.clone(),
            require_iss: server.authorization_response_iss_parameter_supported,
            created,
            superseded: false,
        };
        let link = self.oauth.pending.insert(state, pending, link).await;
        tracing::info!(upstream = %self.upstream, principal = %grant.principal, "authorization needed: {}", link.url);
        // The link is the gateway's own connect URL: it names the authorization only sealed,
        // and leads to the authorization server only in the browser of the user it is for.
        Ok(link)
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
        let grant = self.grant(&pending.principal).await;
        match self.redeem(&pending, query).await {
            Ok(token) => {
                tracing::info!(upstream = %self.upstream, principal = %grant.principal, "authorized");
                self.keep(&grant, token).await;
                Ok(())
            }
            Err(error) => {
                tracing::warn!(upstream = %self.upstream, principal = %grant.principal, %error, "authorization failed");
                grant.fail(error.to_string());
                Err(error)
            }
        }
    }

    async fn redeem(
        &self,
        pending: &PendingAuthorization,
        query: CallbackQuery,
    ) -> Result<TokenSet, OAuthError> {
        let code = answered_code(query, pending.issuer.as_deref(), pending.require_iss)?;
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
                .forget_registration(&pending.endpoint.issuer)
                .await;
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
}

/// Where a browser is sent to authorize: `server`'s authorization endpoint (which must confirm
/// PKCE with S256, as MCP requires), for `client_id`, back to the redirect URI with the
/// `state`, with the PKCE challenge, `scopes` and the `resource` (RFC 8707).
pub(super) fn authorization_url(
    server: &ServerMetadata,
    client_id: &str,
    (redirect_uri, state): (&str, &str),
    pkce: PkceCodeChallenge,
    scopes: &[String],
    resource: Option<&str>,
) -> Result<String, OAuthError> {
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
    let auth_url = AuthUrl::new(endpoint.to_owned())
        .map_err(|e| OAuthError::Discovery(format!("authorization_endpoint: {e}")))?;
    let redirect = RedirectUrl::new(redirect_uri.to_owned())
        .map_err(|e| OAuthError::Config(format!("redirect URI: {e}")))?;
    let client = BasicClient::new(ClientId::new(client_id.to_owned()))
        .set_auth_uri(auth_url)
        .set_redirect_uri(redirect);
    let mut request = client
        .authorize_url(|| CsrfToken::new(state.to_owned()))
        .set_pkce_challenge(pkce)
        .add_scopes(scopes.iter().cloned().map(Scope::new));
    if let Some(resource) = resource {
        request = request.add_extra_param("resource", resource.to_owned());
    }
    Ok(request.url().0.to_string())
}

/// The code of an authorization response, once it is no error and its `iss` (RFC 9207) is
/// the `expected` issuer's, or absent where the server did not promise one (`required`).
pub(super) fn answered_code(
    query: CallbackQuery,
    expected: Option<&str>,
    required: bool,
) -> Result<String, OAuthError> {
    if let Some(error) = query.error {
        return Err(OAuthError::Provider {
            error,
            description: query.error_description,
        });
    }
    match (query.iss.as_deref(), expected) {
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
        (None, _) if required => {
            return Err(OAuthError::Callback(
                "the authorization response lacks the `iss` its server promised".into(),
            ));
        }
        _ => {}
    }
    query
        .code
        .ok_or_else(|| OAuthError::Callback("the authorization response has no code".into()))
}
