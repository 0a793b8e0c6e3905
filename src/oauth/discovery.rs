//! Finding an upstream's authorization server, as the MCP authorization spec orders it:
//!
//! 1. Protected-resource metadata (RFC 9728): at the `resource_metadata` URL of the upstream's
//!    challenge, else at `/.well-known/oauth-protected-resource{path}`, else at the root form.
//!    Its `resource` must name the upstream (same origin, a path prefix); it is kept verbatim as
//!    the RFC 8707 resource indicator. Its first authorization server is the one used.
//! 2. Authorization-server metadata for that issuer, RFC 8414 and OpenID Connect forms in the
//!    spec's order (path-inserted first); its `issuer` must equal the one asked for.
//!
//! A server with no resource metadata is taken to be a 2025-03-26 server: its own origin is the
//! authorization server, with metadata at the root or, lacking that, the default endpoints.

use serde::Deserialize;
use url::Url;

use super::{OAuthError, challenge::Challenge, http::Http};

/// What discovery found for one upstream.
#[derive(Debug, Clone)]
pub struct Discovered {
    /// The resource indicator to send: the metadata's `resource`, verbatim. `None` for a
    /// server without resource metadata.
    pub resource: Option<String>,
    /// The scopes the resource metadata lists.
    pub resource_scopes: Vec<String>,
    /// The authorization server's identifier, as the resource named it.
    pub issuer: String,
    pub server: ServerMetadata,
}

/// RFC 8414 authorization-server metadata, the fields Switchyard uses.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ServerMetadata {
    pub issuer: Option<String>,
    pub authorization_endpoint: Option<String>,
    pub token_endpoint: Option<String>,
    pub registration_endpoint: Option<String>,
    pub revocation_endpoint: Option<String>,
    #[serde(default)]
    pub scopes_supported: Vec<String>,
    pub code_challenge_methods_supported: Option<Vec<String>>,
    pub token_endpoint_auth_methods_supported: Option<Vec<String>>,
    #[serde(default)]
    pub authorization_response_iss_parameter_supported: bool,
    #[serde(default)]
    pub client_id_metadata_document_supported: bool,
}

impl ServerMetadata {
    /// Whether the server says it supports PKCE with S256; the MCP spec requires clients to
    /// refuse the authorization code flow otherwise.
    pub fn confirms_pkce(&self) -> bool {
        self.code_challenge_methods_supported
            .as_ref()
            .is_some_and(|methods| methods.iter().any(|m| m == "S256"))
    }

    /// Whether the server lists `method` for token endpoint authentication (an absent list
    /// means `client_secret_basic`, RFC 8414 §2).
    pub fn supports_auth_method(&self, method: &str) -> bool {
        match &self.token_endpoint_auth_methods_supported {
            Some(methods) => methods.iter().any(|m| m == method),
            None => method == "client_secret_basic",
        }
    }
}

#[derive(Debug, Deserialize)]
struct ResourceMetadata {
    resource: Option<String>,
    #[serde(default)]
    authorization_servers: Vec<String>,
    #[serde(default)]
    scopes_supported: Vec<String>,
}

/// Discovers the authorization server of the MCP server at `upstream`.
pub async fn discover(
    http: &Http,
    upstream: &Url,
    challenge: Option<&Challenge>,
) -> Result<Discovered, OAuthError> {
    let advertised = challenge.and_then(|c| c.resource_metadata.as_deref());
    let Some((prm_url, prm)) = resource_metadata(http, upstream, advertised).await? else {
        return legacy(http, upstream, challenge.is_some()).await;
    };
    let resource = prm.resource.ok_or_else(|| {
        OAuthError::Discovery(format!(
            "the resource metadata at {prm_url} has no `resource`"
        ))
    })?;
    if !names_resource(&resource, upstream) {
        return Err(OAuthError::Discovery(format!(
            "the resource metadata at {prm_url} is for `{resource}`, not for {upstream}"
        )));
    }
    let issuer = prm
        .authorization_servers
        .into_iter()
        .next()
        .ok_or_else(|| {
            OAuthError::Discovery(format!(
                "the resource metadata at {prm_url} names no authorization server"
            ))
        })?;
    let server = server_metadata(http, &issuer).await?.ok_or_else(|| {
        OAuthError::Discovery(format!(
            "no authorization server metadata found for `{issuer}`"
        ))
    })?;
    if server.issuer.as_deref() != Some(issuer.as_str()) {
        return Err(OAuthError::Discovery(format!(
            "the authorization server metadata for `{issuer}` names issuer `{}`",
            server.issuer.as_deref().unwrap_or("(none)")
        )));
    }
    Ok(Discovered {
        resource: Some(resource),
        resource_scopes: prm.scopes_supported,
        issuer,
        server: checked(server)?,
    })
}

/// The metadata of the authorization server `issuer` itself (the gateway's own, for signing
/// users in): found at the spec's URLs, naming that same issuer, with a token endpoint.
pub async fn authorization_server(http: &Http, issuer: &str) -> Result<ServerMetadata, OAuthError> {
    let server = server_metadata(http, issuer).await?.ok_or_else(|| {
        OAuthError::Discovery(format!(
            "no authorization server metadata found for `{issuer}`"
        ))
    })?;
    let named = server.issuer.as_deref().map(|i| i.trim_end_matches('/'));
    if named != Some(issuer.trim_end_matches('/')) {
        return Err(OAuthError::Discovery(format!(
            "the authorization server metadata for `{issuer}` names issuer `{}`",
            server.issuer.as_deref().unwrap_or("(none)")
        )));
    }
    checked(server)
}

/// The resource metadata: at the advertised URL only, if there is one; else at the
/// path-inserted well-known URL, then the root one.
async fn resource_metadata(
    http: &Http,
    upstream: &Url,
    advertised: Option<&str>,
) -> Result<Option<(Url, ResourceMetadata)>, OAuthError> {
    let candidates = match advertised {
        Some(url) => {
            let url = upstream.join(url).map_err(|_| {
                OAuthError::Discovery(format!("`{url}` is not a resource metadata URL"))
            })?;
            // The upstream chooses this URL: fetched anywhere else, it would make the gateway
            // request any address the upstream likes (on its network, with its identity).
            if url.origin() != upstream.origin() {
                return Err(OAuthError::Discovery(format!(
                    "the upstream names resource metadata on another origin ({url}); \
                     Switchyard reads it only from the upstream's own origin"
                )));
            }
            vec![url]
        }
        None => well_known(upstream, "oauth-protected-resource"),
    };
    for url in candidates {
        if let Some(metadata) = http.get_json::<ResourceMetadata>(&url).await? {
            return Ok(Some((url, metadata)));
        }
    }
    Ok(None)
}

/// `/.well-known/{name}{path}` and, for a path other than `/`, `/.well-known/{name}`.
fn well_known(base: &Url, name: &str) -> Vec<Url> {
    let path = base.path().trim_end_matches('/');
    let at = |path: &str| {
        let mut url = base.clone();
        url.set_path(path);
        url.set_query(None);
        url.set_fragment(None);
        url
    };
    let mut urls = Vec::new();
    if !path.is_empty() {
        urls.push(at(&format!("/.well-known/{name}{path}")));
    }
    urls.push(at(&format!("/.well-known/{name}")));
    urls
}

/// The metadata of the authorization server `issuer`, from the first of the spec's URLs that
/// has it: for an issuer with a path, RFC 8414 path-inserted, OpenID Connect path-inserted,
/// then OpenID Connect path-appended; for one without, the RFC 8414 and OpenID Connect roots.
async fn server_metadata(http: &Http, issuer: &str) -> Result<Option<ServerMetadata>, OAuthError> {
    let base = Url::parse(issuer)
        .map_err(|_| OAuthError::Discovery(format!("`{issuer}` is not an issuer URL")))?;
    let path = base.path().trim_end_matches('/');
    let at = |path: String| {
        let mut url = base.clone();
        url.set_path(&path);
        url.set_query(None);
        url
    };
    let candidates = if path.is_empty() {
        vec![
            at("/.well-known/oauth-authorization-server".into()),
            at("/.well-known/openid-configuration".into()),
        ]
    } else {
        vec![
            at(format!("/.well-known/oauth-authorization-server{path}")),
            at(format!("/.well-known/openid-configuration{path}")),
            at(format!("{path}/.well-known/openid-configuration")),
        ]
    };
    for url in candidates {
        if let Some(metadata) = http.get_json::<ServerMetadata>(&url).await? {
            return Ok(Some(metadata));
        }
    }
    Ok(None)
}

/// A 2025-03-26 server: its origin is the authorization server; metadata at the root, or the
/// default endpoints `/authorize`, `/token` and `/register` — assumed only if the server did
/// ask for a bearer token (a 401 without one may be about anything else, an API key say).
/// No resource indicator is sent.
async fn legacy(http: &Http, upstream: &Url, bearer: bool) -> Result<Discovered, OAuthError> {
    let mut origin = upstream.clone();
    origin.set_path("/");
    origin.set_query(None);
    origin.set_fragment(None);
    let issuer = origin.as_str().trim_end_matches('/').to_owned();
    let metadata_url = origin
        .join("/.well-known/oauth-authorization-server")
        .expect("a fixed path joins");
    let server = match http.get_json::<ServerMetadata>(&metadata_url).await? {
        Some(server) => {
            if server.issuer.as_deref() != Some(issuer.as_str()) {
                // Some 2025-03-26 servers name another issuer; the spec of that time did not
                // require them to match, so go on.
                tracing::debug!(%issuer, named = ?server.issuer, "legacy metadata names another issuer");
            }
            server
        }
        None if !bearer => {
            return Err(OAuthError::Discovery(
                "the upstream refused the request, but names no way to authorize: no \
                 `WWW-Authenticate: Bearer` challenge, no protected-resource or \
                 authorization-server metadata"
                    .into(),
            ));
        }
        None => {
            let endpoint = |path: &str| Some(format!("{issuer}{path}"));
            ServerMetadata {
                issuer: None,
                authorization_endpoint: endpoint("/authorize"),
                token_endpoint: endpoint("/token"),
                registration_endpoint: endpoint("/register"),
                // The defaults of that time; PKCE is used all the same.
                code_challenge_methods_supported: Some(vec!["S256".into()]),
                ..ServerMetadata::default()
            }
        }
    };
    Ok(Discovered {
        resource: None,
        resource_scopes: Vec::new(),
        issuer,
        server: checked(server)?,
    })
}

/// Refuses a server without a token endpoint.
fn checked(server: ServerMetadata) -> Result<ServerMetadata, OAuthError> {
    if server.token_endpoint.is_none() {
        return Err(OAuthError::Discovery(
            "the authorization server metadata has no token_endpoint".into(),
        ));
    }
    Ok(server)
}

/// Whether a resource identifier names `upstream`: same scheme, host and port, and a path that
/// is the upstream's path or a parent of it (whole segments).
fn names_resource(resource: &str, upstream: &Url) -> bool {
    let Ok(resource) = Url::parse(resource) else {
        return false;
    };
    if resource.fragment().is_some() || resource.origin() != upstream.origin() {
        return false;
    }
    let prefix = resource.path().trim_end_matches('/');
    let path = upstream.path();
    path == prefix || path.starts_with(&format!("{prefix}/")) || prefix.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn well_known_urls_in_the_specs_order() {
        let base = Url::parse("https://mcp.example.com/api/mcp?x=1").unwrap();
        let urls: Vec<String> = well_known(&base, "oauth-protected-resource")
            .iter()
            .map(Url::to_string)
            .collect();
        assert_eq!(
            urls,
            [
                "https://mcp.example.com/.well-known/oauth-protected-resource/api/mcp",
                "https://mcp.example.com/.well-known/oauth-protected-resource",
            ]
        );
        let root = Url::parse("https://mcp.example.com/").unwrap();
        assert_eq!(well_known(&root, "oauth-protected-resource").len(), 1);
    }

    #[test]
    fn resource_must_name_the_upstream() {
        let upstream = Url::parse("http://localhost:3000/mcp").unwrap();
        assert!(names_resource("http://localhost:3000/mcp", &upstream));
        assert!(names_resource("http://localhost:3000", &upstream));
        assert!(names_resource("http://localhost:3000/", &upstream));
        assert!(!names_resource("http://localhost:3000/mc", &upstream));
        assert!(!names_resource("https://localhost:3000/mcp", &upstream));
        assert!(!names_resource("https://evil.example.com/mcp", &upstream));
        assert!(!names_resource("http://localhost:3000/mcp#x", &upstream));
        assert!(!names_resource("http://localhost:3000/mcp/sub", &upstream));
    }

    #[test]
    fn a_server_must_confirm_pkce() {
        let server = |methods: Option<Vec<&str>>| ServerMetadata {
            code_challenge_methods_supported: methods
                .map(|m| m.into_iter().map(str::to_owned).collect()),
            ..ServerMetadata::default()
        };
        assert!(server(Some(vec!["plain", "S256"])).confirms_pkce());
        assert!(!server(Some(vec!["plain"])).confirms_pkce());
        assert!(!server(None).confirms_pkce());
    }
}
