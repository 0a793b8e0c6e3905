//! The OAuth endpoints, under `/oauth/`:
//!
//! - `GET callback`: where authorization servers send the user's browser back. The `state`
//!   names the pending authorization; the code is exchanged, and the page (or the configured
//!   redirect) says what happened.
//! - `GET pending`: the authorizations users have yet to give, with their links (JSON): a
//!   user's own, or every one with the admin token.
//! - `GET client-metadata.json`: Switchyard's client ID metadata document, where its public URL
//!   is https.
//! - `POST forget/{upstream}`: revokes and forgets the caller's own tokens of an upstream;
//!   never for a web page of another origin (which a browser could otherwise be made to send:
//!   cross-site request forgery).

use axum::{
    Json,
    extract::{Path, State},
    http::{HeaderMap, StatusCode, Uri, header},
    response::{IntoResponse, Redirect, Response},
};
use url::Url;

use super::{
    AppState,
    pages::{html, page, parse_query, same_origin},
};
use crate::{names::UpstreamName, upstream::escape_for_display};

/// The end of an authorization, in the browser that started it (see `connect`): any other
/// browser is refused before the `state` is looked at, so the authorization stays open for
/// its user.
pub async fn callback(State(state): State<AppState>, uri: Uri, headers: HeaderMap) -> Response {
    let query = parse_query(uri.query().unwrap_or_default());
    let authorization = query.state.clone().unwrap_or_default();
    if !super::connect::bound(&state, &headers, &authorization) {
        return super::connect::not_started_here();
    }
    let mut response = conclude(&state, query).await;
    super::connect::unbind(&mut response, &authorization);
    response
}

async fn conclude(state: &AppState, query: crate::oauth::CallbackQuery) -> Response {
    let oauth = state.gateway.oauth().clone();
    let concluded = oauth.callback(query).await;
    let (whose, outcome, reason) = match &concluded {
        Ok(whose) => (Some(whose), "ok", None),
        Err((whose, error)) => (whose.as_ref(), "error", Some(error.to_string())),
    };
    state.gateway.audit().record(&crate::audit::Record {
        kind: "oauth_grant",
        principal: whose.map_or("", |(_, principal)| principal.as_str()),
        upstream: whose.map(|(upstream, _)| upstream.as_str()),
        outcome,
        detail: reason.as_deref(),
        grant: Some("authorization_code"),
        ..Default::default()
    });
    match concluded.map(|(upstream, _)| upstream) {
        Ok(upstream) => match oauth.redirect_after(true) {
            Some(url) => redirect(url, &[("upstream", upstream.as_str())]),
            None => page(
                StatusCode::OK,
                "Authorized",
                &format!(
                    "Switchyard is now authorized to use the upstream <code>{}</code>. \
                     You can close this window.",
                    html(upstream.as_str())
                ),
            ),
        },
        Err((whose, error)) => {
            let upstream = whose.as_ref().map(|(upstream, _)| upstream.as_str());
            let reason = escape_for_display(&error.to_string());
            match oauth.redirect_after(false) {
                Some(url) => {
                    let mut params = vec![("error", reason.as_str())];
                    if let Some(upstream) = upstream {
                        params.push(("upstream", upstream));
                    }
                    redirect(url, &params)
                }
                None => {
                    let what = match upstream {
                        Some(upstream) => format!(
                            "Authorizing Switchyard for the upstream <code>{}</code> failed",
                            html(upstream)
                        ),
                        None => "This authorization cannot be completed".to_owned(),
                    };
                    page(
                        StatusCode::BAD_REQUEST,
                        "Authorization failed",
                        &format!("{what}: {}", html(&reason)),
                    )
                }
            }
        }
    }
}

/// The authorizations still to give, with their links: an authenticated user's own (for
/// every upstream where they have no tokens yet, made now), or, with the admin token, every
/// one. Nobody else sees a link: whoever follows one decides which account the upstream is
/// used with. Where users do not authenticate, the one anonymous user is the operator.
pub async fn pending(State(state): State<AppState>, headers: HeaderMap) -> Response {
    if state.admin.admits(&headers) {
        return Json(serde_json::json!({ "pending": state.gateway.oauth().awaiting() }))
            .into_response();
    }
    let auth = state.mcp.authenticator();
    let principal = match auth.authenticate(&headers).await {
        Ok(principal) => principal,
        Err(denial) => return auth.refuse(&denial),
    };
    if principal.is_anonymous() {
        return (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            "the pending authorizations are shown to their own user (with [auth]) or to the \
             operator: send `Authorization: Bearer ADMIN_TOKEN`",
        )
            .into_response();
    }
    let pending = state.gateway.oauth().awaiting_for(&principal).await;
    Json(serde_json::json!({ "principal": principal.as_str(), "pending": pending })).into_response()
}

pub async fn client_metadata(State(state): State<AppState>) -> Response {
    match state.gateway.oauth().client_metadata() {
        Some(document) => Json(document).into_response(),
        None => (
            StatusCode::NOT_FOUND,
            "Switchyard has no client ID metadata document: its public URL is not https",
        )
            .into_response(),
    }
}

/// Revokes and forgets the caller's own tokens of an upstream (the admin API forgets
/// anyone's). Never for a web page of another origin.
pub async fn forget(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(upstream): Path<String>,
) -> Response {
    if let Err(refusal) = same_origin(&headers, state.gateway.oauth().origin()) {
        return (StatusCode::FORBIDDEN, refusal).into_response();
    }
    let auth = state.mcp.authenticator();
    let principal = match auth.authenticate(&headers).await {
        Ok(principal) => principal,
        Err(denial) => return auth.refuse(&denial),
    };
    let Ok(name) = UpstreamName::new(&upstream) else {
        return (StatusCode::NOT_FOUND, "no such upstream").into_response();
    };
    let forgotten = state.gateway.oauth().forget_for(&name, &principal).await;
    state.gateway.audit().record(&crate::audit::Record {
        kind: "oauth_forget",
        principal: principal.as_str(),
        upstream: Some(name.as_str()),
        outcome: match forgotten {
            Some(true) => "ok",
            Some(false) => "nothing",
            None => "unknown",
        },
        ..Default::default()
    });
    match forgotten {
        Some(forgotten) => {
            if forgotten
                && let Some(upstream) = state.gateway.live().upstream(name.as_str()).cloned()
            {
                // Let the supervisor notice at once if its connection needs authorization again.
                upstream.health().suspect();
            }
            Json(serde_json::json!({
                "upstream": name.as_str(),
                "principal": principal.as_str(),
                "forgotten": forgotten,
            }))
            .into_response()
        }
        None => (StatusCode::NOT_FOUND, "no upstream with OAuth of that name").into_response(),
    }
}

fn redirect(to: &Url, params: &[(&str, &str)]) -> Response {
    let mut url = to.clone();
    url.query_pairs_mut().extend_pairs(params);
    Redirect::to(url.as_str()).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_html() {
        assert_eq!(
            html(r#"<script>alert("x")</script> & 'y'"#),
            "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;y&#39;"
        );
    }

    #[test]
    fn reads_the_callback_query() {
        let query = parse_query("code=abc&state=s%2F1&iss=https%3A%2F%2Fas&extra=1&code=second");
        assert_eq!(query.code.as_deref(), Some("abc"));
        assert_eq!(query.state.as_deref(), Some("s/1"));
        assert_eq!(query.iss.as_deref(), Some("https://as"));
        let denied = parse_query("error=access_denied&error_description=User+said+no&state=s");
        assert_eq!(denied.error.as_deref(), Some("access_denied"));
        assert_eq!(denied.error_description.as_deref(), Some("User said no"));
    }

    #[test]
    fn forgetting_is_refused_to_pages_of_other_origins() {
        let own = Url::parse("http://127.0.0.1:8080").unwrap().origin();
        let headers = |pairs: &[(&'static str, &'static str)]| {
            let mut map = HeaderMap::new();
            for (name, value) in pairs {
                map.insert(*name, value.parse().unwrap());
            }
            map
        };
        let allowed = [
            headers(&[]),
            headers(&[("origin", "http://127.0.0.1:8080")]),
            headers(&[
                ("sec-fetch-site", "same-origin"),
                ("origin", "http://127.0.0.1:8080"),
            ]),
            headers(&[("sec-fetch-site", "none")]),
        ];
        for request in &allowed {
            assert_eq!(same_origin(request, &own), Ok(()), "{request:?}");
        }
        let refused = [
            headers(&[("origin", "http://evil.example")]),
            headers(&[("origin", "http://127.0.0.1:3000")]),
            headers(&[("origin", "http://localhost:8080")]),
            headers(&[("origin", "null")]),
            headers(&[("sec-fetch-site", "cross-site")]),
            headers(&[
                ("sec-fetch-site", "same-site"),
                ("origin", "http://127.0.0.1:8080"),
            ]),
        ];
        for request in &refused {
            assert!(same_origin(request, &own).is_err(), "{request:?}");
        }
    }
}
