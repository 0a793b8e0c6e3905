//! The raw path's HTTP client: keep-alive connections, the platform's TLS trust. A plain-HTTP
//! upstream's connections are driven by the requests that use them (`inline`); an HTTPS one's
//! (HTTP/1.1 or HTTP/2, as agreed) go through hyper's pooled client.

use std::{
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::Duration,
};

use bytes::Bytes;
use futures::FutureExt;
use http::{HeaderValue, Request, Response, Uri};
use http_body::{Body, Frame, SizeHint};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::{
    client::legacy::{Client, connect::HttpConnector},
    rt::TokioExecutor,
};

mod inline;
mod quiet;
#[cfg(test)]
mod tests;

use quiet::Quiet;

type Tls = hyper_rustls::HttpsConnector<HttpConnector>;

/// An error of a request or of its answer's body.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The HTTP client of an upstream's raw path (and of its pass-through route). Requests
/// through it go to the upstream's URL: only their path is read.
#[derive(Clone)]
pub struct RawClient {
    pooled: Client<Quiet<Tls>, Full<Bytes>>,
    /// The connections of a plain-HTTP upstream.
    inline: Option<Arc<inline::Pool>>,
}

impl RawClient {
    /// A client for the upstream at `uri`, with the same TLS trust as the rest of
    /// Switchyard's HTTP (the platform's).
    pub fn new(uri: &Uri, connect_timeout: Duration) -> Result<Self, String> {
        use rustls_platform_verifier::BuilderVerifierExt;
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .and_then(|builder| builder.with_platform_verifier())
            .map_err(|error| error.to_string())?
            .with_no_client_auth();
        let mut http = HttpConnector::new();
        http.set_nodelay(true);
        http.set_connect_timeout(Some(connect_timeout));
        let inline = match uri.scheme_str() {
            Some("http") => inline::Pool::new(http.clone(), uri).map(Arc::new),
            _ => None,
        };
        http.enforce_http(false);
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .enable_http2()
            .wrap_connector(http);
        Ok(Self {
            pooled: Client::builder(TokioExecutor::new()).build(Quiet(connector)),
            inline,
        })
    }

    /// Sends `request` and waits for the answer's head.
    pub async fn request(
        &self,
        request: Request<Full<Bytes>>,
    ) -> Result<Response<UpstreamBody>, BoxError> {
        match &self.inline {
            // Boxed, as hyper's client boxes its own: every future that awaits a request
            // would otherwise hold all of a connection's states, and be copied whole.
            Some(pool) => Ok(Box::pin(pool.send(request))
                .await?
                .map(UpstreamBody::Driven)),
            None => Ok(self
                .pooled
                .request(request)
                .await?
                .map(UpstreamBody::Pooled)),
        }
    }
}

/// `Host` for requests to `uri`: its host, and its port unless the scheme's own.
pub fn host_of(uri: &Uri) -> Option<HeaderValue> {
    let authority = uri.authority()?;
    let default_port = match uri.scheme_str() {
        Some("https") => 443,
        _ => 80,
    };
    let host = match authority.port_u16() {
        Some(port) if port != default_port => format!("{}:{port}", authority.host()),
        _ => authority.host().to_owned(),
    };
    HeaderValue::from_str(&host).ok()
}

/// The body of an upstream's answer.
pub enum UpstreamBody {
    /// Read from a connection of hyper's pooled client (its own task).
    Pooled(Incoming),
    /// Read by polling its connection too.
    Driven(inline::Driven),
}

impl UpstreamBody {
    /// The reader is done with the answer: what is left of it (its end, normally) is read so
    /// that the connection serves again. What has come is read now; the rest is read apart,
    /// if it comes within `wait`, for the reader must not wait for it.
    pub fn release(mut self, wait: Duration) {
        loop {
            match self.frame().now_or_never() {
                Some(Some(Ok(_))) => continue,
                Some(None | Some(Err(_))) => return,
                None => break,
            }
        }
        match self {
            // Read when the connection is next taken.
            Self::Driven(driven) => driven.park(wait),
            Self::Pooled(mut incoming) => {
                tokio::spawn(async move {
                    let drained = async { while let Some(Ok(_)) = incoming.frame().await {} };
                    let _ = tokio::time::timeout(wait, drained).await;
                });
            }
        }
    }
}

impl Body for UpstreamBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self.get_mut() {
            Self::Pooled(incoming) => Pin::new(incoming).poll_frame(cx).map_err(Into::into),
            Self::Driven(driven) => Pin::new(driven).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Self::Pooled(incoming) => incoming.is_end_stream(),
            Self::Driven(driven) => driven.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Self::Pooled(incoming) => incoming.size_hint(),
            Self::Driven(driven) => driven.size_hint(),
        }
    }
}
