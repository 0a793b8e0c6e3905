//! The typed path: a request rmcp's server machinery answers (the less frequent methods, and
//! routed requests to upstreams the raw path does not reach), one short-lived service per
//! request on a transport that carries just it and what the handler sends back.

use std::sync::Arc;

use bytes::Bytes;
use rmcp::{
    model::{
        ClientCapabilities, ClientJsonRpcMessage, Implementation, InitializeRequestParams,
        ProtocolVersion, ServerJsonRpcMessage,
    },
    service::serve_directly_with_ct,
    transport::OneshotTransport,
};

use super::{handler::SessionHandler, serve::Serving};
use crate::{
    downstream::{Downstream, Outlet},
    router::{Routed, Target},
    wire::{self, Answer},
};

impl Serving<'_> {
    /// Through rmcp's typed handler: one service for this request, on a transport that carries
    /// just it and what the handler sends back. `target`: where a routed request goes.
    pub(super) async fn typed(
        &self,
        downstream: Arc<Downstream>,
        target: Option<Target>,
    ) -> Answer {
        let request = self.request;
        let id = request.id();
        let Outlet::Request { stream: outlet, .. } = downstream.outlet.clone() else {
            unreachable!("a request's downstream side sends on its own stream");
        };
        let message: ClientJsonRpcMessage = match serde_json::from_slice(request.message.body()) {
            Ok(message) => message,
            Err(error) => {
                let text = format!("the request cannot be read: {error}");
                return Answer::error(id, -32602, &text);
            }
        };
        let peer_info = match self.session {
            Some(session) => session.client().clone(),
            None => stateless_peer(&request.headers),
        };
        let is_tool_call = request.method() == Routed::Tool.method();
        let handler = SessionHandler::new(
            self.gateway.clone(),
            request.clone(),
            self.session.cloned(),
            downstream,
            target,
        );
        let (transport, mut replies) = OneshotTransport::new(message);
        let service =
            serve_directly_with_ct(handler, transport, Some(peer_info), self.ct.child_token());
        while let Some(reply) = replies.recv().await {
            let is_answer = matches!(
                reply,
                ServerJsonRpcMessage::Response(_) | ServerJsonRpcMessage::Error(_)
            );
            let bytes = match serde_json::to_vec(&reply) {
                Ok(bytes) => Bytes::from(bytes),
                Err(error) => {
                    tracing::error!(%error, "an answer of the typed path cannot be written");
                    continue;
                }
            };
            if is_answer {
                drop(service);
                if request.method() == "initialize" {
                    let bytes = super::handler::announce_tasks(bytes, request.view());
                    return Answer::read(bytes);
                }
                let answer = Answer::read(bytes);
                if answer.outcome == wire::Outcome::Result && is_tool_call {
                    return Answer::tool_result(answer.message);
                }
                return answer;
            }
            if outlet.send(bytes).await.is_err() {
                break;
            }
        }
        drop(service);
        Answer::error(id, -32603, "the request ended without an answer")
    }
}

/// What a stateless request tells of its client for rmcp's handler: the version of its
/// `MCP-Protocol-Version` header (2025-03-26 without one).
fn stateless_peer(headers: &http::HeaderMap) -> InitializeRequestParams {
    let version = headers
        .get("mcp-protocol-version")
        .and_then(|value| value.to_str().ok())
        .and_then(|text| serde_json::from_value(serde_json::Value::String(text.into())).ok())
        .unwrap_or(ProtocolVersion::V_2025_03_26);
    InitializeRequestParams::new(ClientCapabilities::default(), Implementation::default())
        .with_protocol_version(version)
}
