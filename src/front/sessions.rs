//! The table of open downstream sessions, as rmcp's `SessionManager`.
//!
//! Each session runs rmcp's own session worker (message routing, SSE streams, resumption, idle
//! timeout); only the table differs from rmcp's `LocalSessionManager`: a sharded map instead of
//! one `RwLock` that every request of every session would take.

use std::sync::Arc;

use dashmap::DashMap;
use futures::Stream;
use rmcp::{
    model::{ClientJsonRpcMessage, ServerJsonRpcMessage},
    transport::{
        WorkerTransport,
        streamable_http_server::{
            SessionId, SessionManager,
            session::{
                ServerSseMessage,
                local::{
                    EventId, EventIdParseError, LocalSessionHandle, LocalSessionWorker,
                    SessionConfig, SessionError, create_local_session,
                },
            },
        },
    },
};
use tokio_stream::wrappers::ReceiverStream;

#[derive(Debug, thiserror::Error)]
pub enum SessionTableError {
    #[error("session {0} not found")]
    NotFound(SessionId),
    #[error(transparent)]
    Session(#[from] SessionError),
    #[error("invalid Last-Event-ID: {0}")]
    EventId(#[from] EventIdParseError),
}

/// Open sessions by id.
pub struct SessionTable {
    sessions: DashMap<SessionId, LocalSessionHandle>,
    config: SessionConfig,
}

impl SessionTable {
    pub fn new(config: SessionConfig) -> Self {
        Self {
            sessions: DashMap::new(),
            config,
        }
    }

    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    /// A clone of the handle, so no shard lock is held while the session is awaited.
    fn handle(&self, id: &SessionId) -> Result<LocalSessionHandle, SessionTableError> {
        self.sessions
            .get(id)
            .map(|entry| entry.value().clone())
            .ok_or_else(|| SessionTableError::NotFound(id.clone()))
    }
}

/// A new unguessable session id.
fn new_session_id() -> SessionId {
    Arc::from(uuid::Uuid::new_v4().simple().to_string())
}

impl SessionManager for SessionTable {
    type Error = SessionTableError;
    type Transport = WorkerTransport<LocalSessionWorker>;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let id = new_session_id();
        let (handle, worker) = create_local_session(id.clone(), self.config.clone());
        self.sessions.insert(id.clone(), handle);
        Ok((id, WorkerTransport::spawn(worker)))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        Ok(self.handle(id)?.initialize(message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        Ok(self.sessions.contains_key(id))
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        if let Some((_, handle)) = self.sessions.remove(id) {
            match handle.close().await {
                // The worker already ended (idle timeout, say): nothing left to close.
                Ok(()) | Err(SessionError::SessionServiceTerminated) => {}
                Err(error) => return Err(error.into()),
            }
        }
        Ok(())
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let handle = self.handle(id)?;
        let receiver = handle.establish_request_wise_channel().await?;
        handle
            .push_message(message, receiver.http_request_id)
            .await?;
        Ok(ReceiverStream::new(receiver.inner))
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        Ok(self.handle(id)?.push_message(message, None).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let receiver = self.handle(id)?.establish_common_channel().await?;
        Ok(ReceiverStream::new(receiver.inner))
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let event_id: EventId = last_event_id.parse()?;
        let receiver = self.handle(id)?.resume(event_id).await?;
        Ok(ReceiverStream::new(receiver.inner))
    }
}
