//! Where an authorization link leads first: `/oauth/connect/{id}`. The gateway makes sure the
//! person who follows a link is the user it was made for before it sends their browser to the
//! upstream's authorization server, so that Bob cannot have Alice authorize his link (and his
//! calls carry her token). How it knows depends on the user: the anonymous user (no `[auth]`)
//! is whoever reaches the gateway; a JWT user signs in at the gateway's own authorization
//! server (`/oauth/signin` is where they come back); an API-key user, or a JWT user where no
//! server is known, gives the credential they use with the gateway (a form, posted only from
//! the gateway's own pages).
//!
//! Once it knows, a short-lived HttpOnly, SameSite cookie binds the browser to the
//! authorization's `state`: the callback completes an authorization only in the browser that
//! started it, so a `state` learned elsewhere is worth nothing.

use std::time::Duration;

use axum::{
    body::Bytes,
    extract::{Path, State},
    http::{HeaderMap, HeaderValue, StatusCode, Uri, header},
    response::{IntoResponse, Redirect, Response},
};
use url::form_urlencoded;

use super::{
    AppState,
    pages::{html, page, parse_query, same_origin},
};
use crate::{oauth::Started, principal::Principal};

/// The form field that carries a user's credential.
const CREDENTIAL: &str = "credential";

/// `GET /oauth/connect/{id}`: finds out who follows the link (at once for the anonymous user,
/// by a sign-in or a form for the others).
pub async fn start(State(state): State<AppState>, Path(id): Path<String>) -> Response {
    let oauth = state.gateway.oauth();
    let (authorization, started) = match oauth.connecting(&id).await {
        Ok(found) => found,
        Err(reason) => return gone(reason),
    };
    if started.principal.is_anonymous() {
        return send_on(&state, &authorization, &started);
    }
    let auth = state.mcp.authenticator();
    if started.principal.as_str().starts_with("user:jwt:")
        && let Some(signin) = auth.signin()
    {
        match oauth.begin_signin(&signin, &id).await {
            Ok((url, signin_state)) => {
                let mut response = Redirect::to(&url).into_response();
                bind(&state, &mut response, &signin_state);
                return response;
            }
            Err(error) => {
                tracing::warn!(%error, "cannot sign a user in at the gateway's authorization server");
                return form(
                    &started,
                    StatusCode::OK,
                    Some("Signing in at your identity provider is not possible now."),
                );
            }
        }
    }
    form(&started, StatusCode::OK, None)
}

/// `POST /oauth/connect/{id}`: the form's answer; the credential must be the link's user's.
pub async fn prove(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let oauth = state.gateway.oauth();
    if let Err(refusal) = same_origin(&headers, oauth.origin()) {
        return page(StatusCode::FORBIDDEN, "Refused", refusal);
    }
    let (authorization, started) = match oauth.connecting(&id).await {
        Ok(found) => found,
        Err(reason) => return gone(reason),
    };
    let credential = form_urlencoded::parse(&body)
        .find(|(name, _)| name == CREDENTIAL)
        .map(|(_, value)| value.trim().to_owned())
        .unwrap_or_default();
    proven(&state, &authorization, &started, &credential, || {
        form(
            &started,
            StatusCode::UNAUTHORIZED,
            Some("That credential is not valid here."),
        )
    })
    .await
}

/// On to the upstream if `token` is the link's user's; `not_valid` answers a token the
/// gateway does not accept.
async fn proven(
    state: &AppState,
    authorization: &str,
    started: &Started,
    token: &str,
    not_valid: impl FnOnce() -> Response,
) -> Response {
    match state.mcp.authenticator().authenticate_token(token).await {
        Ok(principal) if principal == started.principal => send_on(state, authorization, started),
        Ok(principal) => not_theirs(started, &principal),
        Err(_) => not_valid(),
    }
}

/// `GET /oauth/signin`: back from signing in at the gateway's authorization server; on to
/// the upstream's if the user is the link's.
pub async fn signed_in(State(state): State<AppState>, uri: Uri, headers: HeaderMap) -> Response {
    let query = parse_query(uri.query().unwrap_or_default());
    let signin_state = query.state.clone().unwrap_or_default();
    let oauth = state.gateway.oauth();
    if !bound(&state, &headers, &signin_state) {
        return not_started_here();
    }
    let auth = state.mcp.authenticator();
    let Some(signin) = auth.signin() else {
        return gone("signing in is no longer configured; ask for a new link");
    };
    let (id, token) = match oauth.finish_signin(&signin, &signin_state, query).await {
        Ok(done) => done,
        Err(error) => {
            let reason = crate::upstream::escape_for_display(&error.to_string());
            return page(StatusCode::BAD_REQUEST, "Sign-in failed", &html(&reason));
        }
    };
    let (authorization, started) = match oauth.connecting(&id).await {
        Ok(found) => found,
        Err(reason) => return gone(reason),
    };
    let mut response = proven(&state, &authorization, &started, &token, || {
        page(
            StatusCode::FORBIDDEN,
            "Sign-in refused",
            "The token your identity provider gave is not one this gateway accepts.",
        )
    })
    .await;
    unbind(&mut response, &signin_state);
    response
}

/// Whether the request's browser is the one bound to `authorization` (its cookie).
pub fn bound(state: &AppState, headers: &HeaderMap, authorization: &str) -> bool {
    let name = crate::oauth::binding_cookie(authorization);
    cookie(headers, &name).is_some_and(|value| state.gateway.oauth().is_bound(authorization, value))
}

/// The answer to a callback whose browser did not start its authorization.
pub fn not_started_here() -> Response {
    page(
        StatusCode::FORBIDDEN,
        "Authorization refused",
        "This authorization was not started in this browser. Open the link you were given \
         (it starts with this gateway's address) in the browser you use to authorize.",
    )
}

/// Binds this browser to `authorization` and sends it to the authorization server.
fn send_on(state: &AppState, authorization: &str, started: &Started) -> Response {
    let mut response = Redirect::to(&started.authorize_url).into_response();
    bind(state, &mut response, authorization);
    response
}

/// Sets the cookie binding the browser to `authorization`, kept a while past its lifetime so
/// that a late callback is told the authorization expired rather than that the browser is
/// not the one.
fn bind(state: &AppState, response: &mut Response, authorization: &str) {
    let oauth = state.gateway.oauth();
    let (name, value) = oauth.browser_binding(authorization);
    let lifetime = oauth.settings().authorization_lifetime + Duration::from_secs(600);
    let secure = if oauth.origin().ascii_serialization().starts_with("https:") {
        "; Secure"
    } else {
        ""
    };
    let cookie = format!(
        "{name}={value}; Path=/oauth/; Max-Age={}; HttpOnly; SameSite=Lax{secure}",
        lifetime.as_secs()
    );
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
}

/// Drops the cookie binding the browser to `authorization` (it was used).
pub fn unbind(response: &mut Response, authorization: &str) {
    let name = crate::oauth::binding_cookie(authorization);
    let cookie = format!("{name}=; Path=/oauth/; Max-Age=0; HttpOnly; SameSite=Lax");
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
}

/// The value of cookie `name` in the request's `Cookie` headers.
fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|line| line.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value)
}

/// The form that asks for the credential of the link's user.
fn form(started: &Started, status: StatusCode, note: Option<&str>) -> Response {
    let note = note
        .map(|note| format!("<p><strong>{}</strong></p>", html(note)))
        .unwrap_or_default();
    let body = format!(
        "This link authorizes Switchyard to use the upstream <code>{}</code> for \
         <code>{}</code>.</p>{note}<form method=\"post\"><p>To make sure it is you, give the \
         API key or access token you use with this gateway:</p><p><input type=\"password\" \
         name=\"{CREDENTIAL}\" autocomplete=\"off\" required autofocus> \
         <button type=\"submit\">Continue</button></p></form><p>",
        html(started.upstream.as_str()),
        html(started.principal.as_str()),
    );
    page(status, "Authorize Switchyard", &body)
}

/// The answer when the link is someone else's: nothing is bound, nothing goes on.
fn not_theirs(started: &Started, principal: &Principal) -> Response {
    tracing::warn!(
        upstream = %started.upstream,
        link_for = %started.principal,
        followed_by = %principal,
        "refused an authorization link followed by another user"
    );
    page(
        StatusCode::FORBIDDEN,
        "Not your link",
        &format!(
            "This link was made for another user, not for <code>{}</code>: ask for your own \
             (your client shows it when it needs it). Nothing was authorized.",
            html(principal.as_str())
        ),
    )
}

fn gone(reason: &str) -> Response {
    page(StatusCode::NOT_FOUND, "Authorization link", &html(reason))
}
