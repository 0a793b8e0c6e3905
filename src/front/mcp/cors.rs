//! Browser clients (CORS): a web page of an allowed origin (the guard has refused every other
//! one with 403 by then) may call the endpoint. Its preflight is answered, and every answer it
//! gets, refusals included, names the origin and exposes the headers an MCP client reads: the
//! session id, and the challenge that says where to get a token.

use axum::body::Body;
use http::{HeaderValue, Response, StatusCode, header};

const METHODS: &str = "GET, POST, DELETE, OPTIONS";
/// What a page may send when its preflight names nothing (it always does, in practice).
const REQUEST_HEADERS: &str =
    "Accept, Authorization, Content-Type, Last-Event-ID, Mcp-Protocol-Version, Mcp-Session-Id";
const EXPOSED: &str = "Mcp-Session-Id, Mcp-Protocol-Version, WWW-Authenticate";
/// How long a browser may keep a preflight's answer.
const MAX_AGE: &str = "600";

/// The answer to a preflight (`OPTIONS` with `Origin`) from an allowed origin: the methods,
/// and the headers the page asked to send.
pub fn preflight(origin: HeaderValue, asked: Option<&HeaderValue>) -> Response<Body> {
    let mut response = Response::new(Body::empty());
    *response.status_mut() = StatusCode::NO_CONTENT;
    let headers = response.headers_mut();
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static(METHODS),
    );
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        asked
            .cloned()
            .unwrap_or_else(|| HeaderValue::from_static(REQUEST_HEADERS)),
    );
    headers.insert(
        header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from_static(MAX_AGE),
    );
    allow(&mut response, origin);
    response
}

/// Lets the page of `origin` read `response` and the headers clients need.
pub fn allow(response: &mut Response<Body>, origin: HeaderValue) {
    let headers = response.headers_mut();
    headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    headers.insert(
        header::ACCESS_CONTROL_EXPOSE_HEADERS,
        HeaderValue::from_static(EXPOSED),
    );
    headers.append(header::VARY, HeaderValue::from_static("Origin"));
}
