//! `/api/approvals`: the tool calls waiting for an operator's approval (`[[policy]]
//! approval`), and the decision on one. A decision names the call's own entry and may name
//! the SHA-256 of the arguments it was made on, so that it can only release the call that
//! was looked at; it is used once, and audited with who made it.

use axum::{
    Json,
    extract::{Path, State},
    response::{IntoResponse, Response},
};
use http::StatusCode;
use serde::Deserialize;
use serde_json::json;

use super::{Admin, api::error};
use crate::approval::{Decision, Refused};

/// `GET /api/approvals`: the calls waiting, oldest first.
pub async fn list(State(admin): State<Admin>) -> Response {
    let waiting = admin.gateway.approvals().list();
    Json(json!({ "count": waiting.len(), "waiting": waiting })).into_response()
}

/// A decision, as posted.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct Decide {
    /// `allow` (the call runs, once) or `deny`.
    pub decision: String,
    /// Why, told to the caller on a denial and kept in the audit log.
    pub reason: Option<String>,
    /// The SHA-256 of the arguments decided on, as listed: the decision is refused if the
    /// waiting call's differ.
    pub arguments_sha256: Option<String>,
    /// Who decides, for the audit log (the admin token says only that an operator did).
    pub operator: Option<String>,
}

/// `POST /api/approvals/{id}`: decides on the call waiting under `id`.
pub async fn decide(
    State(admin): State<Admin>,
    Path(id): Path<String>,
    Json(decide): Json<Decide>,
) -> Response {
    let allowed = match decide.decision.as_str() {
        "allow" => true,
        "deny" => false,
        other => {
            return error(
                StatusCode::BAD_REQUEST,
                &format!("`decision` is `allow` or `deny`, not `{other}`"),
            );
        }
    };
    let by = match decide.operator.as_deref().map(said) {
        Some(name) if !name.is_empty() => format!("operator {name} (admin API)"),
        _ => "an operator (admin API)".to_owned(),
    };
    let reason = decide
        .reason
        .map(|reason| format!("{by} denied it: {}", said(&reason)));
    let decision = Decision {
        allowed,
        by,
        reason: reason.or_else(|| (!allowed).then(|| "an operator denied it".to_owned())),
    };
    let decided =
        admin
            .gateway
            .approvals()
            .decide(&id, decide.arguments_sha256.as_deref(), decision);
    let outcome = if decided.is_ok() { "ok" } else { "refused" };
    super::audit_change(
        &admin,
        "decide on a call waiting for approval",
        &id,
        outcome,
    );
    match decided {
        Ok(pending) => Json(json!({ "decided": pending, "allowed": allowed })).into_response(),
        Err(refused @ Refused::Unknown) => error(StatusCode::NOT_FOUND, &refused.to_string()),
        Err(refused @ Refused::OtherArguments) => error(StatusCode::CONFLICT, &refused.to_string()),
    }
}

/// What an operator wrote, as it is kept and shown: escaped, at most 200 characters.
fn said(text: &str) -> String {
    crate::text::printable(text.trim())
        .chars()
        .take(200)
        .collect()
}
