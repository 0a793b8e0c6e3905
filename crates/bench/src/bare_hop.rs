//! `switchyard bare-hop`: a bench helper, not part of the gateway. A minimal HTTP/1.1 reverse
//! proxy that forwards every request (method, path and query, headers but the hop-by-hop ones,
//! streamed body) to one upstream and streams the answer back, over pooled keep-alive
//! connections. It is the "bare HTTP hop" a gateway's overhead is measured against: what any
//! proxy costs before it understands a single MCP message. Given several upstreams, it passes
//! each request to the next in turn: the plain round-robin balancer replicas are measured
//! behind.

use std::{
    convert::Infallible,
    future::Future,
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
};

use bytes::Bytes;
use http::{
    HeaderMap, HeaderValue, Request, Response, StatusCode, Uri,
    header::{self, HeaderName},
    uri::{Authority, PathAndQuery},
};
use http_body_util::{Either, Full};
use hyper::body::Incoming;
use hyper_util::{
    client::legacy::{Client, connect::HttpConnector},
    rt::{TokioExecutor, TokioIo},
};
use tokio::net::TcpListener;

use super::{
    BenchError,
    wire::{bad_url, parse_http_url},
};

type HopClient = Client<HttpConnector, Incoming>;
type HopBody = Either<Incoming, Full<Bytes>>;

/// Headers that describe one connection, not the message (RFC 9110 §7.6.1): never forwarded.
const HOP_BY_HOP: [HeaderName; 9] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
];

/// Where the hop forwards to: the authority of the upstream URL (its path is not used: each
/// request keeps its own path).
#[derive(Clone, Debug)]
pub struct Upstream {
    authority: Authority,
    host: HeaderValue,
    /// The upstream URL's path, to print the hop's own URL with it.
    path: String,
}

impl Upstream {
    /// Parses an `http://host:port/path` URL.
    pub fn parse(url: &str) -> Result<Self, BenchError> {
        let (uri, authority) = parse_http_url(url, "only http:// upstreams are supported")?;
        let host =
            HeaderValue::from_str(authority.as_str()).map_err(|_| bad_url(url, "bad host"))?;
        Ok(Self {
            authority,
            host,
            path: uri.path().to_owned(),
        })
    }

    /// The URL clients reach the upstream's endpoint at through a hop listening on `addr`.
    pub fn url_through(&self, addr: SocketAddr) -> String {
        format!("http://{addr}{}", self.path)
    }
}

/// Several upstreams, taken in turn.
struct RoundRobin {
    upstreams: Vec<Upstream>,
    next: AtomicUsize,
}

impl RoundRobin {
    fn pick(&self) -> &Upstream {
        if self.upstreams.len() == 1 {
            return &self.upstreams[0];
        }
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        &self.upstreams[n % self.upstreams.len()]
    }
}

/// Serves the hop to `upstreams` (at least one; each request goes to the next) on `listener`
/// until `shutdown` resolves.
pub async fn serve(
    listener: TcpListener,
    upstreams: Vec<Upstream>,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    assert!(!upstreams.is_empty(), "a hop needs an upstream");
    let upstreams = Arc::new(RoundRobin {
        upstreams,
        next: AtomicUsize::new(0),
    });
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    let client: HopClient = Client::builder(TokioExecutor::new()).build(connector);
    tokio::pin!(shutdown);
    loop {
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => accepted?,
            () = &mut shutdown => return Ok(()),
        };
        let _ = stream.set_nodelay(true);
        let client = client.clone();
        let upstreams = upstreams.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                forward(client.clone(), upstreams.pick().clone(), request)
            });
            // A client that goes away mid-request is no concern of the hop's.
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

async fn forward(
    client: HopClient,
    upstream: Upstream,
    request: Request<Incoming>,
) -> Result<Response<HopBody>, Infallible> {
    let (mut parts, body) = request.into_parts();
    let path = parts
        .uri
        .path_and_query()
        .cloned()
        .unwrap_or_else(|| PathAndQuery::from_static("/"));
    let uri = Uri::builder()
        .scheme("http")
        .authority(upstream.authority.clone())
        .path_and_query(path)
        .build();
    let Ok(uri) = uri else {
        return Ok(bad_gateway("cannot build the upstream URI"));
    };
    parts.uri = uri;
    parts.version = http::Version::HTTP_11;
    strip_hop_by_hop(&mut parts.headers);
    parts.headers.insert(header::HOST, upstream.host.clone());
    match client.request(Request::from_parts(parts, body)).await {
        Ok(response) => {
            let (mut parts, body) = response.into_parts();
            strip_hop_by_hop(&mut parts.headers);
            Ok(Response::from_parts(parts, Either::Left(body)))
        }
        Err(error) => Ok(bad_gateway(&format!("upstream unreachable: {error}"))),
    }
}

fn bad_gateway(text: &str) -> Response<HopBody> {
    let mut response = Response::new(Either::Right(Full::new(Bytes::from(text.to_owned()))));
    *response.status_mut() = StatusCode::BAD_GATEWAY;
    response
}

/// Removes the hop-by-hop headers, and those the `Connection` header names.
fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    for name in HOP_BY_HOP.iter().chain(&named) {
        headers.remove(name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_hop_by_hop_headers_and_those_connection_names() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONNECTION,
            HeaderValue::from_static("keep-alive, X-Trace"),
        );
        headers.insert("keep-alive", HeaderValue::from_static("timeout=5"));
        headers.insert("x-trace", HeaderValue::from_static("1"));
        headers.insert(
            header::TRANSFER_ENCODING,
            HeaderValue::from_static("chunked"),
        );
        headers.insert("mcp-session-id", HeaderValue::from_static("abc"));
        headers.insert("mcp-param-region", HeaderValue::from_static("eu"));
        strip_hop_by_hop(&mut headers);
        let mut left: Vec<_> = headers.keys().map(|k| k.as_str()).collect();
        left.sort();
        assert_eq!(left, ["mcp-param-region", "mcp-session-id"]);
    }

    #[test]
    fn the_upstream_must_be_plain_http() {
        let upstream = Upstream::parse("http://127.0.0.1:9001/mcp").unwrap();
        assert_eq!(
            upstream.url_through("127.0.0.1:9002".parse().unwrap()),
            "http://127.0.0.1:9002/mcp"
        );
        let error = Upstream::parse("https://example.test/mcp").unwrap_err();
        assert!(error.to_string().contains("only http://"), "{error}");
    }
}
