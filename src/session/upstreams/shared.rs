//! With a shared store, a session's upstream sessions (with `per_client` streamable-HTTP
//! upstreams) are shared by every replica that serves it: the first replica to need one opens
//! it and keeps its id (and what the upstream said at `initialize`) in the store; the others
//! go on with it. One the upstream has lost is replaced, and the replacement shared.
//!
//! A replica's connection to a shared upstream session does not end that session when it
//! closes (idle, or the replica dropped its copy of the client session): the session ends
//! upstream when the client's session ends.

use std::{sync::Arc, time::Duration};

use crate::{
    downstream::SharedStream,
    error::GatewayError,
    store::{Store, StoreError},
    upstream::{Connection, SessionSlot, Upstream, UpstreamSession},
};

use super::SessionUpstreams;

impl SessionUpstreams {
    /// Opens this session's connection to `upstream`: going on with the upstream session the
    /// replicas share, if there is one (but never with `lost`, which the upstream no longer
    /// knows), else opening one and sharing it.
    pub(super) async fn open_shared(
        &self,
        upstream: &Arc<Upstream>,
        shared: &SharedStream,
        lost: Option<&str>,
    ) -> Result<Arc<Connection>, GatewayError> {
        let mut replace = lost.is_some();
        // Twice at most: if another replica shares its session first, this one goes on with
        // that one instead.
        for _ in 0..2 {
            if let Some(found) = find(shared, upstream).await
                && Some(found.id.as_str()) != lost
            {
                let connection = self.connect(upstream, SessionSlot::adopting(found)).await?;
                if !connection.session().still_adopting() {
                    follow(&connection, shared, upstream);
                    return Ok(connection);
                }
                // Not reached over streamable HTTP any more: what it opened is shared
                // instead.
                replace = true;
                if self.share(&connection, shared, upstream, true).await {
                    return Ok(connection);
                }
                continue;
            }
            let connection = self.connect(upstream, SessionSlot::kept()).await?;
            if self.share(&connection, shared, upstream, replace).await {
                return Ok(connection);
            }
            // Another replica shared its session first: this one ends, that one is used.
            connection.session().release();
            connection.close(std::time::Duration::from_secs(1)).await;
        }
        Err(GatewayError::UpstreamFailed {
            upstream: upstream.name().clone(),
            reason: "replicas kept replacing its session".into(),
        })
    }

    /// Shares `connection`'s upstream session (replacing what is shared, or only if nothing
    /// is); whether the connection may be used. With the store unreachable it is used, by
    /// this replica alone.
    async fn share(
        &self,
        connection: &Arc<Connection>,
        shared: &SharedStream,
        upstream: &Upstream,
        replace: bool,
    ) -> bool {
        let Some(session) = connection.shareable() else {
            // No session id (stdio, legacy SSE, a stateless upstream): nothing to share.
            connection.session().release();
            return true;
        };
        let kept = keep(
            shared.store(),
            shared.hash(),
            shared.ttl(),
            upstream.name().as_str(),
            &session,
            replace,
        );
        match kept.await {
            Ok(true) => {
                follow(connection, shared, upstream);
                true
            }
            Ok(false) => false,
            Err(error) => {
                tracing::warn!(upstream = %upstream.name(), %error, "an upstream session is not shared: other replicas will open their own");
                true
            }
        }
    }
}

/// The upstream session the replicas share with `upstream` for this client session.
async fn find(shared: &SharedStream, upstream: &Upstream) -> Option<UpstreamSession> {
    let found = shared
        .store()
        .upstream_session(shared.hash(), upstream.name().as_str())
        .await;
    match found {
        Ok(Some(plain)) => serde_json::from_slice(&plain)
            .inspect_err(|error| {
                tracing::warn!(upstream = %upstream.name(), %error, "a shared upstream session record cannot be read; opening a new one");
            })
            .ok(),
        Ok(None) => None,
        Err(error) => {
            tracing::warn!(upstream = %upstream.name(), %error, "shared upstream sessions cannot be read; opening one for this replica");
            None
        }
    }
}

/// Shares the session id `connection`'s worker renegotiates (after the upstream lost the
/// session), so that the other replicas go on with the new session too.
fn follow(connection: &Connection, shared: &SharedStream, upstream: &Upstream) {
    let server = connection.server().clone();
    let store = shared.store().clone();
    let (hash, ttl) = (shared.hash().to_owned(), shared.ttl());
    let name = upstream.name().to_string();
    connection.session().on_renamed(move |id| {
        let session = UpstreamSession {
            id: id.to_owned(),
            server: server.clone(),
        };
        let (store, hash, name) = (store.clone(), hash.clone(), name.clone());
        tokio::spawn(async move {
            if let Err(error) = keep(&store, &hash, ttl, &name, &session, true).await {
                tracing::warn!(upstream = %name, %error, "a renewed upstream session is not shared");
            }
        });
    });
}

/// Keeps `session` as client session `hash`'s with `upstream` in `store` (replacing what is
/// kept, or only if nothing is); whether it was written.
async fn keep(
    store: &Store,
    hash: &str,
    ttl: Duration,
    upstream: &str,
    session: &UpstreamSession,
    replace: bool,
) -> Result<bool, StoreError> {
    let plain = serde_json::to_vec(session).expect("an upstream session serializes");
    store
        .keep_upstream_session(hash, upstream, &plain, ttl, replace)
        .await
}
