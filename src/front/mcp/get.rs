//! GET opens a session's standalone stream, for what Switchyard sends the client outside any
//! request; DELETE ends a session. Neither exists in 2026-07-28, which has no sessions.

use axum::body::Body;
use http::{Request, Response, StatusCode};

use super::{
    Endpoint,
    checks::{self, EVENT_STREAM, VersionHeader},
    reply::{self, EventIds, EventStream, RefusalResponse},
};
use crate::{
    downstream::Attached,
    protocol::{Era, LAST_EVENT_ID, MCP_SESSION_ID},
    request::Caller,
};

impl Endpoint {
    pub(super) async fn get(&self, request: Request<Body>, caller: &Caller) -> Response<Body> {
        if !checks::accepts(request.headers(), EVENT_STREAM) {
            return reply::refusal(
                StatusCode::NOT_ACCEPTABLE,
                "Not Acceptable: Client must accept text/event-stream",
            );
        }
        let (request, _) = request.into_parts();
        let session = match self.session_of(&request, caller).await {
            Ok(session) => session,
            Err(response) => return *response,
        };
        let last_event_id = request
            .headers
            .get(LAST_EVENT_ID)
            .and_then(|value| value.to_str().ok());
        // Resuming a request's stream: it ended with its answer, or with its client.
        if last_event_id.is_some_and(|id| id.contains('/')) {
            return EventStream::ended().into_response();
        }
        if let Some(shared) = session.standalone().shared() {
            // Its events are in the shared store, whichever replica the client came to.
            return EventStream::channel(EventIds::Framed, shared.attach(last_event_id))
                .counted(&self.gateway.metrics().streams_open)
                .into_response();
        }
        match session.standalone().attach() {
            Attached::Live(messages) | Attached::Shadow(messages) => {
                EventStream::channel(EventIds::Standalone, messages)
                    .counted(&self.gateway.metrics().streams_open)
                    .into_response()
            }
            Attached::Closed => {
                reply::refusal(StatusCode::NOT_FOUND, "Not Found: Session not found")
            }
        }
    }

    pub(super) async fn delete(&self, request: Request<Body>, caller: &Caller) -> Response<Body> {
        let (request, _) = request.into_parts();
        let session = match self.session_of(&request, caller).await {
            Ok(session) => session,
            Err(response) => return *response,
        };
        self.end_session(&session).await;
        let mut response = Response::new(Body::empty());
        *response.status_mut() = StatusCode::OK;
        response
    }

    /// The session a GET or DELETE is for, or the answer refusing it.
    async fn session_of(
        &self,
        request: &http::request::Parts,
        caller: &Caller,
    ) -> Result<std::sync::Arc<crate::session::Session>, RefusalResponse> {
        match VersionHeader::of(&request.headers) {
            VersionHeader::Invalid => {
                return Err(Box::new(reply::refusal(
                    StatusCode::BAD_REQUEST,
                    "Bad Request: Invalid MCP-Protocol-Version header encoding",
                )));
            }
            VersionHeader::Unknown(version) => {
                return Err(Box::new(reply::refusal(
                    StatusCode::BAD_REQUEST,
                    &format!("Bad Request: Unsupported MCP-Protocol-Version: {version}"),
                )));
            }
            VersionHeader::Known(version) if Era::of(version) == Era::Modern => {
                return Err(Box::new(reply::method_not_allowed("POST")));
            }
            _ => {}
        }
        let id = request
            .headers
            .get(MCP_SESSION_ID)
            .and_then(|value| value.to_str().ok())
            .ok_or_else(|| {
                Box::new(reply::refusal(
                    StatusCode::BAD_REQUEST,
                    "Bad Request: Session ID is required",
                ))
            })?;
        self.session_for(id, caller).await
    }
}
