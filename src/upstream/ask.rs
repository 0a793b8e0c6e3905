//! Asking a client on an upstream's behalf: sampling, elicitation and roots requests, which
//! an upstream sends during a call (or, for 2026-07-28, returns as `input_required`), go to the
//! client whose call it was, if that client declared it can answer them.

use rmcp::{
    ErrorData, ServiceError,
    model::{
        CancelledNotificationParam, ClientCapabilities, ClientResult, ElicitRequestParams,
        ErrorCode, GetExtensions, ServerRequest,
    },
    service::{OriginatingRequestId, PeerRequestOptions},
};
use tokio_util::sync::CancellationToken;

use super::Downstream;

/// Sends `request` to the client of `target`, on the stream of its request when there is one,
/// and awaits the answer. If `abandoned` is cancelled meanwhile (the upstream cancelled its
/// request, or its session ended), the client is told to cancel too.
pub async fn ask_client(
    target: &Downstream,
    mut request: ServerRequest,
    abandoned: &CancellationToken,
) -> Result<ClientResult, ErrorData> {
    if let Some(id) = &target.request_id {
        request
            .extensions_mut()
            .insert(OriginatingRequestId(id.clone()));
    }
    let handle = target
        .peer
        .send_request_with_option(request, PeerRequestOptions::no_options())
        .await
        .map_err(not_answered)?;
    let id = handle.id.clone();
    tokio::select! {
        answer = handle.await_response() => answer.map_err(not_answered),
        _ = abandoned.cancelled() => {
            let cancelled = CancelledNotificationParam::new(
                Some(id),
                Some("cancelled by the upstream server".to_owned()),
            );
            let _ = target.peer.notify_cancelled(cancelled).await;
            Err(ErrorData::internal_error("cancelled by the upstream server", None))
        }
    }
}

fn not_answered(error: ServiceError) -> ErrorData {
    match error {
        ServiceError::McpError(error) => error,
        other => ErrorData::internal_error(format!("the client did not answer: {other}"), None),
    }
}

/// What a request to a client asks for, as its capability is named.
pub fn kind(request: &ServerRequest) -> &'static str {
    match request {
        ServerRequest::CreateMessageRequest(_) => "sampling",
        ServerRequest::ElicitRequest(_) => "elicitation",
        ServerRequest::ListRootsRequest(_) => "roots",
        _ => "other",
    }
}

/// Whether a client that declared `capabilities` can be sent `request`.
pub fn check_capability(
    capabilities: &ClientCapabilities,
    request: &ServerRequest,
) -> Result<(), ErrorData> {
    let declared = match request {
        ServerRequest::CreateMessageRequest(_) => capabilities.sampling.is_some(),
        ServerRequest::ListRootsRequest(_) => capabilities.roots.is_some(),
        ServerRequest::ElicitRequest(elicit) => match (&capabilities.elicitation, &elicit.params) {
            (Some(e), ElicitRequestParams::UrlElicitationParams { .. }) => e.url.is_some(),
            // A client declaring neither mode supports forms (2025-06-18 compatibility).
            (Some(e), _) => e.form.is_some() || e.url.is_none(),
            (None, _) => false,
        },
        _ => false,
    };
    if declared {
        return Ok(());
    }
    let what = kind(request);
    Err(cannot_forward(
        what,
        &format!("the client did not declare the {what} capability"),
    ))
}

/// The error an upstream gets when its request cannot be passed on.
pub fn cannot_forward(what: &str, reason: &str) -> ErrorData {
    ErrorData::new(
        ErrorCode::METHOD_NOT_FOUND,
        format!("Switchyard cannot pass this {what} request to a client: {reason}"),
        None,
    )
}
