//! Answering one client request. The hot methods take the raw path: `tools/call`,
//! `prompts/get` and `resources/read` are routed as the bytes they came in (`router`), and the
//! four lists are served from the catalog's prepared pages. Everything else goes through rmcp's
//! typed server machinery (`typed`), which keeps the protocol rules of the less frequent
//! methods in one well-tested place. A request is served in phases, one short function each:
//! classify, route, admit, dispatch, finish (`Serving::answer`); the guardrails of a tool call
//! before `admit` are `screened`'s, the approval it may wait for in `admit` is `approve`'s, the
//! guardrails of its result after `finish` `guarded`'s.
//!
//! The answer is the work's output; what is sent to the client before it (progress, log
//! messages, requests) goes through the request's outlet, which the front streams.

use std::{sync::Arc, time::Instant};

use rmcp::model::{LoggingLevel, ProgressToken};
use tokio_util::sync::CancellationToken;

use super::{
    Session, audited, cached,
    parked::{self, Parked},
    search::{self, GatewayTool},
    upstreams::Source,
};
use crate::{
    catalog::ListKind,
    downstream::{Bridge, Downstream, LogLevel, Outlet, PipeReceiver, pipe},
    error::GatewayError,
    gateway::Gateway,
    metrics::Outcome,
    policy::Kind,
    protocol::{Era, META_LOG_LEVEL, META_PROGRESS_TOKEN},
    quota::{Ask, Granted},
    request::{Caller, Request},
    router::{Call, ConnectionSource, Routed, Target, TaskMethod},
    telemetry,
    upstream::Upstream,
    wire::{self, Answer, Fields},
};

/// Messages a request may have on their way to the client before it waits for it to read.
const OUTLET_CAPACITY: usize = 32;

/// A request being answered: the work that yields the answer, and what it sends the client
/// on the way.
pub struct Served {
    pub work: futures::future::BoxFuture<'static, Answer>,
    pub messages: PipeReceiver,
}

/// Whose request it is: a session's, or one that stands alone (a 2026-07-28 client's, whose
/// calls wait in `parked` when an upstream asks it something).
pub enum Client {
    Session(Arc<Session>),
    Alone(Arc<Parked>),
}

/// Starts answering `request` of `client`. `found`: where a routed request goes, if the front
/// looked it up already (a 2026-07-28 tool call, whose headers must agree with its params).
pub fn serve(
    gateway: &Arc<Gateway>,
    request: Request,
    client: Client,
    found: Option<Result<Target, GatewayError>>,
) -> Served {
    let (session, parked) = match client {
        Client::Session(session) => (Some(session), None),
        Client::Alone(parked) => (None, Some(parked)),
    };
    let (sender, messages) = pipe(OUTLET_CAPACITY);
    let gateway = gateway.clone();
    // A traced request runs in its server span. Otherwise this one is built only when debug
    // logs are on (its fields are not evaluated otherwise); the router records the upstream
    // and tool. Never the session id itself, nor the arguments.
    let span = if request.trace.is_traced() {
        if let Some(session) = &session {
            request.trace.session(&super::short_hash(session.id()));
        }
        request.trace.span().clone()
    } else {
        tracing::debug_span!(
            "request",
            method = request.method(),
            session = session.as_ref().map(|s| super::short_hash(s.id())),
            upstream = tracing::field::Empty,
            tool = tracing::field::Empty,
        )
    };
    let request = Arc::new(request);
    let work = Box::pin(tracing::Instrument::instrument(
        async move {
            let in_flight = session.as_ref().map(|session| session.begin(request.id()));
            let ct = match &in_flight {
                Some(in_flight) => in_flight.token.clone(),
                None => CancellationToken::new(),
            };
            let timer = gateway.metrics().request(request.method());
            let outlet = Outlet::Request {
                stream: sender,
                session: session.as_ref().map(|session| session.standalone().clone()),
            };
            let bridged = parked.as_ref().filter(|_| {
                request.era == Era::Modern && Routed::of_method(request.method()).is_some()
            });
            let answer = match bridged {
                Some(parked) => bridged_answer(&gateway, parked, &request, found, outlet).await,
                None => {
                    let serving = Serving {
                        gateway: &gateway,
                        request: &request,
                        session: session.as_ref(),
                        ct: &ct,
                        bridge: None,
                    };
                    serving.answer(found, outlet).await
                }
            };
            let answer = match request.era {
                Era::Modern => super::modern::shaped(request.method(), answer),
                Era::Legacy => answer,
            };
            let failed = answer.failed();
            timer.finish(if failed { Outcome::Error } else { Outcome::Ok });
            if failed {
                request.trace.finish(&answer.message);
            }
            drop(in_flight);
            answer
        },
        span,
    ));
    Served { work, messages }
}

/// A routed request of a 2026-07-28 client: the retry of a call waiting for its answers goes
/// on with that call; any other is answered with a bridge for the questions its upstream may
/// ask (see `parked`).
async fn bridged_answer(
    gateway: &Arc<Gateway>,
    parked: &Arc<Parked>,
    request: &Arc<Request>,
    found: Option<Result<Target, GatewayError>>,
    outlet: Outlet,
) -> Answer {
    if let Some(state) = parked::state_of(request) {
        return parked.resume(request, &state).await;
    }
    let (bridge, questions) = Bridge::new();
    let work = {
        let (gateway, request) = (gateway.clone(), request.clone());
        Box::pin(async move {
            let serving = Serving {
                gateway: &gateway,
                request: &request,
                session: None,
                ct: &CancellationToken::new(),
                bridge: Some(&bridge),
            };
            serving.answer(found, outlet).await
        })
    };
    let wait = request.live.config.limits.input_wait;
    parked.run(request, wait, work, questions).await
}

/// One request being answered, and what it is answered with.
pub(super) struct Serving<'a> {
    pub gateway: &'a Arc<Gateway>,
    pub request: &'a Arc<Request>,
    pub session: Option<&'a Arc<Session>>,
    pub ct: &'a CancellationToken,
    /// Where an upstream's questions for a 2026-07-28 client go, if they can be asked.
    pub bridge: Option<&'a Bridge>,
}

impl Serving<'_> {
    /// The answer, phase by phase (each either hands on or answers): `classify` the method,
    /// `route` a routed request to its target, let the guardrails see a tool call
    /// (`screened`'s `guarded_call`), `admit` it (the audit log keeping up, the approval it may want, the
    /// quotas it spends), `dispatch` it on the raw path or the typed one (through the cache
    /// where a rule keeps its answers), and `finish` the answer (linked resources inlined, the
    /// audit record). Lists, tasks and the gateway's own tools are answered on the way.
    pub(super) async fn answer(
        &self,
        found: Option<Result<Target, GatewayError>>,
        outlet: Outlet,
    ) -> Answer {
        let started = Instant::now();
        let fast = match self.classify() {
            Ok(Some(fast)) => fast,
            // Boxed: the typed path is the rare one, and its future is large.
            Ok(None) => return Box::pin(self.typed(self.downstream(outlet), None)).await,
            Err(answer) => return answer,
        };
        let source = match self.session {
            Some(session) => Source::Session(session.upstreams()),
            None => Source::Stateless(&self.request.caller.principal),
        };
        let call = Call {
            request: self.request,
            store: self.gateway.store(),
            source: &source,
            downstream: self.downstream(outlet),
            ct: self.ct,
            held: Default::default(),
        };
        let kind = match fast {
            Fast::List(kind) => return self.list(kind),
            // Boxed: the requests about tasks are few, and their future is large.
            Fast::Task(method) => return Box::pin(self.task(&call, method, started)).await,
            Fast::Routed(kind) => kind,
        };
        if let Some(answer) = self.gateway_tool(kind, &call).await {
            return answer;
        }
        let (target, subject) = match self.route(kind, found) {
            Ok(routed) => routed,
            Err(error) => {
                let answer = call.failed(error);
                let audit = self.gateway.audit();
                audited::record(audit, self.request, self.session, None, &answer, started);
                return answer;
            }
        };
        if kind == Routed::Tool && self.guards() {
            // Boxed: only calls a guardrail may look at take this path, which may wait on a
            // policy hook.
            return Box::pin(self.guarded_call(&call, target, subject, started)).await;
        }
        self.routed(&call, (target, kind), subject, started).await
    }

    /// A routed request on its way once its target is found: `admit` it, `dispatch` it,
    /// `finish` the answer, let the guardrails see a tool's result, and audit it.
    pub(super) async fn routed<S: ConnectionSource>(
        &self,
        call: &Call<'_, S>,
        (target, kind): (Target, Routed),
        subject: Option<audited::Subject>,
        started: Instant,
    ) -> Answer {
        if let Err(answer) = self
            .admit(call, &target, kind, (subject.as_ref(), started))
            .await
        {
            return answer;
        }
        let upstream = target.upstream.clone();
        // The tool's own name, for the guardrails, where there are some.
        let guarded = (kind == Routed::Tool && self.guards()).then(|| target.original.clone());
        let answer = self.dispatch(call, target).await;
        let answer = self.finish(call, &upstream, kind, answer).await;
        let answer = match guarded {
            // Boxed: a policy hook asked about the result waits on the network.
            Some(tool) => Box::pin(self.guarded(upstream.name().as_str(), &tool, answer)).await,
            None => answer,
        };
        self.audit(subject.as_ref(), &answer, started);
        answer
    }

    /// Which way the request goes: a fast method (a list, a routed request, a task method)
    /// whose params are checked here, or `None`, rmcp's handler.
    fn classify(&self) -> Result<Option<Fast>, Answer> {
        let request = self.request;
        let method = request.method();
        let fast = ListKind::of_method(method)
            .map(Fast::List)
            .or_else(|| Routed::of_method(method).map(Fast::Routed))
            .or_else(|| TaskMethod::of_method(method).map(Fast::Task));
        if fast.is_none() {
            return Ok(None);
        }
        if request.message.params_malformed() {
            return Err(Answer::error(
                request.id(),
                -32602,
                "params must be an object",
            ));
        }
        if request.era == Era::Modern
            && let Err(error) = super::modern::check_meta(request.message.meta())
        {
            return Err(error.answer(request.id()));
        }
        Ok(fast)
    }

    /// A page of a merged list, or of the found tools where tool search is on.
    fn list(&self, kind: ListKind) -> Answer {
        if kind == ListKind::Tools && search::searching(self.request) {
            return Answer::result(search::list(self.request, self.session));
        }
        list_page(self.request, kind)
    }

    /// `tasks/get`, `tasks/result`, `tasks/cancel`, `tasks/list`; how a task ended is audited.
    async fn task<S: ConnectionSource>(
        &self,
        call: &Call<'_, S>,
        method: TaskMethod,
        started: Instant,
    ) -> Answer {
        let mut answer = call.task(method).await;
        if self.guards()
            && matches!(method, TaskMethod::Result | TaskMethod::Get)
            && let Some(upstream) = call.task_upstream().await
        {
            answer = Box::pin(self.guarded_task(upstream.as_str(), method, answer)).await;
        }
        if matches!(method, TaskMethod::Result | TaskMethod::Cancel) {
            let audit = self.gateway.audit();
            audited::task_end(audit, self.request, self.session, &answer, started);
        }
        answer
    }

    /// Where tool search is on, its own tools: `search_tools` answered here, `call_tool`
    /// served as the call it wraps. `None`: any other request.
    async fn gateway_tool<S>(&self, kind: Routed, call: &Call<'_, S>) -> Option<Answer> {
        if kind != Routed::Tool || !search::searching(self.request) {
            return None;
        }
        match search::gateway_tool(self.request)? {
            GatewayTool::Search => {
                let store = self.gateway.store();
                let found = search::search(self.request, self.session, store).await;
                Some(Answer::read(found))
            }
            GatewayTool::Call => {
                let inner = match search::unwrap_call(self.request) {
                    Ok(inner) => Arc::new(inner),
                    Err(answer) => return Some(Answer::read(answer)),
                };
                let serving = Serving {
                    request: &inner,
                    ..*self
                };
                let outlet = call.downstream.outlet.clone();
                Some(Box::pin(serving.answer(None, outlet)).await)
            }
        }
    }

    /// The request's target (unless the front found it already), and what its audit record
    /// names, when the audit is on.
    fn route(
        &self,
        kind: Routed,
        found: Option<Result<Target, GatewayError>>,
    ) -> Result<(Target, Option<audited::Subject>), GatewayError> {
        let request = self.request;
        let target = found.unwrap_or_else(|| {
            let _routing = telemetry::child("route").entered();
            Target::of(request, kind)
        })?;
        let upstream = target.upstream.name().as_str();
        request
            .trace
            .routed(request.method(), upstream, &target.original);
        let subject = self
            .gateway
            .audit()
            .is_on()
            .then(|| audited::Subject::of(&target));
        Ok((target, subject))
    }

    /// Whether the call may go on: not while the audit log refuses calls (which has no room to
    /// record that), nor without the approval a rule wants (`approve`), nor beyond a quota
    /// (both recorded, for `subject` from `started`). What it spends is held by the call (or
    /// the task it creates) and given back when it ends.
    async fn admit<S: ConnectionSource>(
        &self,
        call: &Call<'_, S>,
        target: &Target,
        kind: Routed,
        (subject, started): (Option<&audited::Subject>, Instant),
    ) -> Result<(), Answer> {
        if self.gateway.audit().refuses() {
            return Err(Answer::error(
                self.request.id(),
                -32603,
                "the audit log cannot keep up, and calls are refused until it does (fail_closed)",
            ));
        }
        if kind == Routed::Tool && self.may_want_approval() {
            // Boxed: only calls that may wait for a person take this path.
            if let Err(answer) = Box::pin(self.approved(call, target)).await {
                self.audit(subject, &answer, started);
                return Err(answer);
            }
        }
        if self.request.live.config.quotas.is_empty() {
            return Ok(());
        }
        // Boxed: what counting in a shared store takes is large, and only a quota needs it.
        match Box::pin(self.spend(target, kind)).await {
            Ok(granted) => {
                if let Some(granted) = granted {
                    call.hold(granted);
                }
                Ok(())
            }
            Err(answer) => {
                self.audit(subject, &answer, started);
                Err(answer)
            }
        }
    }

    /// The call sent to its upstream: on the raw path, or rmcp's typed one; through the cache
    /// where a rule keeps its answers.
    async fn dispatch<S: ConnectionSource>(&self, call: &Call<'_, S>, target: Target) -> Answer {
        let request = self.request;
        let cached =
            cached::cached_as(request, &target).map(|kept| (kept, target.upstream.clone()));
        let dispatch = async move {
            if target.takes_raw(request.era) {
                call.routed(&target).await
            } else {
                let downstream = call.downstream.clone();
                Box::pin(self.typed(downstream, Some(target))).await
            }
        };
        match cached {
            // Boxed: a work that may wait on another's answer is larger, and rare.
            Some(((rule, key), upstream)) => {
                let cache = self.gateway.cache();
                let name = upstream.name().as_str();
                Box::pin(cache.answer(name, &key, request.id(), rule, dispatch)).await
            }
            None => dispatch.await,
        }
    }

    /// The answer as the client gets it: a tool result's linked resources inlined where
    /// the endpoint or the upstream asks for it.
    async fn finish<S>(
        &self,
        call: &Call<'_, S>,
        upstream: &Arc<Upstream>,
        kind: Routed,
        answer: Answer,
    ) -> Answer {
        let request = self.request;
        let inlining = (kind == Routed::Tool)
            .then(|| request.live.inlining(&request.caller.endpoint, upstream))
            .flatten();
        match inlining {
            Some(max) if answer.outcome == wire::Outcome::Result => {
                let outlet = &call.downstream.outlet;
                Answer::result(self.inline(answer.message, max, outlet).await)
            }
            _ => answer,
        }
    }

    /// The audit record of a routed request, when the audit is on (`subject` then).
    pub(super) fn audit(
        &self,
        subject: Option<&audited::Subject>,
        answer: &Answer,
        started: Instant,
    ) {
        if let Some(subject) = subject {
            let audit = self.gateway.audit();
            audited::record(
                audit,
                self.request,
                self.session,
                Some(subject),
                answer,
                started,
            );
        }
    }

    /// Spends what a call to `target` costs of the quotas that cover it (none: nothing to
    /// do), or the error answering a call beyond one.
    async fn spend(&self, target: &Target, kind: Routed) -> Result<Option<Granted>, Answer> {
        let request = self.request;
        let rules = &request.live.config.quotas;
        if rules.is_empty() {
            return Ok(None);
        }
        let kind = match kind {
            Routed::Tool => Kind::Tool,
            Routed::Prompt => Kind::Prompt,
            Routed::Resource => Kind::Resource,
        };
        let upstream = target.upstream.name().as_str();
        let ask = Ask::of_quotas(
            rules,
            &request.caller.principal,
            kind,
            upstream,
            &target.original,
        );
        match self.gateway.quotas().take(ask).await {
            Ok(granted) => Ok(Some(granted)),
            Err(exceeded) => {
                tracing::debug!(quota = %exceeded.quota, limit = exceeded.limit, "call refused: beyond a quota");
                Err(exceeded.answer(request.id()))
            }
        }
    }

    /// The downstream side of the request: where its messages go, what its client can do and
    /// wants to hear.
    fn downstream(&self, outlet: Outlet) -> Arc<Downstream> {
        let request = self.request;
        let meta = request.message.meta();
        let progress_token = meta
            .and_then(|meta| meta.get(META_PROGRESS_TOKEN))
            .and_then(|token| serde_json::from_str::<ProgressToken>(token.get()).ok());
        let Caller {
            principal,
            endpoint,
        } = request.caller.clone();
        if let Some(session) = self.session {
            let home = session.home();
            return Arc::new(Downstream {
                outlet,
                asks: home.asks.clone(),
                bridge: None,
                progress_token,
                capabilities: home.capabilities.clone(),
                principal,
                endpoint,
                log_level: home.log_level.clone(),
            });
        }
        let field = |key| meta.and_then(|meta: &Fields<'_>| meta.get(key));
        let capabilities = request.stated_capabilities().clone();
        let log_level = field(META_LOG_LEVEL)
            .and_then(|level| serde_json::from_str::<LoggingLevel>(level.get()).ok())
            .map_or(LogLevel::Unset, LogLevel::Request);
        Arc::new(Downstream {
            outlet,
            asks: None,
            bridge: self.bridge.cloned(),
            progress_token,
            capabilities,
            principal,
            endpoint,
            log_level,
        })
    }
}

/// The methods answered without rmcp's handler (unless a routed one must take it).
enum Fast {
    List(ListKind),
    Routed(Routed),
    Task(TaskMethod),
}

/// A page of one of the merged lists, from the catalog's prepared bytes.
fn list_page(request: &Request, kind: ListKind) -> Answer {
    let id = request.id();
    let cursor = request
        .message
        .params()
        .and_then(|params| params.get("cursor"))
        .filter(|cursor| cursor.get() != "null");
    let cursor = match cursor.map(|cursor| wire::string(cursor).ok_or(())) {
        None => None,
        Some(Ok(cursor)) => Some(cursor),
        Some(Err(())) => {
            return Answer::error(id, -32602, "the cursor must be a string");
        }
    };
    let page = request.live.list_page(
        kind,
        request.era,
        cursor.as_deref(),
        (request.viewer(), request.declared()),
    );
    match page {
        Ok(page) => Answer::result(wire::write::response(
            id,
            std::str::from_utf8(&page).unwrap_or("{}"),
        )),
        Err(error) => error.answer(id, request.era),
    }
}
