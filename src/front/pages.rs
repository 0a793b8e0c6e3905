//! What the browser-facing OAuth routes (`oauth`, `connect`) share: the gateway's own pages
//! (escaped, not cached, not framed), the refusal of requests from web pages of other origins,
//! and reading an authorization server's answer from a query.

use axum::{
    http::{HeaderMap, StatusCode, header},
    response::{Html, IntoResponse, Response},
};
use url::{Url, form_urlencoded};

use crate::oauth::CallbackQuery;

/// Refuses a request a web page of another origin made: browsers name the page's origin in
/// `Origin` on every cross-origin POST, and say where it comes from in `Sec-Fetch-Site`; the
/// loopback check alone lets any page in a browser on this machine through. Tools such as curl
/// send neither header and pass.
pub(super) fn same_origin(headers: &HeaderMap, own: &url::Origin) -> Result<(), &'static str> {
    // `same-site` too is refused: another port on this host is the same site.
    let site = headers.get("sec-fetch-site").map(|v| v.as_bytes());
    if site.is_some_and(|site| site != b"same-origin" && site != b"none") {
        return Err("refused: the request comes from a web page of another origin");
    }
    let origin = headers.get(header::ORIGIN).map(|value| {
        value
            .to_str()
            .ok()
            .and_then(|text| Url::parse(text).ok())
            .map(|url| url.origin())
    });
    match origin {
        None => Ok(()),
        Some(Some(origin)) if origin == *own => Ok(()),
        // Another origin, or an opaque one (`null`: a sandboxed page, a file).
        Some(_) => Err("refused: the request comes from a web page of another origin"),
    }
}

/// The authorization answer in a callback's query (the first of each parameter).
pub(super) fn parse_query(query: &str) -> CallbackQuery {
    let mut parsed = CallbackQuery::default();
    for (name, value) in form_urlencoded::parse(query.as_bytes()) {
        let slot = match &*name {
            "code" => &mut parsed.code,
            "state" => &mut parsed.state,
            "iss" => &mut parsed.iss,
            "error" => &mut parsed.error,
            "error_description" => &mut parsed.error_description,
            _ => continue,
        };
        slot.get_or_insert_with(|| value.into_owned());
    }
    parsed
}

/// A page of the gateway's own (`body` is HTML): not cached, not framed, running nothing.
pub(super) fn page(status: StatusCode, title: &str, body: &str) -> Response {
    let document = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{title} · Switchyard</title>\
         </head><body><h1>{title}</h1><p>{body}</p></body></html>"
    );
    (
        status,
        [
            (header::CACHE_CONTROL, "no-store"),
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'none'; form-action 'self'; frame-ancestors 'none'",
            ),
            (header::X_FRAME_OPTIONS, "DENY"),
            (header::REFERRER_POLICY, "no-referrer"),
        ],
        Html(document),
    )
        .into_response()
}

/// Text made safe to put in HTML.
pub(super) fn html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}
