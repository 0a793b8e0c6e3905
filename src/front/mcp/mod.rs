//! The MCP endpoint (`/mcp` by default): the streamable HTTP transport for both protocol eras,
//! served by Switchyard itself.
//!
//! Every request passes the Host/Origin guard. A POST carries one JSON-RPC message: clients
//! that `initialize` get a session (`Mcp-Session-Id`) and their requests are answered on event
//! streams; 2026-07-28 requests stand alone and are answered with JSON, or a stream when
//! something is sent before the answer. GET opens a session's standalone stream, DELETE ends a
//! session. The requests themselves are answered by `session::serve`.

mod body;
mod checks;
mod cors;
mod get;
mod grace;
mod limits;
mod lookup;
mod post;
mod reply;

pub use body::read_whole;
pub use limits::Held;
pub use reply::{beyond_quota, refusal, refusal_retry};

use std::{
    convert::Infallible,
    sync::Arc,
    task::{Context, Poll},
};

use arc_swap::ArcSwap;
use axum::body::Body;
use futures::future::BoxFuture;
use http::{Method, Request, Response};
use tokio_util::sync::CancellationToken;

use super::guard::Guard;
use crate::{
    auth::Authenticator,
    gateway::{Gateway, Live},
    policy::EndpointName,
    quota::Quotas,
    request::Caller,
    session::{SessionIds, SessionTable, TableEars, spawn_list_notifier, spawn_takeover},
};

/// The tower service behind the MCP endpoint path. Cheap to clone.
#[derive(Clone)]
pub struct McpEndpoint {
    inner: Arc<Endpoint>,
}

/// What every request of the endpoint needs.
struct Endpoint {
    gateway: Arc<Gateway>,
    sessions: Arc<SessionTable>,
    /// Seals and opens session ids (`[store] session_keys`, fixed until a restart).
    ids: SessionIds,
    /// The endpoint's settings, as of a configuration generation (a reload changes them).
    settings: ArcSwap<Settings>,
}

/// The settings of `[server]` and `[auth]` that requests check, prepared once per
/// configuration.
struct Settings {
    generation: u64,
    /// Kept across reloads that leave `[auth]` as it was (with its cached keys and tokens).
    auth: Arc<Authenticator>,
    /// Kept across reloads that leave `[limits]` as it was (with what each principal used).
    limiter: Arc<limits::Limiter>,
    guard: Guard,
    /// The main endpoint's path, and each virtual endpoint's, with how pages may call them.
    main_path: String,
    main_cors: Arc<cors::Policy>,
    virtual_paths: Vec<(String, EndpointName, Arc<cors::Policy>)>,
    /// Session requests answered first are answered with JSON (`[server] json_response`).
    json_response: bool,
    max_body: usize,
    /// How long a request's body may take to arrive.
    body_timeout: std::time::Duration,
}

impl Settings {
    fn of(live: &Live, before: Option<&Settings>, quotas: &Arc<Quotas>) -> Self {
        let server = &live.config.server;
        let auth = match before {
            Some(before) if *before.auth.settings() == live.config.auth => before.auth.clone(),
            _ => Arc::new(Authenticator::new(&live.config)),
        };
        let limiter = match before {
            Some(before) if *before.limiter.limits() == live.config.limits => {
                before.limiter.clone()
            }
            _ => Arc::new(limits::Limiter::new(
                live.config.limits.clone(),
                quotas.clone(),
            )),
        };
        Self {
            generation: live.generation,
            auth,
            limiter,
            guard: guard_of(&live.config),
            main_path: server.endpoint_path.clone(),
            main_cors: Arc::new(cors::Policy::new(&server.cors)),
            virtual_paths: live
                .config
                .endpoints
                .iter()
                .map(|e| {
                    let cors = (live.config.endpoint_cors.iter())
                        .find(|(name, _)| **name == *e.name)
                        .map_or(&server.cors, |(_, cors)| cors);
                    let name = EndpointName::named(e.name.clone());
                    (e.path.clone(), name, Arc::new(cors::Policy::new(cors)))
                })
                .collect(),
            json_response: server.json_response,
            max_body: server.max_request_body_bytes,
            body_timeout: server.client_timeout,
        }
    }
}

/// The MCP listener's guard: `allowed_hosts`, and the host of `[oauth] public_url` (where
/// browsers come back from authorization servers).
fn guard_of(config: &crate::config::Config) -> Guard {
    let server = &config.server;
    let public_host = config.oauth.public_url.as_ref().and_then(|url| {
        let host = url.host_str()?;
        Some(match url.port() {
            Some(port) => format!("{host}:{port}"),
            None => host.to_owned(),
        })
    });
    let hosts = match server.allowed_hosts.is_empty() {
        // Empty: any host (with `[auth]` only); adding one would narrow it.
        true => Vec::new(),
        false => server
            .allowed_hosts
            .iter()
            .map(String::as_str)
            .chain(public_host.as_deref())
            .collect(),
    };
    Guard::new(hosts, &server.allowed_origins)
}

impl Settings {
    /// The endpoint served at `path`, if one is, and how pages may call it.
    fn endpoint_at(&self, path: &str) -> Option<(EndpointName, &Arc<cors::Policy>)> {
        if path == self.main_path {
            return Some((EndpointName::MAIN, &self.main_cors));
        }
        self.virtual_paths
            .iter()
            .find(|(served, ..)| served == path)
            .map(|(_, name, cors)| (name.clone(), cors))
    }
}

impl McpEndpoint {
    /// The endpoint for `gateway`; `shutdown` ends every session and stream.
    pub fn new(gateway: Arc<Gateway>, shutdown: CancellationToken) -> Self {
        let live = gateway.live();
        let store = gateway.store().clone();
        let sessions = SessionTable::new(
            live.config.server.session_idle_timeout,
            gateway.metrics(),
            store.clone(),
            shutdown.clone(),
        );
        store.hear(Arc::new(TableEars(Arc::downgrade(&sessions))));
        let ids = SessionIds::new(store.sealer().clone());
        spawn_list_notifier(gateway.clone(), Arc::downgrade(&sessions), shutdown.clone());
        spawn_takeover(gateway.clone(), Arc::downgrade(&sessions), shutdown.clone());
        let settings = ArcSwap::from_pointee(Settings::of(&live, None, gateway.quotas()));
        drop(live);
        let sessions_at_shutdown = sessions.clone();
        tokio::spawn(async move {
            shutdown.cancelled().await;
            for session in sessions_at_shutdown.sessions() {
                sessions_at_shutdown.remove(session.id());
            }
        });
        Self {
            inner: Arc::new(Endpoint {
                gateway,
                sessions,
                ids,
                settings,
            }),
        }
    }

    /// Ends every session's standalone stream (at shutdown: they never end by themselves).
    pub fn end_standalone_streams(&self) {
        for session in self.inner.sessions.sessions() {
            session.standalone().close_all();
        }
    }

    /// The session table (for the admin API).
    pub fn sessions(&self) -> &Arc<SessionTable> {
        &self.inner.sessions
    }

    /// The endpoint's authentication as of the configuration in force.
    pub fn authenticator(&self) -> Arc<Authenticator> {
        self.inner.settings().auth.clone()
    }

    /// How many client sessions are open.
    pub fn session_count(&self) -> usize {
        self.inner.sessions.len()
    }
}

impl McpEndpoint {
    /// The refusal of a request with `uri` and `headers` if it was not sent to an allowed
    /// host (the DNS-rebinding guard every route of the listener passes first).
    pub fn host_refusal(
        &self,
        uri: &http::Uri,
        headers: &http::HeaderMap,
    ) -> Option<Response<Body>> {
        let refused = self.inner.settings().guard.check_host(uri, headers).err()?;
        Some(reply::refusal(refused.0, refused.1))
    }

    /// Admits a request of a pass-through route as the endpoint admits its own: the
    /// Host/Origin guard, the principal's authentication, its `[limits]` (held until the
    /// returned `Held` is dropped). A refusal is the answer to send as it is.
    pub async fn admit(
        &self,
        uri: &http::Uri,
        headers: &http::HeaderMap,
    ) -> Result<(crate::principal::Principal, Held), Response<Body>> {
        let settings = self.inner.settings();
        settings
            .guard
            .check(uri, headers)
            .map_err(|(status, message)| reply::refusal(status, message))?;
        let principal = settings
            .auth
            .authenticate(headers)
            .await
            .map_err(|denial| settings.auth.refuse(&denial))?;
        self.inner.gateway.oauth().present(&principal);
        let held = settings
            .limiter
            .admit(&principal, true)
            .await
            .map_err(|refusal| *refusal)?;
        Ok((principal, held))
    }
}

impl Endpoint {
    /// The settings in force, prepared again after a reload changed the configuration.
    fn settings(&self) -> Arc<Settings> {
        self.snapshot().0
    }

    /// The settings in force and the snapshot they were taken from: a request is answered
    /// from the one loaded here, as it arrives.
    fn snapshot(&self) -> (Arc<Settings>, Arc<Live>) {
        let settings = self.settings.load_full();
        let live = self.gateway.live();
        if settings.generation == live.generation {
            return (settings, live);
        }
        self.sessions
            .set_idle_timeout(live.config.server.session_idle_timeout);
        let fresh = Arc::new(Settings::of(&live, Some(&settings), self.gateway.quotas()));
        self.settings.store(fresh.clone());
        (fresh, live)
    }

    async fn handle(&self, request: Request<Body>) -> Response<Body> {
        let (settings, live) = self.snapshot();
        let Some((endpoint, cors)) = settings.endpoint_at(request.uri().path()) else {
            return reply::refusal(http::StatusCode::NOT_FOUND, "Not Found");
        };
        if let Err((status, message)) = settings.guard.check(request.uri(), request.headers()) {
            return reply::refusal(status, message);
        }
        // Past the guard, an `Origin` is one of the allowed ones: a page this endpoint may
        // answer, if it serves that origin and the method.
        let origin = request.headers().get(http::header::ORIGIN).cloned();
        if origin.is_some()
            && let Err((status, message)) = cors.admits(request.method(), request.headers())
        {
            return reply::refusal(status, message);
        }
        if request.method() == Method::OPTIONS {
            return match origin {
                Some(origin) => cors.preflight(
                    origin,
                    request
                        .headers()
                        .get(http::header::ACCESS_CONTROL_REQUEST_HEADERS),
                ),
                None => reply::method_not_allowed("GET, POST, DELETE, OPTIONS"),
            };
        }
        let mut response = self.dispatch(request, endpoint, (&settings, live)).await;
        if let Some(origin) = origin {
            cors.allow(&mut response, origin);
        }
        response
    }

    /// A request past the guard: who makes it, then what it asks.
    async fn dispatch(
        &self,
        request: Request<Body>,
        endpoint: EndpointName,
        (settings, live): (&Settings, Arc<Live>),
    ) -> Response<Body> {
        let principal = match settings.auth.authenticate(request.headers()).await {
            Ok(principal) => principal,
            Err(denial) => {
                self.gateway.audit().record(&crate::audit::Record {
                    kind: "auth",
                    principal: "",
                    endpoint: endpoint.as_virtual(),
                    outcome: "refused",
                    detail: Some(denial.reason()),
                    ..Default::default()
                });
                return settings.auth.refuse(&denial);
            }
        };
        self.gateway.oauth().present(&principal);
        let post = request.method() == Method::POST;
        // A GET holds no place: its stream stays open as long as the session.
        let held = match settings.limiter.admit(&principal, post).await {
            Ok(held) => held,
            Err(refusal) => return *refusal,
        };
        let caller = Caller {
            principal,
            endpoint,
        };
        let response = match *request.method() {
            Method::POST => self.post(request, (settings, live), caller).await,
            // Boxed, so that a POST's future does not hold room for theirs.
            Method::GET => Box::pin(self.get(request, &caller)).await,
            Method::DELETE => Box::pin(self.delete(request, &caller)).await,
            _ => reply::method_not_allowed("GET, POST, DELETE, OPTIONS"),
        };
        limits::hold_until_sent(response, held)
    }
}

impl McpEndpoint {
    /// The answer to `request`, as the tower service gives it.
    pub fn answer(
        &self,
        request: Request<Body>,
    ) -> BoxFuture<'static, Result<Response<Body>, Infallible>> {
        let inner = self.inner.clone();
        Box::pin(async move { Ok(inner.handle(request).await) })
    }
}

impl tower::Service<Request<Body>> for McpEndpoint {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        self.answer(request)
    }
}
