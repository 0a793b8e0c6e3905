//! Finding the session a request names, opening one, ending one.
//!
//! A session id carries its session (`session::SessionIds`): a replica that does not have the
//! session in its table opens the id and, if the shared store says the session lives, serves
//! it from what the id carries. Every refusal of an id is the same 404 ("Session not
//! found"), whether the id is made up, altered, sealed with a retired key, ended, expired, or
//! another principal's; only a store that cannot answer gets something else (503), since the
//! session may well be alive.

use std::{sync::Arc, time::Duration};

use http::StatusCode;
use rmcp::model::InitializeRequestParams;

use super::{
    Endpoint,
    reply::{self, RefusalResponse},
};
use crate::{
    downstream::{SharedStream, TaskSupport},
    policy::EndpointName,
    principal::Principal,
    request::Caller,
    session::{Session, Ticket},
    store::session_hash,
};

impl Endpoint {
    /// The session `id` names if it belongs to the caller's principal and was opened at the
    /// caller's endpoint: another principal's session, or one of another endpoint, is as
    /// unknown as a made-up id.
    pub(super) async fn session_for(
        &self,
        id: &str,
        caller: &Caller,
    ) -> Result<Arc<Session>, RefusalResponse> {
        let Caller {
            principal,
            endpoint,
        } = caller;
        if let Some(session) = self.sessions.get(id) {
            let home = session.home();
            return if *principal == home.principal && home.endpoint == *endpoint {
                Ok(session)
            } else {
                Err(not_found())
            };
        }
        let store = self.gateway.store();
        if !store.keeps_sessions() {
            return Err(not_found());
        }
        let ticket = self
            .ids
            .open(id)
            .filter(|ticket| ticket.belongs_to(principal, endpoint))
            .ok_or_else(not_found)?;
        match store.session_alive(&session_hash(id)).await {
            // Boxed: rare, and what a request's future holds it holds for every request.
            Ok(true) => Ok(Box::pin(self.adopt(id, ticket, caller.clone())).await),
            Ok(false) => Err(not_found()),
            Err(error) => Err(Box::new(reply::refusal_retry(
                StatusCode::SERVICE_UNAVAILABLE,
                &format!(
                    "Service Unavailable: {error}; the session may still be served by the replica that opened it"
                ),
                Duration::from_secs(1),
            ))),
        }
    }

    /// This replica's copy of a session another one opened (or this process, before a
    /// restart), with the tools its client found there.
    async fn adopt(
        &self,
        id: &str,
        ticket: Ticket,
        Caller {
            principal,
            endpoint,
        }: Caller,
    ) -> Arc<Session> {
        let catalog = self.gateway.live().catalog.clone();
        let version = ticket.client.protocol_version.clone();
        let session = Session::new(
            Arc::from(id),
            (ticket.client, ticket.tasks),
            version,
            principal,
            endpoint,
            self.sessions.now(),
            catalog.versions(),
        );
        tracing::debug!(session = %crate::session::short_hash(id), "serving a session another replica opened");
        self.share_stream(&session);
        let session = self.sessions.adopt(session);
        crate::session::recall_found(&session, self.gateway.store()).await;
        // What the replica that held the session's subscriptions left, if it died.
        let (gateway, adopted) = (self.gateway.clone(), session.clone());
        tokio::spawn(async move { adopted.take_over(&gateway).await });
        session
    }

    /// A new session for the request's principal at its endpoint, in the table and (with a
    /// shared store) alive for every replica.
    pub(super) async fn new_session(
        &self,
        (mut params, tasks): (InitializeRequestParams, TaskSupport),
        version: rmcp::model::ProtocolVersion,
        principal: Principal,
        endpoint: EndpointName,
        lists: crate::catalog::ListVersions,
    ) -> Arc<Session> {
        params.protocol_version = version.clone();
        let id = self
            .ids
            .mint(&Ticket::new(&principal, &endpoint, (&params, tasks)));
        let session = Session::new(
            id,
            (params, tasks),
            version,
            principal,
            endpoint,
            self.sessions.now(),
            lists,
        );
        self.share_stream(&session);
        self.sessions.insert(session.clone());
        if let Some(hash) = session.shared_hash() {
            // Failing, the session is served here alone until the sweeper writes it again.
            let _ = self
                .gateway
                .store()
                .renew_sessions(&[hash], self.sessions.idle_timeout())
                .await;
        }
        session
    }

    /// With a shared store, the session's standalone stream keeps its events there.
    fn share_stream(&self, session: &Session) {
        let store = self.gateway.store();
        if store.keeps_sessions() {
            session.standalone().share(SharedStream::new(
                store.clone(),
                session_hash(session.id()),
                self.sessions.idle_timeout(),
            ));
        }
    }

    /// Ends session `session` here and, with a shared store, everywhere.
    pub(super) async fn end_session(&self, session: &Session) {
        self.sessions.remove(session.id());
        if let Some(hash) = session.shared_hash() {
            let _ = self.gateway.store().session_ended(hash).await;
        }
    }
}

fn not_found() -> RefusalResponse {
    Box::new(reply::refusal(
        StatusCode::NOT_FOUND,
        "Not Found: Session not found",
    ))
}
