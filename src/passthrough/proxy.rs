//! The pass-through proxy: `/servers/{name}/mcp` forwards requests to one streamable-HTTP
//! upstream and its answers back as they are, bytes and streams alike.
//!
//! What the MCP endpoint checks is checked first, by the same code: the Host/Origin guard,
//! the principal's authentication and `[limits]`. Then policy: a principal that may not see
//! the upstream gets the answer of an unknown one. The body is read whole, within
//! `[server] max_request_body_bytes` and the client timeout (an MCP message is one JSON
//! document). On the way up, the client's credential for Switchyard is taken off and the
//! upstream's own headers go on: its fixed and per-user headers, the client headers its rules
//! pass on, the user's OAuth token. Nothing of the catalog applies: names, URIs and lists are
//! the upstream's own.

use std::{sync::Arc, time::Instant};

use axum::body::Body;
use dashmap::DashMap;
use http::{HeaderMap, HeaderName, HeaderValue, Method, Response, StatusCode, header};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;

use super::{
    metered::Metered,
    relayed::{Done, Relayed},
};
use crate::{
    config::HttpProtocol,
    error::{cause, with_causes},
    front::{Held, McpEndpoint, read_whole, refusal, refusal_retry},
    gateway::Gateway,
    hook::RequestHook,
    metrics::PassthroughSeries,
    names::UpstreamName,
    policy::EndpointName,
    principal::Principal,
    upstream::Upstream,
};

pub struct Passthrough {
    gateway: Arc<Gateway>,
    endpoint: McpEndpoint,
    /// Each upstream's metric series, resolved at its first request.
    series: DashMap<UpstreamName, Arc<PassthroughSeries>>,
}

/// The upstream a request goes to, and what goes up with it.
struct Target {
    upstream: Arc<Upstream>,
    hook: Arc<dyn RequestHook>,
    forwarded: Vec<(HeaderName, HeaderValue)>,
}

/// The upstream name of a pass-through path.
fn route(path: &str) -> Option<&str> {
    path.strip_prefix("/servers/")?
        .strip_suffix("/mcp")
        .filter(|name| !name.is_empty() && !name.contains('/'))
}

impl Passthrough {
    pub fn new(gateway: Arc<Gateway>, endpoint: McpEndpoint) -> Self {
        Self {
            gateway,
            endpoint,
            series: DashMap::new(),
        }
    }

    /// Answers one request: the upstream's answer, or Switchyard's refusal.
    pub async fn handle(&self, request: hyper::Request<Incoming>) -> Response<Body> {
        let started = Instant::now();
        let (parts, body) = request.into_parts();
        let (target, principal, held) = match self.admit(&parts).await {
            Ok(admitted) => admitted,
            Err(refused) => return refused,
        };
        let metered = match parts.method {
            Method::POST => Metered::of(&self.gateway, &principal, &target.upstream),
            _ => None,
        };
        let done = Done {
            gateway: self.gateway.clone(),
            series: self.series_of(&target.upstream),
            method: parts.method.clone(),
            started,
            status: None,
            metered,
            _held: Some(held),
        };
        self.forward(parts, body, &target, done).await
    }

    /// Sends the request to its upstream and relays the answer; `done` goes with the answer.
    async fn forward(
        &self,
        parts: http::request::Parts,
        body: Incoming,
        target: &Target,
        mut done: Done,
    ) -> Response<Body> {
        let name = target.upstream.name().as_str();
        let Some((client, url)) = target.upstream.http_client() else {
            let message = format!("Bad Gateway: `{name}` cannot be reached: it has no HTTP client");
            return refused(done, refusal(StatusCode::BAD_GATEWAY, &message));
        };
        let server = &self.gateway.live().config.server;
        let (max, timeout) = (server.max_request_body_bytes, server.client_timeout);
        let whole = match read_whole(body, max, timeout).await {
            Ok(whole) => whole,
            Err(answer) => return refused(done, answer),
        };
        if let Some(metered) = done.metered.as_mut()
            && let Err(answer) = metered.body(&self.gateway, &whole).await
        {
            return refused(done, answer);
        }
        let mut request = hyper::Request::new(Full::new(whole));
        *request.method_mut() = parts.method;
        *request.uri_mut() = url.clone();
        if let Err(answer) = self
            .headers(request.headers_mut(), &parts.headers, target)
            .await
        {
            return refused(done, answer);
        }
        let answer = match client.request(request).await {
            Ok(answer) => answer,
            Err(error) => {
                tracing::warn!(upstream = name, error = %with_causes(&*error),
                    "a pass-through request failed upstream");
                let message = format!(
                    "Bad Gateway: `{name}` cannot be reached: {}",
                    cause(&*error)
                );
                return refused(done, refusal(StatusCode::BAD_GATEWAY, &message));
            }
        };
        let status = answer.status();
        if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
            // The token was refused: the hook renews it for the next request.
            let challenge = answer
                .headers()
                .get(header::WWW_AUTHENTICATE)
                .and_then(|v| v.to_str().ok());
            target
                .hook
                .rejected(status.as_u16(), challenge, &HeaderMap::new())
                .await;
        }
        let event_stream = crate::wire::media::is_event_stream(answer.headers());
        if let Some(metered) = done.metered.as_mut() {
            metered.answered(event_stream);
        }
        let (mut head, mut body) = answer.into_parts();
        drop_hop_by_hop(&mut head.headers);
        let mut first = None;
        if done.method == Method::POST && status == StatusCode::OK && event_stream {
            // A POST's event stream: its header goes out with the first event, which the
            // upstream sends at once (the reply, or the priming event of a longer stream).
            match body.frame().await {
                Some(Ok(frame)) => first = Some(frame),
                Some(Err(error)) => {
                    let message = format!(
                        "Bad Gateway: `{name}`'s answer broke off: {}",
                        cause(&*error)
                    );
                    return refused(done, refusal(StatusCode::BAD_GATEWAY, &message));
                }
                None => {}
            }
        }
        done.status = Some(status.as_u16());
        Response::from_parts(head, Body::new(Relayed::new(first, body, done)))
    }

    /// Puts on `headers` what goes up: of the client's headers (`client`), the protocol's,
    /// and the others only as the upstream's rules forward them (its credentials for
    /// Switchyard, never); then the upstream's own.
    async fn headers(
        &self,
        headers: &mut HeaderMap,
        client: &HeaderMap,
        target: &Target,
    ) -> Result<(), Response<Body>> {
        for (name, value) in client {
            if is_protocol_header(name) {
                headers.append(name.clone(), value.clone());
            }
        }
        for (name, value) in &target.forwarded {
            headers.insert(name.clone(), value.clone());
        }
        let mut added = HeaderMap::new();
        if let Err(error) = target.hook.prepare(&mut added).done().await {
            return Err(refusal(StatusCode::UNAUTHORIZED, &error.to_string()));
        }
        let mut name = None;
        for (key, value) in added {
            if key.is_some() {
                name = key;
            }
            if let Some(name) = &name {
                headers.insert(name.clone(), value);
            }
        }
        Ok(())
    }

    /// The metric series of `upstream`'s pass-through requests.
    fn series_of(&self, upstream: &Upstream) -> Arc<PassthroughSeries> {
        if let Some(series) = self.series.get(upstream.name()) {
            return series.clone();
        }
        let series = Arc::new(
            self.gateway
                .metrics()
                .passthrough_series(upstream.name().as_str()),
        );
        self.series.insert(upstream.name().clone(), series.clone());
        series
    }

    /// Admits the request and finds its upstream, or gives the answer refusing it.
    async fn admit(
        &self,
        request: &http::request::Parts,
    ) -> Result<(Target, Principal, Held), Response<Body>> {
        let not_found = |what: &str| {
            refusal(
                StatusCode::NOT_FOUND,
                &format!("Not Found: {what}; the pass-through routes are /servers/{{name}}/mcp"),
            )
        };
        let name = route(request.uri.path()).ok_or_else(|| not_found("no such route"))?;
        let (principal, held) = self.endpoint.admit(&request.uri, &request.headers).await?;
        let unknown = || not_found(&format!("no upstream is named `{name}`"));
        let name = UpstreamName::new(name).map_err(|_| unknown())?;
        let live = self.gateway.live();
        let upstream = live.upstream(name.as_str()).ok_or_else(unknown)?.clone();
        let access = live.catalog.access();
        let sees = access
            .view_key(&EndpointName::MAIN, &principal)
            .is_some_and(|key| access.sees_upstream(&key, name.as_str()));
        if !sees {
            // As for an unknown upstream: policy does not tell what it hides.
            return Err(unknown());
        }
        // Just after a start (or an upgrade), an `auto` upstream's transport is being found
        // out: the request waits for it rather than being turned away.
        let connecting = upstream.config().policy.connect_timeout;
        match upstream.http_transport_known(connecting).await {
            Some((_, HttpProtocol::StreamableHttp)) => {}
            Some((_, HttpProtocol::Auto)) => {
                return Err(refusal_retry(
                    StatusCode::SERVICE_UNAVAILABLE,
                    &format!(
                        "Service Unavailable: `{name}`'s transport is not known yet (Switchyard \
                         is still connecting to it)"
                    ),
                    std::time::Duration::from_secs(1),
                ));
            }
            _ => {
                return Err(refusal(
                    StatusCode::BAD_REQUEST,
                    &format!(
                        "Bad Request: `{name}` is not a streamable-HTTP upstream (the \
                         pass-through routes proxy only those); use the MCP endpoint"
                    ),
                ));
            }
        }
        let target = Target {
            hook: upstream.request_hook(&principal).await,
            forwarded: upstream.config().forwarded(&request.headers),
            upstream,
        };
        Ok((target, principal, held))
    }
}

/// Switchyard's own answer to a request that did not get the upstream's.
fn refused(mut done: Done, answer: Response<Body>) -> Response<Body> {
    done.status = Some(answer.status().as_u16());
    answer
}

/// Whether a client's header is part of the protocol (the body's type, what the client
/// accepts, the MCP headers), and so goes on to the upstream as it is. The body's framing
/// and `Host` are the upstream request's own.
fn is_protocol_header(name: &HeaderName) -> bool {
    matches!(
        *name,
        header::CONTENT_TYPE | header::ACCEPT | header::ACCEPT_ENCODING
    ) || name.as_str().starts_with("mcp-")
        || name == "last-event-id"
}

/// Takes off an answer's headers that describe the upstream's connection, not the answer.
fn drop_hop_by_hop(headers: &mut HeaderMap) {
    for name in [
        header::CONNECTION,
        header::TRANSFER_ENCODING,
        header::UPGRADE,
        header::TE,
        header::TRAILER,
        HeaderName::from_static("keep-alive"),
        HeaderName::from_static("proxy-connection"),
    ] {
        headers.remove(name);
    }
}

#[cfg(test)]
mod tests {
    use super::route;

    #[test]
    fn routes_name_one_upstream() {
        assert_eq!(route("/servers/notes/mcp"), Some("notes"));
        assert_eq!(route("/servers//mcp"), None);
        assert_eq!(route("/servers/a/b/mcp"), None);
        assert_eq!(route("/servers/notes"), None);
        assert_eq!(route("/mcp"), None);
    }
}
