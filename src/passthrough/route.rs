//! Where a pass-through route's requests go: the upstream's address and the parts of its URL
//! that every request carries, worked out once per upstream rather than at each request (a
//! host name is not looked up per request). A reload that replaces the upstream gets a new
//! route; a host name is looked up again after `LOOKUP_LIFETIME`, so a moved server is found.
//! Its metric series are resolved with it.

use std::{
    net::SocketAddr,
    sync::{Arc, Weak},
    time::{Duration, Instant},
};

use dashmap::DashMap;
use http::{HeaderValue, uri::PathAndQuery};

use crate::{
    metrics::{Metrics, PassthroughSeries},
    names::UpstreamName,
    upstream::Upstream,
};

/// How long the address a host name was looked up to is used before it is looked up again.
const LOOKUP_LIFETIME: Duration = Duration::from_secs(30);

/// The routes worked out so far, by upstream name.
#[derive(Default)]
pub struct Routes {
    // A concurrent map: every pass-through request reads it, and a new route is rare.
    by_upstream: DashMap<UpstreamName, Arc<UpstreamAddr>>,
}

/// How to reach one upstream.
#[derive(Debug)]
pub struct UpstreamAddr {
    /// The upstream it was worked out for (weak: a removed upstream is not kept alive).
    of: Weak<Upstream>,
    /// When the host name was looked up; `None` when the URL gives an address.
    looked_up: Option<Instant>,
    pub addr: SocketAddr,
    pub tls: bool,
    /// The host name, for TLS (without an IPv6 address's brackets).
    pub sni: String,
    /// The path and query of the upstream's URL.
    pub path: PathAndQuery,
    /// The `Host` the upstream is sent.
    pub authority: HeaderValue,
    /// The upstream's pass-through metrics.
    pub series: PassthroughSeries,
}

impl Routes {
    /// The route to `upstream`, whose URL is `url`; or why it cannot be reached. A new route
    /// resolves its series in `metrics`.
    pub async fn to(
        &self,
        upstream: &Arc<Upstream>,
        url: &url::Url,
        metrics: &Metrics,
    ) -> Result<Arc<UpstreamAddr>, String> {
        if let Some(route) = self.by_upstream.get(upstream.name())
            && route.serves(upstream)
        {
            return Ok(route.clone());
        }
        let route = Arc::new(UpstreamAddr::work_out(upstream, url, metrics).await?);
        self.by_upstream
            .insert(upstream.name().clone(), route.clone());
        Ok(route)
    }
}

impl UpstreamAddr {
    async fn work_out(
        upstream: &Arc<Upstream>,
        url: &url::Url,
        metrics: &Metrics,
    ) -> Result<Self, String> {
        let host = url.host_str().ok_or("its URL has no host")?;
        let port = url.port_or_known_default().unwrap_or(80);
        let (addr, looked_up) = match url.host() {
            Some(url::Host::Ipv4(ip)) => (SocketAddr::from((ip, port)), None),
            Some(url::Host::Ipv6(ip)) => (SocketAddr::from((ip, port)), None),
            _ => {
                let addr = tokio::net::lookup_host((host, port))
                    .await
                    .map_err(|error| {
                        tracing::warn!(upstream = %upstream.name(), host, %error,
                            "a pass-through upstream's host name was not found");
                        format!("its host name was not found ({error})")
                    })?
                    .next()
                    .ok_or("its host name has no address")?;
                (addr, Some(Instant::now()))
            }
        };
        let authority = match url.port() {
            Some(port) => format!("{host}:{port}"),
            None => host.to_owned(),
        };
        let path = match url.query() {
            Some(query) => format!("{}?{query}", url.path()),
            None => url.path().to_owned(),
        };
        Ok(Self {
            of: Arc::downgrade(upstream),
            looked_up,
            addr,
            tls: url.scheme() == "https",
            sni: host.trim_matches(['[', ']']).to_owned(),
            path: path.parse().map_err(|_| "its URL's path is not valid")?,
            authority: HeaderValue::from_str(&authority).map_err(|_| "its URL's host")?,
            series: metrics.passthrough_series(upstream.name().as_str()),
        })
    }

    /// Whether the route still leads to `upstream`.
    fn serves(&self, upstream: &Arc<Upstream>) -> bool {
        std::ptr::eq(self.of.as_ptr(), Arc::as_ptr(upstream))
            && self
                .looked_up
                .is_none_or(|at| at.elapsed() < LOOKUP_LIFETIME)
    }
}
