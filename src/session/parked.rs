//! The multi-round-trip bridge: calls of 2026-07-28 clients that an upstream of an earlier era
//! asks something during (sampling, elicitation, roots). Such a client cannot be sent a
//! request while it waits, so the call is answered `input_required` with the upstream's
//! questions and an opaque `requestState`, and it goes on running here, its upstream waiting.
//! The client's retry (the same request with `inputResponses` and the state) hands the answers
//! to the waiting upstream and gets what comes next: the call's answer, or the next questions.
//!
//! A state is a random token, good for one retry by the same user at the same endpoint of
//! the same request; a call whose client does not retry within `[limits] input_wait_seconds`
//! gives its upstream an error for each question, and is cancelled there if it does not end
//! soon after.

use std::{sync::Arc, time::Duration};

use base64::Engine as _;
use dashmap::DashMap;
use futures::future::BoxFuture;
use serde_json::value::RawValue;
use tokio::sync::{mpsc, oneshot};

use crate::{
    downstream::Question,
    request::Request,
    wire::{self, Answer, Fields, object::write_string},
};

/// What every state Switchyard makes starts with (an upstream's own states are passed on as
/// they are, and never start so).
const STATE_PREFIX: &str = "switchyard-input.";

/// How long a call whose client did not retry may take to end upstream before it is cancelled.
const GRACE: Duration = Duration::from_secs(10);

/// Calls that may wait for their clients' answers at once, in all; beyond, an upstream's
/// question gets an error at once.
const MOST_WAITING: usize = 10_000;

/// The request a state may be used to retry: who made it, at which endpoint, its method and
/// the tool, prompt or resource it names.
#[derive(Clone, PartialEq)]
struct Owner {
    principal: crate::principal::Principal,
    endpoint: crate::policy::EndpointName,
    method: Box<str>,
    name: Option<Box<str>>,
}

impl Owner {
    fn of(request: &Request) -> Self {
        let params = request.message.params();
        let name = params
            .and_then(|params| params.get("name").or_else(|| params.get("uri")))
            .and_then(wire::string)
            .map(|name| name.into());
        Self {
            principal: request.caller.principal.clone(),
            endpoint: request.caller.endpoint.clone(),
            method: request.method().into(),
            name,
        }
    }
}

/// A call waiting for its client's retry.
struct Waiting {
    owner: Owner,
    resume: oneshot::Sender<Retry>,
}

/// The client's retry: its id, the answers it carries, and where what comes next goes.
struct Retry {
    id: Box<str>,
    responses: Option<Box<RawValue>>,
    reply: oneshot::Sender<Answer>,
}

/// The calls waiting for their clients' retries, by state.
#[derive(Default)]
pub struct Parked {
    calls: DashMap<Box<str>, Waiting>,
}

/// The state a 2026-07-28 request carries, if Switchyard made it (it is a retry of a call
/// waiting here).
pub fn state_of(request: &Request) -> Option<Box<str>> {
    let state = request.message.params()?.get("requestState")?;
    let state = wire::string(state)?;
    state.starts_with(STATE_PREFIX).then(|| state.into())
}

impl Parked {
    /// Runs `work` (the answer to `request`, asking over the bridge whose questions come in
    /// `questions`) and gives its answer, or, when the upstream asks first, the questions as
    /// an `input_required` answer while the work goes on waiting for the retry.
    pub async fn run(
        self: &Arc<Self>,
        request: &Request,
        wait: Duration,
        mut work: BoxFuture<'static, Answer>,
        mut questions: mpsc::Receiver<Question>,
    ) -> Answer {
        loop {
            tokio::select! {
                biased;
                answer = &mut work => return answer,
                Some(question) = questions.recv() => {
                    if self.calls.len() >= MOST_WAITING {
                        refuse(question, "too many calls are waiting for their clients' answers");
                        continue;
                    }
                    let mut driver = Driver {
                        parked: self.clone(),
                        owner: Owner::of(request),
                        wait,
                        work: Some(work),
                        done: None,
                        questions,
                        asked: Vec::new(),
                        numbered: 0,
                    };
                    driver.take(question);
                    let (state, resume) = driver.register();
                    let answer = driver.input_required(request.id(), &state);
                    tokio::spawn(driver.drive(state, resume));
                    return answer;
                }
            }
        }
    }

    /// The answer to `request`, a retry with `state`: what comes next of the call waiting
    /// under it, once the answers it carries are handed on.
    pub async fn resume(&self, request: &Request, state: &str) -> Answer {
        let id = request.id();
        let owner = Owner::of(request);
        let Some((_, waiting)) = self
            .calls
            .remove_if(state, |_, waiting| waiting.owner == owner)
        else {
            // The same answer whether it expired, was used, or is another's.
            return Answer::error(
                id,
                -32602,
                "requestState is unknown or has expired: send the request again without it",
            );
        };
        let responses = request.message.params().and_then(|params| {
            params
                .get("inputResponses")
                .map(|responses| responses.to_owned())
        });
        let (reply, next) = oneshot::channel();
        let retry = Retry {
            id: id.into(),
            responses,
            reply,
        };
        if waiting.resume.send(retry).is_ok()
            && let Ok(answer) = next.await
        {
            return answer;
        }
        Answer::error(id, -32603, "the call ended without an answer")
    }
}

/// One waiting call: its work and the questions it asked that are not answered yet.
struct Driver {
    parked: Arc<Parked>,
    owner: Owner,
    wait: Duration,
    /// `None` once it has its answer.
    work: Option<BoxFuture<'static, Answer>>,
    /// The answer, when it came while the client had not retried yet.
    done: Option<Answer>,
    questions: mpsc::Receiver<Question>,
    /// By the key the client was given.
    asked: Vec<(String, Question)>,
    numbered: u32,
}

/// What a retry gets next.
enum Next {
    Answer(Answer),
    Questions,
    /// The client went away (for 2026-07-28, closing the stream cancels the request).
    Gone,
}

impl Driver {
    async fn drive(mut self, mut state: Box<str>, mut resume: oneshot::Receiver<Retry>) {
        loop {
            let Some(retry) = self.retried(&state, &mut resume).await else {
                return;
            };
            let Retry {
                id,
                responses,
                mut reply,
            } = retry;
            self.hand_on(responses.as_deref());
            match self.next(&mut reply).await {
                Next::Answer(answer) => {
                    let _ = reply.send(renumbered(answer, &id));
                    return;
                }
                Next::Questions => {
                    (state, resume) = self.register();
                    let _ = reply.send(self.input_required(&id, &state));
                }
                Next::Gone => return,
            }
        }
    }

    /// The client's retry, while the work goes on; `None` when it does not come in time (the
    /// questions then fail upstream, and the call is dropped, which cancels it there).
    async fn retried(
        &mut self,
        state: &str,
        resume: &mut oneshot::Receiver<Retry>,
    ) -> Option<Retry> {
        let deadline = tokio::time::sleep(self.wait);
        tokio::pin!(deadline);
        loop {
            tokio::select! {
                retry = &mut *resume => return retry.ok(),
                answer = running(&mut self.work) => self.done = Some(answer),
                Some(question) = self.questions.recv() => self.take(question),
                _ = &mut deadline => {
                    if self.parked.calls.remove(state).is_none() {
                        // A retry took the state just now.
                        return resume.await.ok();
                    }
                    let why = format!(
                        "the client did not retry the call with its answers within {} s",
                        self.wait.as_secs()
                    );
                    tracing::debug!("{why}; the call ends");
                    for (_, question) in self.asked.drain(..) {
                        refuse(question, &why);
                    }
                    // The upstream may finish the call on learning it (and the call be
                    // counted and audited as it ends); what it does not finish soon is
                    // cancelled there.
                    let _ = tokio::time::timeout(GRACE, running(&mut self.work)).await;
                    return None;
                }
            }
        }
    }

    /// Hands each answer in `responses` to the question it answers.
    fn hand_on(&mut self, responses: Option<&RawValue>) {
        let Some(responses) = responses.and_then(Fields::of) else {
            return;
        };
        let mut open = Vec::new();
        for (key, question) in self.asked.drain(..) {
            match responses.get(&key) {
                Some(answer) => {
                    let _ = question.answer.send(Ok(answer.to_owned()));
                }
                None => open.push((key, question)),
            }
        }
        self.asked = open;
    }

    /// What the retry gets: the answer if it is there, the questions still open if any, or
    /// else whichever comes first.
    async fn next(&mut self, reply: &mut oneshot::Sender<Answer>) -> Next {
        if let Some(answer) = self.done.take() {
            return Next::Answer(answer);
        }
        if !self.asked.is_empty() {
            return Next::Questions;
        }
        tokio::select! {
            biased;
            answer = running(&mut self.work) => Next::Answer(answer),
            Some(question) = self.questions.recv() => {
                self.take(question);
                Next::Questions
            }
            _ = reply.closed() => Next::Gone,
        }
    }

    /// Adds `question` to those asked, and any others already waiting.
    fn take(&mut self, question: Question) {
        let mut question = Some(question);
        while let Some(next) = question.take().or_else(|| self.questions.try_recv().ok()) {
            self.numbered += 1;
            self.asked.push((format!("q{}", self.numbered), next));
        }
    }

    /// A new state for the call, under which the next retry finds it.
    fn register(&mut self) -> (Box<str>, oneshot::Receiver<Retry>) {
        let mut bytes = [0u8; 32];
        let _ = aws_lc_rs::rand::fill(&mut bytes);
        let token = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
        let state: Box<str> = format!("{STATE_PREFIX}{token}").into();
        let (resume, resumed) = oneshot::channel();
        let owner = self.owner.clone();
        self.parked
            .calls
            .insert(state.clone(), Waiting { owner, resume });
        (state, resumed)
    }

    /// The answer to request `id` asking the open questions, to be retried with `state`.
    fn input_required(&self, id: &str, state: &str) -> Answer {
        let mut out = Vec::with_capacity(256);
        out.extend_from_slice(br#"{"resultType":"input_required","inputRequests":{"#);
        for (at, (key, question)) in self.asked.iter().enumerate() {
            if at > 0 {
                out.push(b',');
            }
            write_string(&mut out, key);
            out.extend_from_slice(br#":{"method":"#);
            write_string(&mut out, question.method);
            if let Some(params) = &question.params {
                out.extend_from_slice(br#","params":"#);
                out.extend_from_slice(params.as_bytes());
            }
            out.push(b'}');
        }
        out.extend_from_slice(br#"},"requestState":"#);
        write_string(&mut out, state);
        out.push(b'}');
        let result = String::from_utf8(out).expect("written from UTF-8 parts");
        Answer::result(wire::write::response(id, &result))
    }
}

/// The work's answer, when it comes; never, if it has come already.
async fn running(work: &mut Option<BoxFuture<'static, Answer>>) -> Answer {
    match work.as_mut() {
        Some(running) => {
            let answer = running.await;
            *work = None;
            answer
        }
        None => std::future::pending().await,
    }
}

/// `answer` (to the first request of the call) as the answer to the retry `id`.
fn renumbered(answer: Answer, id: &str) -> Answer {
    let message = match wire::parse(&answer.message) {
        Ok(wire::Message::Response { result, .. }) => wire::write::response(id, result.get()),
        Ok(wire::Message::Error { error, .. }) => wire::write::error_raw(Some(id), error.get()),
        _ => return Answer::error(id, -32603, "the call's answer cannot be read"),
    };
    Answer {
        message,
        outcome: answer.outcome,
    }
}

/// Answers `question` with an error saying `why` it gets no answer.
fn refuse(question: Question, why: &str) {
    let error = serde_json::json!({"code": -32603, "message": why}).to_string();
    if let Ok(error) = RawValue::from_string(error) {
        let _ = question.answer.send(Err(error));
    }
}
