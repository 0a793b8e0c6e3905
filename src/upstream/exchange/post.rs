//! Posting raw requests to a streamable-HTTP upstream: the request with the headers the
//! upstream's rules, its token and its session call for (one renewal of a refused token), and
//! the request that resumes an answer stream that broke off.

use std::{sync::Arc, time::Duration};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Request, Uri, header};
use http_body_util::Full;

use super::{Exchange, ExchangeError, Outgoing, RawLink};
use crate::error::with_causes;
use crate::{
    hook::{RequestHeaders, RequestHook},
    protocol::{
        Era, LAST_EVENT_ID, MCP_METHOD, MCP_NAME, MCP_PROTOCOL_VERSION, MCP_SESSION_ID, header_text,
    },
    upstream::{
        raw_client::{RawClient, UpstreamBody, host_of},
        session_slot::SessionSlot,
    },
};

const JSON_AND_SSE: HeaderValue = HeaderValue::from_static("application/json, text/event-stream");
const JSON: HeaderValue = HeaderValue::from_static("application/json");

/// Where and how raw requests are posted to a streamable-HTTP upstream.
pub(super) struct HttpRoute {
    era: Era,
    client: RawClient,
    uri: Uri,
    /// `Host`, as the client would derive it from `uri` (written once, not per request).
    host: Option<HeaderValue>,
    /// `MCP-Protocol-Version` as agreed with the upstream.
    version: HeaderValue,
    session: Arc<SessionSlot>,
    hook: Arc<dyn RequestHook>,
    /// An answer stream that brings nothing this long has stalled: resumed, or failed.
    stream_idle: Duration,
}

impl HttpRoute {
    pub(super) fn new(
        era: Era,
        client: RawClient,
        uri: Uri,
        version: &str,
        session: Arc<SessionSlot>,
        hook: Arc<dyn RequestHook>,
        stream_idle: Duration,
    ) -> Option<Self> {
        Some(Self {
            era,
            client,
            host: host_of(&uri),
            uri,
            version: HeaderValue::from_str(version).ok()?,
            session,
            hook,
            stream_idle,
        })
    }

    /// How long an answer stream may bring nothing before it counts as stalled.
    pub(super) fn stream_idle(&self) -> Duration {
        self.stream_idle
    }

    /// Posts `outgoing` and waits for the answer's headers. A refusal the hook can mend (a
    /// token renewed) is retried once.
    pub(super) async fn start<'l>(
        &self,
        link: &'l RawLink,
        outgoing: &Outgoing<'_>,
    ) -> Result<Exchange<'l>, ExchangeError> {
        // A legacy server may keep no sessions (it named none at `initialize`); the id is
        // known from the answer to `initialize` on, so it is never missing for one that does.
        let session = match (self.era, outgoing.session) {
            (Era::Modern, _) => None,
            (Era::Legacy, Some(id)) => HeaderValue::from_str(id).ok().map(Arc::new),
            (Era::Legacy, None) => self.session.get(),
        };
        let retries = self.hook.retries();
        let mut sent = RequestHeaders::new();
        let response = self.post(outgoing, session.as_deref(), &mut sent).await?;
        let status = response.status();
        let response = if matches!(status.as_u16(), 401 | 403) {
            let challenge = www_authenticate(response.headers());
            // Without a token to renew, the hook still hears of the refusal (it may need a
            // user's authorization), but the request is not sent again.
            let sent = if retries { sent } else { RequestHeaders::new() };
            let renewed = self
                .hook
                .rejected(status.as_u16(), challenge.as_deref(), &sent)
                .await;
            if !retries || !renewed {
                return Err(ExchangeError::Refused {
                    status: status.as_u16(),
                });
            }
            let mut again = RequestHeaders::new();
            let response = self.post(outgoing, session.as_deref(), &mut again).await?;
            if matches!(response.status().as_u16(), 401 | 403) {
                return Err(ExchangeError::Refused {
                    status: response.status().as_u16(),
                });
            }
            response
        } else {
            response
        };
        Exchange::begin(link, outgoing.id, session, response).await
    }

    async fn post(
        &self,
        outgoing: &Outgoing<'_>,
        session: Option<&HeaderValue>,
        sent: &mut RequestHeaders,
    ) -> Result<http::Response<UpstreamBody>, ExchangeError> {
        self.hook.prepare(sent).done().await?;
        let mut request = Request::new(Full::new(outgoing.body.clone()));
        *request.method_mut() = Method::POST;
        *request.uri_mut() = self.uri.clone();
        let headers = request.headers_mut();
        headers.reserve(sent.len() + outgoing.forwarded.len() + 8);
        // What the gateway sets (a token, configured headers) wins over a forwarded header.
        for (name, value) in outgoing.forwarded {
            if !sent.contains_key(name) {
                headers.append(name.clone(), value.clone());
            }
        }
        for (name, value) in sent.iter() {
            headers.append(name.clone(), value.clone());
        }
        if let Some(host) = &self.host {
            headers.insert(header::HOST, host.clone());
        }
        headers.insert(header::CONTENT_TYPE, JSON);
        headers.insert(header::ACCEPT, JSON_AND_SSE);
        headers.insert(MCP_PROTOCOL_VERSION, self.version.clone());
        if let Some(session) = session {
            headers.insert(MCP_SESSION_ID, session.clone());
        }
        if self.era == Era::Modern {
            if let Ok(method) = HeaderValue::from_str(outgoing.method) {
                headers.insert(MCP_METHOD, method);
            }
            headers.insert(MCP_NAME, header_text(outgoing.name));
            // Written from the arguments, over any the client's were forwarded as.
            for (name, value) in outgoing.params {
                headers.insert(name.clone(), value.clone());
            }
        }
        self.client
            .request(request)
            .await
            .map_err(|error| ExchangeError::Transport(with_causes(&*error)))
    }

    /// Opens the stream `last_event` belongs to again, to read on from there.
    pub(super) async fn resume(
        &self,
        session: Option<&HeaderValue>,
        last_event: &str,
    ) -> Result<http::Response<UpstreamBody>, ExchangeError> {
        let mut headers = RequestHeaders::new();
        self.hook.prepare(&mut headers).done().await?;
        let mut request = Request::new(Full::new(Bytes::new()));
        *request.uri_mut() = self.uri.clone();
        let all = request.headers_mut();
        all.extend(headers);
        all.insert(
            header::ACCEPT,
            HeaderValue::from_static("text/event-stream"),
        );
        all.insert(MCP_PROTOCOL_VERSION, self.version.clone());
        if let Some(host) = &self.host {
            all.insert(header::HOST, host.clone());
        }
        if let Some(session) = session {
            all.insert(MCP_SESSION_ID, session.clone());
        }
        if let Ok(value) = HeaderValue::from_str(last_event) {
            all.insert(LAST_EVENT_ID, value);
        }
        self.client
            .request(request)
            .await
            .map_err(|error| ExchangeError::Transport(with_causes(&*error)))
    }
}

fn www_authenticate(headers: &HeaderMap) -> Option<String> {
    headers
        .get(header::WWW_AUTHENTICATE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}
