//! A stand-in for an authorization server's endpoint in unit tests: it answers every request
//! with one canned response and records what it was sent, so tests see exactly which
//! credentials and fields Switchyard puts on the wire.

use std::sync::{Arc, Mutex};

use axum::{
    Router,
    body::Bytes,
    http::{HeaderMap, StatusCode, header},
};
use tokio::task::JoinHandle;

/// One request the endpoint got.
#[derive(Debug, Clone)]
pub struct Seen {
    pub headers: HeaderMap,
    pub body: String,
}

impl Seen {
    /// The request's form field `name`, if it has one.
    pub fn field(&self, name: &str) -> Option<String> {
        url::form_urlencoded::parse(self.body.as_bytes())
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.into_owned())
    }
}

pub struct FakeEndpoint {
    /// Where it listens, with the path `/endpoint` (any path is answered).
    pub url: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    server: JoinHandle<()>,
}

impl FakeEndpoint {
    /// Answers every request with `status`, a JSON content type and `body`.
    pub async fn start(status: u16, body: &str) -> Self {
        Self::start_with(status, "application/json", body).await
    }

    pub async fn start_with(status: u16, content_type: &'static str, body: &str) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/endpoint", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = seen.clone();
        let status = StatusCode::from_u16(status).unwrap();
        let body = body.to_owned();
        let app = Router::new().fallback(move |headers: HeaderMap, request: Bytes| {
            let record = record.clone();
            let body = body.clone();
            async move {
                let request = String::from_utf8_lossy(&request).into_owned();
                record.lock().unwrap().push(Seen {
                    headers,
                    body: request,
                });
                (status, [(header::CONTENT_TYPE, content_type)], body)
            }
        });
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Self { url, seen, server }
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for FakeEndpoint {
    fn drop(&mut self) {
        self.server.abort();
    }
}
