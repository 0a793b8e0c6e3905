//! How Switchyard identifies itself to an authorization server, in the MCP spec's order of
//! preference: a client registered beforehand (from the configuration); a client ID metadata
//! document (its https URL is the `client_id`), where the server accepts those; dynamic client
//! registration (RFC 7591), done once per (upstream, authorization server) and kept in the
//! store, so that tokens stay refreshable across restarts.

use serde::{Deserialize, Serialize};
use url::Url;

use super::{
    OAuthError,
    answer::unreadable,
    discovery::Discovered,
    http::Http,
    token::ClientIdentity,
    vault::{RecordKind, Vault},
};
use crate::config::{AuthMethod, UpstreamOAuth};

/// What choosing an identity needs to know.
pub struct Context<'a> {
    pub http: &'a Http,
    pub vault: &'a Vault,
    pub config: &'a UpstreamOAuth,
    pub client_name: &'a str,
    /// The client ID metadata document URL, if Switchyard has one (https only).
    pub metadata_url: Option<&'a Url>,
    pub redirect_uri: &'a str,
    /// The store key of this upstream's registrations.
    pub registration_key: String,
}

/// A dynamic registration, kept per authorization server.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Registration {
    issuer: String,
    redirect_uri: String,
    client: ClientIdentity,
}

impl Context<'_> {
    /// The identity to use with the server `discovered` found.
    pub async fn identity(&self, discovered: &Discovered) -> Result<ClientIdentity, OAuthError> {
        if let Some(client_id) = &self.config.client_id {
            return Ok(self.preregistered(client_id, discovered));
        }
        if discovered.server.client_id_metadata_document_supported
            && let Some(url) = self.metadata_url
        {
            return Ok(ClientIdentity {
                client_id: url.to_string(),
                client_secret: None,
                auth_method: AuthMethod::None,
            });
        }
        self.registered(discovered).await
    }

    fn preregistered(&self, client_id: &str, discovered: &Discovered) -> ClientIdentity {
        let secret = self.config.client_secret.clone();
        let server = &discovered.server;
        let auth_method = match (self.config.auth_method, &secret) {
            (Some(method), _) => method,
            (None, _) if self.config.private_key.is_some() => AuthMethod::PrivateKeyJwt,
            (None, Some(_))
                if !server.supports_auth_method("client_secret_basic")
                    && server.supports_auth_method("client_secret_post") =>
            {
                AuthMethod::ClientSecretPost
            }
            (None, Some(_)) => AuthMethod::ClientSecretBasic,
            (None, None) => AuthMethod::None,
        };
        ClientIdentity {
            client_id: client_id.to_owned(),
            client_secret: secret,
            auth_method,
        }
    }

    /// The stored registration with this server, or a new one.
    async fn registered(&self, discovered: &Discovered) -> Result<ClientIdentity, OAuthError> {
        let key = format!("{}\0{}", self.registration_key, discovered.issuer);
        if let Some(stored) = self
            .vault
            .load::<Registration>(RecordKind::Clients, &key)
            .await?
            && stored.issuer == discovered.issuer
            && stored.redirect_uri == self.redirect_uri
        {
            return Ok(stored.client);
        }
        let client = self.register(discovered).await?;
        let registration = Registration {
            issuer: discovered.issuer.clone(),
            redirect_uri: self.redirect_uri.to_owned(),
            client: client.clone(),
        };
        self.vault
            .save(RecordKind::Clients, &key, &registration)
            .await?;
        Ok(client)
    }

    /// Forgets the stored registration with this server (it was refused).
    pub async fn forget_registration(&self, issuer: &str) {
        let key = format!("{}\0{issuer}", self.registration_key);
        if let Err(error) = self.vault.delete(RecordKind::Clients, &key).await {
            tracing::warn!(%error, "cannot delete a client registration");
        }
    }

    async fn register(&self, discovered: &Discovered) -> Result<ClientIdentity, OAuthError> {
        let endpoint = discovered
            .server
            .registration_endpoint
            .as_deref()
            .ok_or_else(|| {
                OAuthError::Registration(
                    "the authorization server offers no dynamic client registration, and no \
                 client_id is configured for this upstream"
                        .into(),
                )
            })?;
        let endpoint = Url::parse(endpoint)
            .map_err(|_| OAuthError::Registration(format!("`{endpoint}` is not a URL")))?;
        let server = &discovered.server;
        let method = ["client_secret_basic", "client_secret_post", "none"]
            .into_iter()
            .find(|m| server.supports_auth_method(m))
            .unwrap_or("none");
        let body = serde_json::json!({
            "client_name": self.client_name,
            "redirect_uris": [self.redirect_uri],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": method,
            "application_type": application_type(self.redirect_uri),
        });
        let (status, answer) = self.http.post_json(&endpoint, &body).await?;
        if !status.is_success() {
            return Err(OAuthError::Registration(describe_failure(status, &answer)));
        }
        #[derive(Deserialize)]
        struct Registered {
            client_id: String,
            client_secret: Option<String>,
            token_endpoint_auth_method: Option<String>,
        }
        let mut reader = serde_json::Deserializer::from_slice(&answer);
        let registered: Registered =
            serde_path_to_error::deserialize(&mut reader).map_err(|e| {
                // Never serde's own message: it would quote the client secret.
                OAuthError::Registration(unreadable("the registration answer", &e))
            })?;
        let secret = registered.client_secret.filter(|s| !s.is_empty());
        let auth_method = registered
            .token_endpoint_auth_method
            .as_deref()
            .and_then(AuthMethod::parse)
            .unwrap_or(if secret.is_some() {
                AuthMethod::ClientSecretBasic
            } else {
                AuthMethod::None
            });
        tracing::info!(issuer = %discovered.issuer, client_id = %registered.client_id, "registered with an authorization server");
        Ok(ClientIdentity {
            client_id: registered.client_id,
            client_secret: secret,
            auth_method,
        })
    }
}

/// `native` for a loopback redirect (RFC 8252), `web` otherwise.
fn application_type(redirect_uri: &str) -> &'static str {
    let loopback = Url::parse(redirect_uri).ok().is_some_and(|url| {
        matches!(
            url.host(),
            Some(url::Host::Ipv4(ip)) if ip.is_loopback()
        ) || matches!(url.host(), Some(url::Host::Ipv6(ip)) if ip.is_loopback())
            || url.host_str() == Some("localhost")
    });
    if loopback { "native" } else { "web" }
}

fn describe_failure(status: reqwest::StatusCode, body: &[u8]) -> String {
    #[derive(Deserialize)]
    struct Failure {
        error: String,
        error_description: Option<String>,
    }
    match serde_json::from_slice::<Failure>(body) {
        Ok(failure) => match failure.error_description {
            Some(description) => format!("{}: {description}", failure.error),
            None => failure.error,
        },
        Err(_) => format!("HTTP {status}"),
    }
}

#[cfg(test)]
mod tests {
    use super::application_type;

    #[test]
    fn loopback_redirects_are_native() {
        assert_eq!(
            application_type("http://127.0.0.1:8080/oauth/callback"),
            "native"
        );
        assert_eq!(
            application_type("http://localhost/oauth/callback"),
            "native"
        );
        assert_eq!(application_type("http://[::1]:9/cb"), "native");
        assert_eq!(
            application_type("https://gw.example.com/oauth/callback"),
            "web"
        );
    }
}
