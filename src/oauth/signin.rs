//! Signing a user in, in their browser, at the authorization server of the gateway's own
//! `[auth]`: how a connect link learns that whoever followed it is the user it was made for
//! (the MCP spec's guard against a link sent to someone else). Switchyard is a client of that
//! server as it is of upstreams' (its metadata, a configured or registered identity, PKCE, the
//! gateway itself as the `resource`); the access token the code buys is then checked exactly
//! as an MCP request's would be, and its user compared with the link's.
//!
//! Nothing is kept between the two legs: the `state` is the sign-in's own record (the connect
//! link it is for, the PKCE verifier, when it began), sealed, and a cookie binds it to the
//! browser that began it.

use std::time::{Duration, SystemTime};

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use oauth2::PkceCodeChallenge;
use serde::{Deserialize, Serialize};

use super::{
    CallbackQuery, OAuth, OAuthError,
    discovery::{self, Discovered},
    flow::{answered_code, authorization_url},
    identity,
    token::{ClientIdentity, TokenEndpoint, TokenExchange},
};
use crate::config::{SignInClient, UpstreamOAuth};

/// What sign-in states seal.
const PURPOSE: &[u8] = b"switchyard oauth signin";

/// Where, and as whom, users sign in: from `[auth]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignIn {
    /// The authorization server's issuer identifier.
    pub issuer: String,
    /// The gateway's resource URI, which the token's audience must be.
    pub resource: String,
    /// The scopes every request needs.
    pub scopes: Vec<String>,
    pub client: SignInClient,
}

/// The sign-in's own record, carried sealed in its `state`.
#[derive(Serialize, Deserialize)]
struct Record {
    /// The connect link's id, where the browser goes on once signed in.
    connect: String,
    verifier: String,
    began: SystemTime,
}

/// The server's metadata and Switchyard's identity there, found once.
pub(super) struct Known {
    issuer: String,
    discovered: Discovered,
    client: ClientIdentity,
}

impl OAuth {
    /// `{public_url}/oauth/signin`: where the authorization server sends the browser back.
    fn signin_redirect(&self) -> String {
        format!("{}/oauth/signin", self.base)
    }

    /// Where to send a browser to sign in for the connect link `connect`, and the `state` to
    /// bind it to (see `browser_binding`).
    pub async fn begin_signin(
        &self,
        signin: &SignIn,
        connect: &str,
    ) -> Result<(String, String), OAuthError> {
        let (discovered, client) = self.signin_server(signin).await?;
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let record = Record {
            connect: connect.to_owned(),
            verifier: verifier.secret().clone(),
            began: SystemTime::now(),
        };
        let plain = serde_json::to_vec(&record).expect("a sign-in record serializes");
        let state = URL_SAFE_NO_PAD.encode(self.sealer.seal(PURPOSE, &plain));
        let url = authorization_url(
            &discovered.server,
            &client.client_id,
            (&self.signin_redirect(), &state),
            challenge,
            &signin.scopes,
            Some(&signin.resource),
        )?;
        Ok((url, state))
    }

    /// Concludes a sign-in: the connect link it was for, and the access token the code
    /// bought (for the caller to check as any request's). `state` is the callback's.
    pub async fn finish_signin(
        &self,
        signin: &SignIn,
        state: &str,
        query: CallbackQuery,
    ) -> Result<(String, String), OAuthError> {
        let record = URL_SAFE_NO_PAD
            .decode(state)
            .ok()
            .and_then(|sealed| self.sealer.open(PURPOSE, &sealed))
            .and_then(|plain| serde_json::from_slice::<Record>(&plain).ok())
            .ok_or_else(|| {
                OAuthError::Callback("this sign-in is unknown; start it again".into())
            })?;
        let age = record.began.elapsed().unwrap_or(Duration::MAX);
        if age >= self.settings.authorization_lifetime {
            return Err(OAuthError::Callback(
                "this sign-in expired; start it again".into(),
            ));
        }
        let (discovered, client) = self.signin_server(signin).await?;
        let server = &discovered.server;
        let code = answered_code(
            query,
            server.issuer.as_deref(),
            server.authorization_response_iss_parameter_supported,
        )?;
        let endpoint = TokenEndpoint {
            url: discovered.server.token_endpoint.clone().unwrap_or_default(),
            issuer: discovered.issuer.clone(),
            resource: Some(signin.resource.clone()),
            revocation: None,
        };
        let exchange = TokenExchange {
            http: &self.http,
            endpoint: &endpoint,
            client: &client,
            private_key: None,
        };
        let token = exchange
            .code(
                code,
                record.verifier,
                &self.signin_redirect(),
                &signin.scopes,
            )
            .await?;
        Ok((record.connect, token.access_token))
    }

    /// The server `signin` names and Switchyard's identity there: found once, found again
    /// when `[auth]` names another.
    async fn signin_server(
        &self,
        signin: &SignIn,
    ) -> Result<(Discovered, ClientIdentity), OAuthError> {
        let mut known = self.signin.lock().await;
        if let Some(known) = known.as_ref()
            && known.issuer == signin.issuer
        {
            return Ok((known.discovered.clone(), known.client.clone()));
        }
        let server = discovery::authorization_server(&self.http, &signin.issuer).await?;
        let discovered = Discovered {
            resource: Some(signin.resource.clone()),
            resource_scopes: signin.scopes.clone(),
            issuer: signin.issuer.clone(),
            server,
        };
        let config = UpstreamOAuth {
            client_id: signin.client.client_id.clone(),
            client_secret: signin.client.client_secret.clone(),
            ..UpstreamOAuth::default()
        };
        let redirect_uri = self.signin_redirect();
        let context = identity::Context {
            http: &self.http,
            vault: &self.vault,
            config: &config,
            client_name: &self.settings.client_name,
            metadata_url: self.metadata_url.as_ref(),
            redirect_uri: &redirect_uri,
            registration_key: "signin".into(),
        };
        let client = context.identity(&discovered).await?;
        *known = Some(Known {
            issuer: signin.issuer.clone(),
            discovered: discovered.clone(),
            client: client.clone(),
        });
        Ok((discovered, client))
    }
}
