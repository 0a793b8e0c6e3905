//! The raw path's HTTP client: pooled keep-alive connections, the platform's TLS trust.

use std::{sync::Arc, time::Duration};

use bytes::Bytes;
use http_body_util::Full;
use hyper_util::{
    client::legacy::{Client, connect::HttpConnector},
    rt::TokioExecutor,
};

/// The pooled HTTP client of an upstream's raw path (keep-alive connections, no cap on them).
pub type RawClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

/// A raw client with the same TLS trust as the rest of Switchyard's HTTP (the platform's).
pub fn raw_client(connect_timeout: Duration) -> Result<RawClient, String> {
    use rustls_platform_verifier::BuilderVerifierExt;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .and_then(|builder| builder.with_platform_verifier())
        .map_err(|error| error.to_string())?
        .with_no_client_auth();
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    http.set_connect_timeout(Some(connect_timeout));
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .enable_http2()
        .wrap_connector(http);
    Ok(Client::builder(TokioExecutor::new()).build(connector))
}
