//! Asking a client on an upstream's behalf: sampling, elicitation and roots requests, which an
//! upstream sends during a call (or, for 2026-07-28, returns as `input_required`), go to the
//! client whose call it was, if that client declared it can answer them. Each session numbers
//! what it asks; the client's answer comes back as a POST of its own and is matched here. The
//! numbers carry a tag of this process, so that replicas asking in one session never use the
//! same id: an answer that lands on another replica is relayed back (see `store`) and can only
//! match the request it answers.

use std::{
    collections::HashMap,
    sync::{
        Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
};

use bytes::Bytes;
use rmcp::{
    ErrorData,
    model::{ClientCapabilities, ClientResult, ElicitRequestParams, ErrorCode, ServerRequest},
};
use serde_json::{Value, value::RawValue};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::{
    Downstream, Outlet,
    tasks::{Reports, TaskSupport},
};
use crate::wire;

/// A client's answer: its result, or its error, as JSON text.
pub(super) type Answer = Result<Box<RawValue>, Box<RawValue>>;

/// This process's tag, in the bits of a request id above the session's count: random, below
/// 2^20, so that ids stay exact in a JavaScript number (below 2^53).
fn process_tag() -> u64 {
    static TAG: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *TAG.get_or_init(|| {
        let mut bytes = [0u8; 4];
        let _ = aws_lc_rs::rand::fill(&mut bytes);
        (u64::from(u32::from_le_bytes(bytes)) & 0xF_FFFF).max(1) << 32
    })
}

/// The requests a session's client has been sent and not answered yet, and the tasks it runs
/// for upstreams that asked it to.
#[derive(Default)]
pub struct Asks {
    next: AtomicU64,
    /// Held only to insert or take one entry.
    pending: Mutex<HashMap<u64, oneshot::Sender<Answer>>>,
    /// Set when the session ends: nothing asked is answered any more.
    closed: AtomicBool,
    /// What the client declared it can run as a task when asked.
    pub tasks: TaskSupport,
    /// Where the status of each task it runs for an upstream goes.
    pub reports: Reports,
}

impl Asks {
    /// A session's, for a client that runs `tasks` when asked.
    pub fn new(tasks: TaskSupport) -> Self {
        Self {
            tasks,
            ..Self::default()
        }
    }

    /// Ends the session's questions: those waiting fail now (the client will not answer them;
    /// an upstream waiting on a task the client ran learns it at once), and new ones fail.
    pub fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.lock().clear();
    }

    /// Passes the client's answer to request `id` to whoever asked; false if nobody is waiting
    /// for it (it was cancelled, or never asked).
    pub fn answer(&self, id: &RawValue, answer: Result<&RawValue, &RawValue>) -> bool {
        let Ok(id) = id.get().parse::<u64>() else {
            return false;
        };
        let Some(waiting) = self.lock().remove(&id) else {
            return false;
        };
        let answer = match answer {
            Ok(result) => Ok(result.to_owned()),
            Err(error) => Err(error.to_owned()),
        };
        waiting.send(answer).is_ok()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, oneshot::Sender<Answer>>> {
        self.pending
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Forgets a request when its asker stops waiting, answered or not.
struct Waiting<'a> {
    asks: &'a Asks,
    id: u64,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.asks.lock().remove(&self.id);
    }
}

/// Sends `request` to the client of `target` (on the stream of its request, if it is one) and
/// awaits the answer. If `abandoned` is cancelled meanwhile (the upstream cancelled its
/// request, or its session ended), the client is told to cancel too.
pub async fn ask_client(
    target: &Downstream,
    request: ServerRequest,
    abandoned: &CancellationToken,
) -> Result<ClientResult, ErrorData> {
    let what = kind(&request);
    // `{"method", "params"}`, as the request is written.
    let written = serde_json::to_value(&request)
        .map_err(|error| ErrorData::internal_error(error.to_string(), None))?;
    let method = written["method"].as_str().unwrap_or_default();
    let params = written.get("params").map(Value::to_string);
    let result = ask_client_raw(target, (what, method), params.as_deref(), abandoned).await?;
    serde_json::from_str(result.get())
        .map_err(|error| not_answered(&format!("its answer is not a valid result: {error}")))
}

/// `ask_client` for a request as JSON: `method` with `params` (JSON text), asked for `what`
/// (the capability it needs, for messages). The answer is the client's result as it sent it.
pub async fn ask_client_raw(
    target: &Downstream,
    (what, method): (&str, &str),
    params: Option<&str>,
    abandoned: &CancellationToken,
) -> Result<Box<RawValue>, ErrorData> {
    let Some(asks) = &target.asks else {
        return match &target.bridge {
            Some(bridge) => bridge.ask(method, params, abandoned).await,
            None => Err(cannot_forward(
                what,
                "the client uses protocol 2026-07-28, which cannot receive requests during a call",
            )),
        };
    };
    let id = process_tag() | (asks.next.fetch_add(1, Ordering::Relaxed) & 0xFFFF_FFFF);
    let (sender, answer) = oneshot::channel();
    asks.lock().insert(id, sender);
    let _waiting = Waiting { asks, id };
    // Checked after the insert: a session that closes meanwhile has either seen the entry
    // (and dropped it) or set the flag first.
    if asks.closed.load(Ordering::SeqCst) {
        return Err(not_answered("its session ended"));
    }
    let message = wire::write::request(&id.to_string(), method, params.map(str::as_bytes));
    target
        .outlet
        .send(Bytes::from(message))
        .await
        .map_err(|closed| not_answered(&closed.to_string()))?;
    tokio::select! {
        answer = answer => opened(answer, "its session ended"),
        _ = abandoned.cancelled() => {
            cancel_at_client(&target.outlet, id);
            Err(ErrorData::internal_error("cancelled by the upstream server", None))
        }
    }
}

/// Tells the client to stop working on request `id` it was sent.
fn cancel_at_client(outlet: &Outlet, id: u64) {
    let params = format!(r#"{{"requestId":{id},"reason":"cancelled by the upstream server"}}"#);
    let _ = outlet.offer(wire::write::notification(
        "notifications/cancelled",
        Some(&params),
    ));
}

/// The client's answer as the asker takes it; `ended`: why there is none, if there is none.
pub(super) fn opened(
    answer: Result<Answer, oneshot::error::RecvError>,
    ended: &str,
) -> Result<Box<RawValue>, ErrorData> {
    match answer {
        Ok(Ok(result)) => Ok(result),
        Ok(Err(error)) => Err(serde_json::from_str(error.get())
            .unwrap_or_else(|_| not_answered("its error answer is not a valid JSON-RPC error"))),
        Err(_) => Err(not_answered(ended)),
    }
}

pub(super) fn not_answered(why: &str) -> ErrorData {
    ErrorData::internal_error(format!("the client did not answer: {why}"), None)
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
    #[allow(deprecated)] // sampling and roots: legacy, still relayed
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::{
        downstream::{LogLevel, Standalone},
        policy::EndpointName,
        principal::Principal,
    };

    #[tokio::test]
    async fn questions_of_a_session_that_ends_fail_at_once() {
        let asks = Arc::new(Asks::default());
        let client = Arc::new(Downstream {
            outlet: Outlet::Session(Arc::new(Standalone::default())),
            asks: Some(asks.clone()),
            bridge: None,
            progress_token: None,
            capabilities: Arc::default(),
            principal: Principal::default(),
            endpoint: EndpointName::MAIN,
            log_level: LogLevel::Unset,
        });
        let never = CancellationToken::new();
        let waiting = {
            let (client, never) = (client.clone(), never.clone());
            tokio::spawn(async move {
                ask_client_raw(&client, ("tasks", "tasks/result"), Some("{}"), &never).await
            })
        };
        while asks.lock().is_empty() {
            tokio::task::yield_now().await;
        }
        asks.close();
        let error = waiting.await.unwrap().unwrap_err();
        assert!(error.message.contains("its session ended"), "{error:?}");
        let later = ask_client_raw(&client, ("tasks", "tasks/get"), Some("{}"), &never).await;
        assert!(later.unwrap_err().message.contains("its session ended"));
        assert!(asks.lock().is_empty(), "nothing is left waiting");
    }
}
