//! Questions for a 2026-07-28 client, which cannot be sent requests during a call. An upstream
//! of an earlier era asks (sampling, elicitation, roots) while it serves such a client's call;
//! the question goes to whoever serves that call (`session::parked`), which answers the call
//! with `input_required` and hands the client's answer back here when the client retries.

use rmcp::ErrorData;
use serde_json::value::RawValue;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::asks::{Answer, not_answered, opened};

/// The requests an upstream may send a client during a call, by method: those
/// `input_required` can carry.
pub const CLIENT_REQUESTS: [&str; 3] =
    ["sampling/createMessage", "elicitation/create", "roots/list"];

/// Questions one call may have waiting to be asked at once.
const QUESTIONS: usize = 16;

/// One question of an upstream for the client: its method and params (JSON text), and where
/// the client's answer (or the reason there is none) goes.
pub struct Question {
    pub method: &'static str,
    pub params: Option<String>,
    pub answer: oneshot::Sender<Answer>,
}

/// Where the questions of one call go.
#[derive(Clone)]
pub struct Bridge(mpsc::Sender<Question>);

impl Bridge {
    /// A call's bridge, and the questions that come over it.
    pub fn new() -> (Self, mpsc::Receiver<Question>) {
        let (sender, questions) = mpsc::channel(QUESTIONS);
        (Self(sender), questions)
    }

    /// Asks `method` with `params` and awaits the answer the client gives when it retries.
    /// If `abandoned` is cancelled meanwhile, the question is withdrawn.
    pub async fn ask(
        &self,
        method: &str,
        params: Option<&str>,
        abandoned: &CancellationToken,
    ) -> Result<Box<RawValue>, ErrorData> {
        let Some(method) = CLIENT_REQUESTS.into_iter().find(|known| *known == method) else {
            return Err(super::cannot_forward(
                method,
                "the client uses protocol 2026-07-28, which is asked only for sampling, \
                 elicitation and roots during a call",
            ));
        };
        let (answer, answered) = oneshot::channel();
        let question = Question {
            method,
            params: params.map(str::to_owned),
            answer,
        };
        if self.0.send(question).await.is_err() {
            return Err(not_answered("the call it belongs to has ended"));
        }
        tokio::select! {
            answer = answered => opened(answer, "the call it belongs to has ended"),
            _ = abandoned.cancelled() => {
                Err(ErrorData::internal_error("cancelled by the upstream server", None))
            }
        }
    }
}
