//! OAuth towards upstream MCP servers: Switchyard is the OAuth client of every upstream that
//! requires authorization, on its users' behalf, so MCP clients never hold upstream credentials.
//!
//! | file         | what                                                                       |
//! |--------------|----------------------------------------------------------------------------|
//! | `challenge`  | reading an upstream's `WWW-Authenticate`                                    |
//! | `discovery`  | protected-resource and authorization-server metadata (RFC 9728, 8414, OIDC) |
//! | `identity`   | pre-registered client, client ID metadata document, or dynamic registration |
//! | `token`      | the token endpoint: code exchange, refresh, client credentials              |
//! | `extension_grants` | the token exchange and JWT bearer requests                            |
//! | `answer`     | the token endpoint's answer, and failures told without quoting it           |
//! | `exchange`   | the token exchange grant: users' own tokens exchanged for the upstream's   |
//! | `grant`      | one (upstream, principal)'s tokens or what it lacks                         |
//! | `authorizer` | one upstream's grants: tokens for requests, kept in step with the vault      |
//! | `renewal`    | renewing a grant's token, and what 401s and 403s mean                       |
//! | `flow`       | the authorization code flow: links, and the callback's conclusion          |
//! | `forget`     | revoking and forgetting an upstream's tokens                                |
//! | `hook`       | the `RequestHook` that puts the token on every upstream request             |
//! | `pending`    | authorizations in progress, by `state`                                      |
//! | `subjects`   | the tokens users presented, kept for the exchange, and what it refused     |
//! | `signin`     | signing a user in at the gateway's own authorization server, in their browser |
//! | `vault`      | tokens and registrations kept: files, or the store replicas share          |
//! | `fake_endpoint` | (tests only) a stand-in authorization server that records requests       |
//!
//! How an authorization goes: an upstream answers 401; the connection's hook finds no usable
//! token and marks the grant as needing authorization; the supervisor (or the router, for a
//! client's call) asks for a link, which discovers the authorization server, picks the client
//! identity and records a pending authorization under a fresh `state`; the user follows the
//! link; the authorization server redirects to `/oauth/callback` (see `front::oauth`), which
//! calls `OAuth::callback`: the code is exchanged, the tokens stored, and the grant's waiters
//! woken.

mod answer;
mod authorizer;
pub mod challenge;
mod discovery;
mod exchange;
mod extension_grants;
#[cfg(test)]
mod fake_endpoint;
mod flow;
mod forget;
mod grant;
mod hook;
mod http;
mod identity;
mod pending;
mod renewal;
mod signin;
mod subjects;
mod token;
mod vault;

use std::sync::{Arc, Weak};

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use dashmap::DashMap;
use serde::Serialize;
use url::Url;

pub use authorizer::{Authorizer, Rejection};
pub use grant::{Grant, Link, Need};
pub use hook::OAuthHook;
pub use pending::Started;
pub use signin::SignIn;
pub use vault::{VaultError, write_new_private};

use self::{http::Http, pending::Pending, vault::Vault};
use crate::{
    audit::Audit,
    config::{OAuthSettings, UpstreamOAuth},
    names::UpstreamName,
    principal::Principal,
    store::{Heard, Store},
};

/// Why an OAuth step failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum OAuthError {
    #[error("{0}")]
    Discovery(String),
    #[error("{0}")]
    Http(String),
    #[error("client registration failed: {0}")]
    Registration(String),
    /// An error the authorization server sent (RFC 6749 §5.2 and §4.1.2.1).
    #[error("the authorization server answered {error}{}", .description.as_deref().map(|d| format!(": {d}")).unwrap_or_default())]
    Provider {
        error: String,
        description: Option<String>,
    },
    #[error("{0}")]
    Callback(String),
    #[error("{0}")]
    Config(String),
    #[error("the token store: {0}")]
    Store(String),
}

impl From<VaultError> for OAuthError {
    fn from(error: VaultError) -> Self {
        OAuthError::Store(error.to_string())
    }
}

impl OAuthError {
    /// The server refused a refresh token or code for good (`invalid_grant`).
    pub fn is_invalid_grant(&self) -> bool {
        matches!(self, OAuthError::Provider { error, .. } if error == "invalid_grant")
    }
}

/// The query of a redirect to `/oauth/callback`.
#[derive(Debug, Default, serde::Deserialize)]
pub struct CallbackQuery {
    pub code: Option<String>,
    pub state: Option<String>,
    pub iss: Option<String>,
    pub error: Option<String>,
    pub error_description: Option<String>,
}

/// One authorization a user has yet to give, for `/oauth/pending`.
#[derive(Debug, Serialize)]
pub struct Awaiting {
    pub upstream: String,
    pub principal: String,
    pub authorization_url: String,
    /// Seconds since the epoch.
    pub expires_at: u64,
}

impl Awaiting {
    fn new(upstream: &UpstreamName, principal: &Principal, link: Link) -> Self {
        Self {
            upstream: upstream.to_string(),
            principal: principal.to_string(),
            authorization_url: link.url,
            expires_at: crate::clock::unix_seconds(link.expires),
        }
    }
}

/// Switchyard's OAuth client side, one per gateway.
pub struct OAuth {
    settings: OAuthSettings,
    /// The public URL without a final `/`: where links to the gateway start.
    base: String,
    /// `{public_url}/oauth/callback`.
    redirect_uri: String,
    /// Seals connect links and browser bindings with the keys replicas share (so that any
    /// replica opens them), or this process's own.
    sealer: Arc<crate::store::Sealer>,
    /// The public URL's origin: the one web pages of this gateway have.
    origin: url::Origin,
    /// The client ID metadata document URL, when Switchyard has an https one.
    metadata_url: Option<Url>,
    http: Http,
    vault: Vault,
    pending: Pending,
    authorizers: DashMap<UpstreamName, Weak<Authorizer>>,
    /// The gateway's own authorization server and its identity there, once found (users
    /// sign in there to follow their connect links).
    signin: tokio::sync::Mutex<Option<signin::Known>>,
    /// Whether clients authenticate to the gateway (`[auth]`): then each user has their own
    /// upstream tokens, and no client is shown another principal's authorization link.
    users_authenticate: std::sync::atomic::AtomicBool,
    /// The JWTs users presented last, for the upstreams that exchange them.
    subjects: subjects::Subjects,
    /// Whether some upstream was configured to exchange users' tokens.
    exchanging: std::sync::atomic::AtomicBool,
    /// Where grants made without a browser are recorded (`oauth_grant`).
    audit: Arc<Audit>,
}

impl OAuth {
    /// `public_url` is where browsers reach this gateway (the configured one, or the address it
    /// listens on); `store` is shared with other replicas, if it is the Redis one.
    pub fn new(
        settings: OAuthSettings,
        public_url: Url,
        store: &Arc<Store>,
        audit: Arc<Audit>,
    ) -> Arc<Self> {
        let base = public_url.as_str().trim_end_matches('/').to_owned();
        let metadata_url = settings.client_metadata_url.clone().or_else(|| {
            (public_url.scheme() == "https")
                .then(|| Url::parse(&format!("{base}/oauth/client-metadata.json")).ok())
                .flatten()
        });
        let oauth = Arc::new(Self {
            redirect_uri: format!("{base}/oauth/callback"),
            base,
            sealer: store.sealer().clone(),
            origin: public_url.origin(),
            metadata_url,
            http: Http::new(),
            vault: Vault::new(&settings, store),
            pending: Pending::new(
                settings.authorization_lifetime,
                store.is_shared().then(|| store.clone()),
            ),
            authorizers: DashMap::new(),
            signin: tokio::sync::Mutex::new(None),
            users_authenticate: Default::default(),
            subjects: Default::default(),
            exchanging: Default::default(),
            audit,
            settings,
        });
        store.hear(Arc::new(OAuthEars(Arc::downgrade(&oauth))));
        oauth
    }

    /// Says whether clients authenticate to the gateway (set at start and at each reload).
    pub fn set_users_authenticate(&self, yes: bool) {
        self.users_authenticate
            .store(yes, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn users_authenticate(&self) -> bool {
        self.users_authenticate
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    pub fn settings(&self) -> &OAuthSettings {
        &self.settings
    }

    pub fn redirect_uri(&self) -> &str {
        &self.redirect_uri
    }

    /// The origin of Switchyard's public URL.
    pub fn origin(&self) -> &url::Origin {
        &self.origin
    }

    /// The authorizer of the HTTP upstream `name` at `url`.
    pub fn authorizer(
        self: &Arc<Self>,
        name: &UpstreamName,
        url: &Url,
        config: &UpstreamOAuth,
    ) -> Arc<Authorizer> {
        let authorizer = Arc::new(Authorizer::new(
            self.clone(),
            name.clone(),
            url.clone(),
            config.clone(),
        ));
        self.authorizers
            .insert(name.clone(), Arc::downgrade(&authorizer));
        if config.exchanges() {
            self.exchanging
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
        authorizer
    }

    /// Told of every authenticated request: keeps the JWT its user presented for the upstreams
    /// that exchange it, and when it is new to the gateway, has each of them exchange it now.
    pub fn present(&self, principal: &Principal) {
        if !self.exchanging.load(std::sync::atomic::Ordering::Relaxed)
            || !self.subjects.present(principal)
        {
            return;
        }
        for authorizer in self.each_authorizer() {
            if authorizer.config.exchanges() {
                authorizer.exchange_soon(principal);
            }
        }
    }

    fn find(&self, upstream: &UpstreamName) -> Option<Arc<Authorizer>> {
        self.authorizers.get(upstream).and_then(|a| a.upgrade())
    }

    fn each_authorizer(&self) -> Vec<Arc<Authorizer>> {
        self.authorizers
            .iter()
            .filter_map(|entry| entry.value().upgrade())
            .collect()
    }

    /// Completes the authorization a redirect to `/oauth/callback` concludes; the upstream
    /// and the principal it was for, or why it failed (also recorded on the upstream's grant,
    /// where it can be).
    pub async fn callback(
        &self,
        query: CallbackQuery,
    ) -> Result<(UpstreamName, Principal), (Option<(UpstreamName, Principal)>, OAuthError)> {
        let state = query.state.as_deref().unwrap_or_default();
        let pending = self
            .pending
            .take(state)
            .await
            .map_err(|unmatched| (None, OAuthError::Callback(unmatched.reason().into())))?;
        let whose = (pending.upstream.clone(), pending.principal.clone());
        let Some(authorizer) = self.find(&whose.0) else {
            return Err((
                Some(whose),
                OAuthError::Callback("the upstream is no longer configured".into()),
            ));
        };
        match authorizer.complete(pending, query).await {
            Ok(()) => Ok(whose),
            Err(error) => Err((Some(whose), error)),
        }
    }

    /// The connect link users follow for the authorization `state` names: the gateway's own
    /// URL, which sends a browser to the authorization server only once it proved to be the
    /// user's (the `state` itself, sealed, is in no log and no list).
    fn connect_url(&self, state: &str) -> String {
        let sealed = self.sealer.seal(CONNECT_PURPOSE, state.as_bytes());
        format!(
            "{}/oauth/connect/{}",
            self.base,
            URL_SAFE_NO_PAD.encode(sealed)
        )
    }

    /// The authorization a connect link's `id` is for, if it is one of ours and still
    /// pending: its `state` and what starting it needs; else why not, in words.
    pub async fn connecting(&self, id: &str) -> Result<(String, Started), &'static str> {
        let state = URL_SAFE_NO_PAD
            .decode(id)
            .ok()
            .and_then(|sealed| self.sealer.open(CONNECT_PURPOSE, &sealed))
            .and_then(|state| String::from_utf8(state).ok())
            .ok_or(pending::Unmatched::Unknown.reason())?;
        let started = self
            .pending
            .peek(&state)
            .await
            .map_err(pending::Unmatched::reason)?;
        Ok((state, started))
    }

    /// The cookie (name, value) that binds the browser starting the authorization `state`
    /// to it: the callback completes it only in that browser.
    pub fn browser_binding(&self, state: &str) -> (String, String) {
        let sealed = self.sealer.seal(BINDING_PURPOSE, &digest_of(state));
        (binding_cookie(state), URL_SAFE_NO_PAD.encode(sealed))
    }

    /// Whether `cookie` (the value of the binding cookie of `state`) binds this browser to
    /// the authorization `state` names.
    pub fn is_bound(&self, state: &str, cookie: &str) -> bool {
        URL_SAFE_NO_PAD
            .decode(cookie)
            .ok()
            .and_then(|sealed| self.sealer.open(BINDING_PURPOSE, &sealed))
            .is_some_and(|digest| digest == digest_of(state))
    }

    /// Every authorization users have yet to give.
    pub fn awaiting(&self) -> Vec<Awaiting> {
        let mut awaiting = Vec::new();
        for entry in &self.authorizers {
            let Some(authorizer) = entry.value().upgrade() else {
                continue;
            };
            for (principal, link) in authorizer.links() {
                awaiting.push(Awaiting::new(entry.key(), &principal, link));
            }
        }
        awaiting.sort_by(|a, b| (&a.upstream, &a.principal).cmp(&(&b.upstream, &b.principal)));
        awaiting
    }

    /// `principal`'s own authorizations still to give: for every upstream where their grant
    /// wants one or they have no tokens, its link (made now).
    pub async fn awaiting_for(&self, principal: &Principal) -> Vec<Awaiting> {
        let mut awaiting = Vec::new();
        for authorizer in self.each_authorizer() {
            match authorizer.link_for(principal).await {
                Ok(Some(link)) => {
                    awaiting.push(Awaiting::new(authorizer.upstream(), principal, link))
                }
                Ok(None) => {}
                Err(error) => {
                    tracing::warn!(upstream = %authorizer.upstream(), %error, "cannot start an authorization");
                }
            }
        }
        awaiting.sort_by(|a, b| a.upstream.cmp(&b.upstream));
        awaiting
    }

    /// Revokes (where the server supports it) and forgets every token of `upstream`; how many
    /// grants had tokens.
    pub async fn forget(&self, upstream: &UpstreamName) -> Option<usize> {
        let authorizer = self.find(upstream)?;
        Some(authorizer.forget_all().await)
    }

    /// `forget` for `principal`'s tokens alone; whether they had some.
    pub async fn forget_for(&self, upstream: &UpstreamName, principal: &Principal) -> Option<bool> {
        let authorizer = self.find(upstream)?;
        Some(authorizer.forget_one(principal).await)
    }

    /// The client ID metadata document Switchyard serves, if it has an https URL for it.
    pub fn client_metadata(&self) -> Option<serde_json::Value> {
        let url = self.metadata_url.as_ref()?;
        Some(serde_json::json!({
            "client_id": url.as_str(),
            "client_name": self.settings.client_name,
            "redirect_uris": [self.redirect_uri],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
            "application_type": "web",
        }))
    }

    /// Where the browser goes after an authorization, if configured.
    pub fn redirect_after(&self, success: bool) -> Option<&Url> {
        if success {
            self.settings.success_redirect.as_ref()
        } else {
            self.settings.error_redirect.as_ref()
        }
    }
}

/// What connect links seal (their authorization's `state`).
const CONNECT_PURPOSE: &[u8] = b"switchyard oauth connect link";
/// What browser bindings seal (a digest of their authorization's `state`).
const BINDING_PURPOSE: &[u8] = b"switchyard oauth browser binding";

fn digest_of(state: &str) -> Vec<u8> {
    aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, state.as_bytes())
        .as_ref()
        .to_vec()
}

/// The name of the cookie binding a browser to the authorization `state` names: one per
/// authorization, so that several may be under way in one browser.
pub fn binding_cookie(state: &str) -> String {
    let digest = digest_of(state);
    let tag: String = digest[..6].iter().map(|b| format!("{b:02x}")).collect();
    format!("switchyard-authorize-{tag}")
}

/// What other replicas announce, as the OAuth client hears it: tokens a replica stored or
/// dropped are taken at once by the grants they belong to; after a gap in listening, every
/// grant reads its tokens again before its next use.
struct OAuthEars(Weak<OAuth>);

impl Heard for OAuthEars {
    fn record_changed(&self, kind: &str, hash: &str) {
        if kind != vault::RecordKind::Tokens.shared_name() {
            return;
        }
        let Some(oauth) = self.0.upgrade() else {
            return;
        };
        for authorizer in oauth.each_authorizer() {
            authorizer.tokens_changed(hash);
        }
    }

    fn reconnected(&self) {
        let Some(oauth) = self.0.upgrade() else {
            return;
        };
        for authorizer in oauth.each_authorizer() {
            authorizer.unsync_all();
        }
    }
}
