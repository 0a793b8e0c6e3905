//! `input_required` results (2026-07-28) for clients of the session era. A server that speaks
//! only 2026-07-28 asks for input by returning the requests it needs answered, and expects the
//! request again with the answers; a session client expects to be asked during the call and
//! cannot take such a result. So Switchyard asks the client each request, as the server would
//! have over a session, and repeats the request with the answers and the server's opaque state.

use rmcp::model::{
    CallToolRequestParams, ClientResult, GetPromptRequestParams, InputRequest, InputRequests,
    InputResponses, ReadResourceRequestParams, ServerRequest,
};
use tokio_util::sync::CancellationToken;

use crate::{
    downstream::{Downstream, ask_client, check_capability, kind},
    error::GatewayError,
    names::UpstreamName,
};

/// The most rounds of questions one request may take before Switchyard gives up on it.
pub const MAX_ROUNDS: usize = 10;

/// Request parameters that can be sent again with the client's answers.
pub trait Answerable: Clone {
    fn answer(&mut self, responses: InputResponses, state: Option<String>);
}

macro_rules! answerable {
    ($($params:ty),*) => {$(
        impl Answerable for $params {
            fn answer(&mut self, responses: InputResponses, state: Option<String>) {
                self.input_responses = Some(responses);
                self.request_state = state;
            }
        }
    )*};
}

answerable!(
    CallToolRequestParams,
    GetPromptRequestParams,
    ReadResourceRequestParams
);

/// Asks `client` every request of `required` (for `upstream`); the answers, by the same keys.
pub async fn ask_all(
    upstream: &UpstreamName,
    client: &Downstream,
    required: InputRequests,
    cancelled: &CancellationToken,
) -> Result<InputResponses, GatewayError> {
    let mut responses = InputResponses::new();
    for (key, request) in required {
        let request = match request {
            InputRequest::CreateMessage(request) => ServerRequest::CreateMessageRequest(request),
            InputRequest::Elicitation(request) => ServerRequest::ElicitRequest(request),
            InputRequest::ListRoots(request) => ServerRequest::ListRootsRequest(request),
            _ => {
                return Err(GatewayError::UpstreamFailed {
                    upstream: upstream.clone(),
                    reason: format!("it asked the client for input `{key}` of an unknown kind"),
                });
            }
        };
        let what = kind(&request);
        let failed = |error: rmcp::ErrorData| GatewayError::UpstreamFailed {
            upstream: upstream.clone(),
            reason: format!(
                "it needs the client's answer to a {what} request: {}",
                error.message
            ),
        };
        check_capability(&client.capabilities, &request).map_err(failed)?;
        let answer = ask_client(client, request, cancelled)
            .await
            .map_err(failed)?;
        responses.insert(key, answer_json(upstream, answer)?);
    }
    Ok(responses)
}

fn answer_json(
    upstream: &UpstreamName,
    answer: ClientResult,
) -> Result<serde_json::Value, GatewayError> {
    serde_json::to_value(answer).map_err(|error| {
        GatewayError::Internal(format!(
            "cannot pass the client's answer to upstream `{upstream}`: {error}"
        ))
    })
}
