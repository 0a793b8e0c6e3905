//! Stand-ins for an authorization server's endpoints in unit tests: a server that answers with
//! canned responses and records what it was sent, so tests see exactly which credentials and
//! fields Switchyard puts on the wire.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::{
    Router,
    body::Bytes,
    http::{HeaderMap, StatusCode, Uri, header},
};
use tokio::task::JoinHandle;

/// One request the server got.
#[derive(Debug, Clone)]
pub struct Seen {
    pub path: String,
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

/// A status, content type and body.
type Answer = (StatusCode, &'static str, String);

pub struct FakeEndpoint {
    /// `http://127.0.0.1:{port}`.
    pub base: String,
    /// `{base}/endpoint`, for a server that answers every path alike.
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
        let answer = (
            StatusCode::from_u16(status).unwrap(),
            content_type,
            body.into(),
        );
        Self::serve(bind().await, HashMap::new(), Some(answer), Duration::ZERO)
    }

    /// Answers every request as `start` does, but only after `delay`.
    pub async fn start_slow(delay: Duration, status: u16, body: &str) -> Self {
        let answer = (
            StatusCode::from_u16(status).unwrap(),
            "application/json",
            body.into(),
        );
        Self::serve(bind().await, HashMap::new(), Some(answer), delay)
    }

    /// Answers the paths `routes` makes (given the server's base URL) with 200 and their JSON
    /// bodies; any other path with 404.
    pub async fn routes(routes: impl FnOnce(&str) -> Vec<(&'static str, String)>) -> Self {
        let listener = bind().await;
        let base = format!("http://{}", listener.local_addr().unwrap());
        let answers = routes(&base)
            .into_iter()
            .map(|(path, body)| (path.to_owned(), (StatusCode::OK, "application/json", body)))
            .collect();
        Self::serve(listener, answers, None, Duration::ZERO)
    }

    fn serve(
        listener: tokio::net::TcpListener,
        answers: HashMap<String, Answer>,
        otherwise: Option<Answer>,
        delay: Duration,
    ) -> Self {
        let base = format!("http://{}", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = seen.clone();
        let not_found = (StatusCode::NOT_FOUND, "application/json", "{}".to_owned());
        let app = Router::new().fallback(move |uri: Uri, headers: HeaderMap, body: Bytes| {
            record.lock().unwrap().push(Seen {
                path: uri.path().to_owned(),
                headers,
                body: String::from_utf8_lossy(&body).into_owned(),
            });
            let (status, content_type, body) = answers
                .get(uri.path())
                .or(otherwise.as_ref())
                .unwrap_or(&not_found)
                .clone();
            async move {
                tokio::time::sleep(delay).await;
                (status, [(header::CONTENT_TYPE, content_type)], body)
            }
        });
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Self {
            url: format!("{base}/endpoint"),
            base,
            seen,
            server,
        }
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

async fn bind() -> tokio::net::TcpListener {
    tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap()
}

impl Drop for FakeEndpoint {
    fn drop(&mut self) {
        self.server.abort();
    }
}
