//! The admin listener: the operators' API (`api`), its event stream (`events`), the live
//! status page (`page`), the operator's MCP server (`operator`, at `/mcp`) and `/metrics`, on
//! an address of their own (loopback by default, `[admin] listen`).
//!
//! Every request is checked before it is served, in this order: its `Host` must be a loopback
//! name, the listening address or one of `[admin] allowed_hosts` (a page that rebound its own
//! domain to this address is refused: DNS rebinding); no cross-origin browser request at all
//! (a page from elsewhere cannot drive the API through an operator's browser); and the admin
//! token (`auth::AdminToken`) on every request but the status page's own files, and
//! `/metrics` where no token is configured (metrics carry no secret: labels are bounded).

mod api;
mod approvals;
mod events;
mod operator;
mod page;
mod tools;
mod upstreams;

use std::{future::Future, sync::Arc};

use axum::{
    Router,
    extract::{Request, State},
    middleware::{self, Next},
    response::Response,
    routing::{delete, get, post},
};
use http::{HeaderMap, StatusCode, header};
use tokio::net::TcpListener;

use crate::{
    auth::AdminToken,
    config::AllowedOrigins,
    front::{Guard, McpEndpoint},
    gateway::Gateway,
};

/// The names a loopback admin listener is reached by.
const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// What the admin handlers share.
#[derive(Clone)]
struct Admin {
    gateway: Arc<Gateway>,
    mcp: McpEndpoint,
    token: AdminToken,
    /// The hosts requests may be sent to (no origin list: `cross_origin` checks those).
    hosts: Arc<Guard>,
    /// Held while the overlay is being changed, so that edits apply one after the other.
    editing: Arc<tokio::sync::Mutex<()>>,
    /// A place per follower of the event stream (`events::MAX_FOLLOWERS`): each holds a task
    /// and a broadcast receiver for as long as it stays.
    followers: Arc<tokio::sync::Semaphore>,
}

/// The admin application for `gateway`, whose MCP endpoint is `mcp`; `token` is the
/// operators'.
pub fn app(gateway: Arc<Gateway>, mcp: McpEndpoint, token: AdminToken) -> Router {
    let hosts = Arc::new(guard_of(&gateway.live().config.admin));
    let state = Admin {
        gateway,
        mcp,
        token,
        hosts,
        editing: Arc::default(),
        followers: Arc::new(tokio::sync::Semaphore::new(events::MAX_FOLLOWERS)),
    };
    Router::new()
        .route("/", get(page::index))
        .route("/page.js", get(page::script))
        .route("/page.css", get(page::style))
        .route("/metrics", get(metrics))
        .route("/api/status", get(api::status))
        .route("/api/events", get(events::follow))
        .route("/api/servers", get(api::servers))
        .route("/api/catalog", get(api::catalog))
        .route("/api/sessions", get(api::sessions))
        .route("/api/reload", post(api::reload))
        .route("/api/upstreams", post(upstreams::add))
        .route("/api/upstreams/{name}", delete(upstreams::remove))
        .route(
            "/api/upstreams/{name}/reconnect",
            post(upstreams::reconnect),
        )
        .route(
            "/api/upstreams/{name}/rediscover",
            post(upstreams::rediscover),
        )
        .route("/api/upstreams/{name}/disable", post(upstreams::disable))
        .route("/api/upstreams/{name}/enable", post(upstreams::enable))
        .route("/api/upstreams/{name}/authorize", post(api::authorize))
        .route("/api/upstreams/{name}/authorization", delete(api::forget))
        .route("/api/approvals", get(approvals::list))
        .route("/api/approvals/{id}", post(approvals::decide))
        .route("/api/tools/held", get(tools::held))
        .route("/api/tools/{upstream}/approve", post(tools::approve_all))
        .route("/api/tools/{upstream}/{tool}/approve", post(tools::approve))
        .nest_service("/mcp", operator::service(state.clone()))
        .fallback(api::not_found)
        .layer(middleware::from_fn_with_state(state.clone(), guard))
        .with_state(state)
}

/// Serves the admin application on `listener` until `shutdown`.
pub async fn serve(
    listener: TcpListener,
    gateway: Arc<Gateway>,
    mcp: McpEndpoint,
    token: AdminToken,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, app(gateway, mcp, token))
        .with_graceful_shutdown(shutdown)
        .await
}

async fn metrics(State(admin): State<Admin>) -> Response {
    crate::front::metrics_response(&admin.gateway)
}

/// The hosts the admin listener answers to: loopback names, its own address when it is a
/// specific one, and `[admin] allowed_hosts`.
fn guard_of(settings: &crate::config::AdminSettings) -> Guard {
    let own = settings
        .listen
        .map(|addr| addr.ip())
        .filter(|ip| !ip.is_unspecified())
        .map(|ip| ip.to_string());
    let hosts = LOOPBACK_HOSTS
        .into_iter()
        .chain(own.as_deref())
        .chain(settings.allowed_hosts.iter().map(String::as_str));
    Guard::new(hosts, &AllowedOrigins::Any)
}

/// Refuses requests to hosts that are not allowed, cross-origin browser requests, and
/// requests without the token. The status page itself (`/`, its script and style) loads
/// without the token: it asks for one, and holds no data of its own.
async fn guard(State(admin): State<Admin>, request: Request, next: Next) -> Response {
    if let Err((status, message)) = admin.hosts.check_host(request.uri(), request.headers()) {
        return api::error(status, message);
    }
    if let Some(refusal) = cross_origin(request.headers()) {
        return api::error(StatusCode::FORBIDDEN, refusal);
    }
    let open = match request.uri().path() {
        "/" | "/page.js" | "/page.css" => true,
        "/metrics" => !admin.token.is_configured(),
        _ => false,
    };
    if !open && !admin.token.admits(request.headers()) {
        let mut response = api::error(
            StatusCode::UNAUTHORIZED,
            "the admin API needs `Authorization: Bearer TOKEN`: the token of `[admin] token`, \
             or else the one in `admin.token` in the state directory",
        );
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, "Bearer".parse().expect("valid"));
        return response;
    }
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, "no-store".parse().expect("valid"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        "nosniff".parse().expect("valid"),
    );
    headers.insert(header::X_FRAME_OPTIONS, "DENY".parse().expect("valid"));
    response
}

/// Why a request comes from a page of another origin, if it does: its `Origin` names another
/// host than the one it was sent to, or `Sec-Fetch-Site` says it is cross-site.
fn cross_origin(headers: &HeaderMap) -> Option<&'static str> {
    let text = |name| {
        headers
            .get(name)
            .and_then(|v: &http::HeaderValue| v.to_str().ok())
    };
    if text("sec-fetch-site").is_some_and(|site| site == "cross-site" || site == "same-site") {
        return Some("cross-origin requests to the admin API are refused");
    }
    let origin = text(header::ORIGIN.as_str())?;
    let host = text(header::HOST.as_str()).unwrap_or_default();
    let same = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
        .is_some_and(|authority| authority.eq_ignore_ascii_case(host));
    (!same).then_some("cross-origin requests to the admin API are refused")
}

/// Records an admin API change in the audit log: `action` on `subject`, and how it ended.
fn audit_change(admin: &Admin, action: &str, subject: &str, outcome: &str) {
    admin.gateway.audit().record(&crate::audit::Record {
        kind: "admin",
        principal: "admin",
        item: Some(subject),
        outcome,
        detail: Some(action),
        ..Default::default()
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        pairs
            .iter()
            .map(|(k, v)| (k.parse().unwrap(), v.parse().unwrap()))
            .collect()
    }

    #[test]
    fn pages_of_other_origins_are_refused() {
        let same = headers(&[
            ("host", "127.0.0.1:9090"),
            ("origin", "http://127.0.0.1:9090"),
        ]);
        assert_eq!(cross_origin(&same), None);
        let other = headers(&[
            ("host", "127.0.0.1:9090"),
            ("origin", "http://evil.example"),
        ]);
        assert!(cross_origin(&other).is_some());
        let site = headers(&[("host", "127.0.0.1:9090"), ("sec-fetch-site", "cross-site")]);
        assert!(cross_origin(&site).is_some());
        // Command-line tools send neither header.
        assert_eq!(cross_origin(&headers(&[("host", "127.0.0.1:9090")])), None);
    }
}
