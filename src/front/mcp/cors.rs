//! Browser clients (CORS): a web page of an allowed origin (the guard has refused every other
//! one with 403 by then) may call an endpoint as its `cors` policy says (`[server.cors]`, or
//! `[endpoints.NAME.cors]`): a virtual endpoint may serve fewer origins, and a page's method
//! must be one the policy allows. Its preflight is answered, and every answer it gets,
//! refusals included, names the origin and exposes the headers an MCP client reads (the
//! session id, and the challenge that says where to get a token) and any the policy adds.
//! Credentials are never allowed.

use axum::body::Body;
use http::{HeaderMap, HeaderValue, Method, Response, StatusCode, header};

use crate::{
    config::{Cors, REQUEST_HEADERS},
    front::Guard,
};

/// An endpoint's CORS policy, its header values made once.
pub struct Policy {
    methods: HeaderValue,
    allowed: Vec<Method>,
    /// `None`: the headers the preflight asks for.
    headers: Option<HeaderValue>,
    exposed: HeaderValue,
    max_age: HeaderValue,
    /// The origins a virtual endpoint serves, among the listener's.
    origins: Option<Guard>,
}

impl Policy {
    pub fn new(cors: &Cors) -> Self {
        let value = |text: &str| {
            HeaderValue::from_str(text).unwrap_or_else(|_| HeaderValue::from_static(""))
        };
        Self {
            methods: value(&cors.methods.join(", ")),
            allowed: (cors.methods.iter())
                .filter_map(|method| method.parse().ok())
                .collect(),
            headers: cors.headers.as_deref().map(value),
            exposed: value(&cors.exposed),
            max_age: value(&cors.max_age),
            origins: (cors.origins.as_ref()).map(|origins| Guard::new([], origins)),
        }
    }

    /// Whether a page's request (it has an `Origin`) with `method` may be served here.
    pub fn admits(
        &self,
        method: &Method,
        headers: &HeaderMap,
    ) -> Result<(), (StatusCode, &'static str)> {
        if let Some(origins) = &self.origins {
            origins.check_origin(headers)?;
        }
        // A preflight asks for the method it names.
        let asked = match method {
            &Method::OPTIONS => headers
                .get(header::ACCESS_CONTROL_REQUEST_METHOD)
                .and_then(|asked| asked.to_str().ok()?.parse().ok()),
            other => Some(other.clone()),
        };
        match asked {
            Some(asked) if !self.allowed.contains(&asked) => Err((
                StatusCode::FORBIDDEN,
                "Forbidden: web pages may not use this method here",
            )),
            _ => Ok(()),
        }
    }

    /// The answer to a preflight (`OPTIONS` with `Origin`) from an allowed origin: the
    /// methods, and the headers the page may send.
    pub fn preflight(&self, origin: HeaderValue, asked: Option<&HeaderValue>) -> Response<Body> {
        let mut response = Response::new(Body::empty());
        *response.status_mut() = StatusCode::NO_CONTENT;
        let headers = response.headers_mut();
        headers.insert(header::ACCESS_CONTROL_ALLOW_METHODS, self.methods.clone());
        let allowed = match (&self.headers, asked) {
            (Some(configured), _) => configured.clone(),
            (None, Some(asked)) => asked.clone(),
            (None, None) => HeaderValue::from_static(REQUEST_HEADERS),
        };
        headers.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, allowed);
        headers.insert(header::ACCESS_CONTROL_MAX_AGE, self.max_age.clone());
        self.allow(&mut response, origin);
        response
    }

    /// Lets the page of `origin` read `response` and the headers the policy exposes.
    pub fn allow(&self, response: &mut Response<Body>, origin: HeaderValue) {
        let headers = response.headers_mut();
        headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
        headers.insert(header::ACCESS_CONTROL_EXPOSE_HEADERS, self.exposed.clone());
        headers.append(header::VARY, HeaderValue::from_static("Origin"));
    }
}
