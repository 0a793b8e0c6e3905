//! What rmcp's model of the protocol would change between Switchyard and an upstream. An
//! upstream's request for a client (`sampling/createMessage`, `elicitation/create`,
//! `roots/list`) is lifted, as it comes off the wire, into a custom request with its params
//! whole: rmcp's typed request would round its numbers, drop the fields it does not know
//! (`task` among them, so that its handler could not answer with a task) and add defaults. And
//! the `tasks` capability a connection declares is written into its `initialize` (the model of
//! the capabilities has no place for it).

use futures::{StreamExt, stream::BoxStream};
use rmcp::{
    model::{
        ClientJsonRpcMessage, ClientRequest, CustomRequest, GetExtensions, JsonRpcMessage,
        RequestId, ServerJsonRpcMessage, ServerRequest,
    },
    service::InboundStreamOrigin,
    transport::streamable_http_client::SseError,
};
use serde_json::Value;
use sse_stream::Sse;
use tokio::sync::mpsc;

use crate::{downstream::CLIENT_REQUESTS, wire};

/// `message` as a custom request with its params whole, if it is a request for a client
/// (sampling, elicitation, roots; to run as a task or not); `None` for everything else, which
/// takes rmcp's typed path.
pub fn lift(message: &[u8]) -> Option<ServerJsonRpcMessage> {
    let wire::Message::Request(request) = wire::parse(message).ok()? else {
        return None;
    };
    let method = *CLIENT_REQUESTS
        .iter()
        .find(|known| **known == request.method)?;
    let id = serde_json::from_str::<RequestId>(request.id.get()).ok()?;
    let params = match request.params {
        Some(params) => Some(serde_json::from_str::<Value>(params.get()).ok()?),
        None => None,
    };
    let custom = CustomRequest::new(method, params);
    Some(ServerJsonRpcMessage::request(
        ServerRequest::CustomRequest(custom),
        id,
    ))
}

/// `stream` (of a streamable-HTTP upstream, which rmcp's worker reads) with the requests to
/// run as tasks taken out and handed to rmcp's handler through `inject`, as the raw path hands
/// what it reads (`origin`: the request whose stream it is, if it is one). Their events stay,
/// without data, so that the worker still resumes the stream after the last event.
pub fn lifting(
    stream: BoxStream<'static, Result<Sse, SseError>>,
    inject: mpsc::UnboundedSender<ServerJsonRpcMessage>,
    origin: Option<RequestId>,
) -> BoxStream<'static, Result<Sse, SseError>> {
    stream
        .map(move |event| {
            let mut event = event?;
            let lifted = event.data.as_deref().and_then(|data| lift(data.as_bytes()));
            if let Some(mut lifted) = lifted {
                if let (Some(origin), JsonRpcMessage::Request(request)) = (&origin, &mut lifted) {
                    let origin = InboundStreamOrigin::OutboundRequest(origin.clone());
                    request.request.extensions_mut().insert(origin);
                }
                // The connection may be closing; the request has no one to answer it then.
                let _ = inject.send(lifted);
                event.data = None;
            }
            Ok(event)
        })
        .boxed()
}

/// `message`, with `tasks` as the client's `capabilities.tasks` if it is the `initialize`
/// request.
pub fn declare(message: ClientJsonRpcMessage, tasks: &Value) -> ClientJsonRpcMessage {
    let JsonRpcMessage::Request(request) = &message else {
        return message;
    };
    let ClientRequest::InitializeRequest(initialize) = &request.request else {
        return message;
    };
    let Ok(mut params) = serde_json::to_value(&initialize.params) else {
        return message;
    };
    let Some(capabilities) = params
        .get_mut("capabilities")
        .and_then(Value::as_object_mut)
    else {
        return message;
    };
    capabilities.insert("tasks".into(), tasks.clone());
    let custom = CustomRequest::new("initialize", Some(params));
    ClientJsonRpcMessage::request(ClientRequest::CustomRequest(custom), request.id.clone())
}

#[cfg(test)]
mod tests {
    use rmcp::model::{
        ClientCapabilities, Implementation, InitializeRequest, InitializeRequestParams,
    };
    use serde_json::json;

    use super::*;

    #[test]
    fn requests_for_a_client_are_lifted_whole_and_others_are_not() {
        let asked = br#"{"jsonrpc":"2.0","id":7,"method":"sampling/createMessage","params":{"task":{"ttl":300000},"messages":[],"maxTokens":10}}"#;
        let Some(JsonRpcMessage::Request(request)) = lift(asked) else {
            panic!("lifted");
        };
        assert_eq!(request.id, RequestId::Number(7));
        let ServerRequest::CustomRequest(custom) = request.request else {
            panic!("a custom request");
        };
        assert_eq!(custom.method, "sampling/createMessage");
        assert_eq!(custom.params.unwrap()["task"], json!({"ttl": 300000}));

        let plain = br#"{"jsonrpc":"2.0","id":8,"method":"sampling/createMessage","params":{"messages":[],"maxTokens":10,"temperature":0.7,"x-unknown":{"kept":true}}}"#;
        let Some(JsonRpcMessage::Request(request)) = lift(plain) else {
            panic!("lifted");
        };
        let ServerRequest::CustomRequest(custom) = request.request else {
            panic!("a custom request");
        };
        assert_eq!(
            custom.params.unwrap().to_string(),
            r#"{"messages":[],"maxTokens":10,"temperature":0.7,"x-unknown":{"kept":true}}"#,
            "numbers, unknown fields and the order of fields as written"
        );
        let elicit = br#"{"jsonrpc":"2.0","id":"e","method":"elicitation/create","params":{"message":"m","requestedSchema":{"type":"object","properties":{}}}}"#;
        let Some(JsonRpcMessage::Request(request)) = lift(elicit) else {
            panic!("lifted");
        };
        let ServerRequest::CustomRequest(custom) = request.request else {
            panic!("a custom request");
        };
        assert!(
            custom.params.unwrap().get("mode").is_none(),
            "nothing added"
        );
        let roots = br#"{"jsonrpc":"2.0","id":9,"method":"roots/list"}"#;
        let Some(JsonRpcMessage::Request(request)) = lift(roots) else {
            panic!("lifted");
        };
        let ServerRequest::CustomRequest(custom) = request.request else {
            panic!("a custom request");
        };
        assert_eq!(custom.params, None, "params absent stay absent");
        let ping = br#"{"jsonrpc":"2.0","id":10,"method":"ping"}"#;
        assert!(lift(ping).is_none(), "other requests take the typed path");
        let answer = br#"{"jsonrpc":"2.0","id":9,"result":{"task":{}}}"#;
        assert!(lift(answer).is_none());
    }

    #[test]
    fn initialize_declares_the_tasks_capability_and_nothing_else_changes() {
        let params = InitializeRequestParams::new(
            ClientCapabilities::builder().enable_sampling().build(),
            Implementation::new("switchyard", "1"),
        );
        let initialize = ClientJsonRpcMessage::request(
            ClientRequest::InitializeRequest(InitializeRequest::new(params)),
            RequestId::Number(0),
        );
        let tasks = json!({"requests": {"sampling": {"createMessage": {}}}});
        let sent = serde_json::to_value(declare(initialize, &tasks)).unwrap();
        assert_eq!(sent["method"], "initialize");
        assert_eq!(sent["id"], 0);
        assert_eq!(sent["params"]["capabilities"]["tasks"], tasks);
        assert!(sent["params"]["capabilities"]["sampling"].is_object());
        assert_eq!(sent["params"]["clientInfo"]["name"], "switchyard");

        let ping = ClientJsonRpcMessage::request(
            ClientRequest::PingRequest(Default::default()),
            RequestId::Number(1),
        );
        let sent = serde_json::to_value(declare(ping, &tasks)).unwrap();
        assert_eq!(sent["method"], "ping");
    }
}
