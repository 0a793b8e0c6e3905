//! `/api/tools`: pinned tool definitions that wait for an operator (a changed definition of an
//! approved tool, or a tool never approved), with what changed, and their approval.

use axum::{
    Json,
    extract::{Path, State},
    response::{IntoResponse, Response},
};
use http::StatusCode;
use serde_json::json;

use super::{Admin, api::error};
use crate::pins::ApproveError;

/// `GET /api/tools/held`: what waits for approval, each with the approved and the pending
/// definition and their diff.
pub async fn held(State(admin): State<Admin>) -> Response {
    let held = admin.gateway.pins().held();
    Json(json!({ "count": held.len(), "held": held })).into_response()
}

/// `POST /api/tools/{upstream}/{tool}/approve`: serves the tool's pending definition.
pub async fn approve(
    State(admin): State<Admin>,
    Path((upstream, tool)): Path<(String, String)>,
) -> Response {
    let approved = admin.gateway.approve_tools(&upstream, Some(&tool)).await;
    let subject = format!("{upstream}/{tool}");
    audited(&admin, &subject, &approved);
    answer(approved)
}

/// `POST /api/tools/{upstream}/approve`: serves every pending definition of the upstream.
pub async fn approve_all(State(admin): State<Admin>, Path(upstream): Path<String>) -> Response {
    let approved = admin.gateway.approve_tools(&upstream, None).await;
    audited(&admin, &upstream, &approved);
    answer(approved)
}

fn audited(admin: &Admin, subject: &str, approved: &Result<Vec<String>, ApproveError>) {
    let outcome = if approved.is_ok() { "ok" } else { "error" };
    super::audit_change(admin, "approve tool definitions", subject, outcome);
}

fn answer(approved: Result<Vec<String>, ApproveError>) -> Response {
    match approved {
        Ok(approved) => Json(json!({ "approved": approved })).into_response(),
        Err(ApproveError::NothingHeld(what)) => error(
            StatusCode::NOT_FOUND,
            &format!("nothing of `{what}` waits for approval"),
        ),
        Err(ApproveError::Store(store)) => error(
            StatusCode::SERVICE_UNAVAILABLE,
            &format!("the approval cannot be recorded: {store}"),
        ),
    }
}
