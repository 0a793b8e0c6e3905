//! The Redis side of the shared store: key names, the commands, and the subscription that
//! hears of sessions ended elsewhere.
//!
//! Keys: `PREFIX:session:HASH` (a session is alive while it exists; it expires after the idle
//! timeout unless a replica that serves the session renews it), `PREFIX:events:HASH` (a
//! stream of the session's sealed standalone-stream events, the last `EVENTS_KEPT`, expiring
//! with the session), `PREFIX:events:HASH:seen` (the last event a stream of it was sent) and
//! `PREFIX:upstreams:HASH` (its upstream sessions, see `upstreams`) and
//! `PREFIX:subscriptions:HASH` (its resource subscriptions, see `subscriptions`); the
//! replicas' beats and what each held are under `PREFIX:replicas` and `PREFIX:held:ID` (see
//! `replicas`).
//! Channels: `PREFIX:ended` and `PREFIX:events` (the hashes of sessions ended, and of those
//! with a new event), `PREFIX:changed` (records changed, see `records`) and `PREFIX:relayed`
//! (a session's hash, a space, and a message of its client, sealed, for another replica).

use std::time::Duration;

use futures::StreamExt;
use redis::{AsyncCommands, aio::ConnectionManager};
use tokio_util::sync::CancellationToken;

// Events kept per session stream (about: Redis trims whole nodes).
use super::{EVENTS_KEPT, Health, Heard, StoreError};

/// How long one command may take before the store counts as unreachable.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(2);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// The pause before listening again after the subscription failed, doubling up to the max.
const RELISTEN_DELAY: Duration = Duration::from_millis(100);
const RELISTEN_MAX_DELAY: Duration = Duration::from_secs(5);

pub(super) struct Redis {
    client: redis::Client,
    /// Connects on first use and again after a failure.
    connection: ConnectionManager,
    prefix: String,
}

impl Redis {
    /// `url` was checked with the configuration.
    pub(super) fn new(url: &str, prefix: &str) -> Self {
        let client = redis::Client::open(url).expect("the configuration checked the Redis URL");
        let config = redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_response_timeout(Some(RESPONSE_TIMEOUT))
            .set_number_of_retries(1)
            .set_min_delay(Duration::from_millis(20))
            .set_max_delay(Duration::from_millis(500));
        let connection = ConnectionManager::new_lazy_with_config(client.clone(), config)
            .expect("a lazy connection needs no push sender");
        Self {
            client,
            connection,
            prefix: prefix.to_owned(),
        }
    }

    pub(super) fn prefix(&self) -> &str {
        &self.prefix
    }

    /// A handle on the shared connection (cheap: it is multiplexed).
    pub(super) fn connection(&self) -> ConnectionManager {
        self.connection.clone()
    }

    fn session_key(&self, hash: &str) -> String {
        format!("{}:session:{hash}", self.prefix)
    }

    fn ended_channel(&self) -> String {
        format!("{}:ended", self.prefix)
    }

    fn events_key(&self, hash: &str) -> String {
        format!("{}:events:{hash}", self.prefix)
    }

    fn events_channel(&self) -> String {
        format!("{}:events", self.prefix)
    }

    fn relayed_channel(&self) -> String {
        format!("{}:relayed", self.prefix)
    }

    pub(super) async fn relay(&self, hash: &str, sealed: &[u8]) -> Result<(), StoreError> {
        let mut payload = Vec::with_capacity(hash.len() + 1 + sealed.len());
        payload.extend_from_slice(hash.as_bytes());
        payload.push(b' ');
        payload.extend_from_slice(sealed);
        let _: u64 = self
            .connection()
            .publish(self.relayed_channel(), payload)
            .await
            .map_err(failure("relayed message"))?;
        Ok(())
    }

    /// Adds `sealed` to session `hash`'s events and tells every replica.
    pub(super) async fn append(
        &self,
        hash: &str,
        sealed: &[u8],
        ttl: Duration,
    ) -> Result<(), StoreError> {
        let key = self.events_key(hash);
        let () = redis::pipe()
            .cmd("XADD")
            .arg(&key)
            .arg("MAXLEN")
            .arg("~")
            .arg(EVENTS_KEPT)
            .arg("*")
            .arg("m")
            .arg(sealed)
            .ignore()
            .pexpire(&key, ttl.as_millis().max(1) as i64)
            .ignore()
            .publish(self.events_channel(), hash)
            .ignore()
            .query_async(&mut self.connection.clone())
            .await
            .map_err(failure("stream event"))?;
        Ok(())
    }

    /// Session `hash`'s events after `after` (an event id), or all, oldest first: (id,
    /// sealed message).
    pub(super) async fn events_after(
        &self,
        hash: &str,
        after: Option<&str>,
    ) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        let start = after.map_or_else(|| "-".to_owned(), |id| format!("({id}"));
        let reply: redis::streams::StreamRangeReply = self
            .connection
            .clone()
            .xrange_count(self.events_key(hash), start, "+", EVENTS_KEPT)
            .await
            .map_err(failure("stream event"))?;
        reply
            .ids
            .into_iter()
            .map(|entry| match entry.map.get("m") {
                Some(redis::Value::BulkString(bytes)) => Ok((entry.id, bytes.clone())),
                other => Err(StoreError::Unreadable {
                    kind: "stream event",
                    reason: format!("entry {} holds {other:?}, not a sealed message", entry.id),
                }),
            })
            .collect()
    }

    pub(super) async fn seen(&self, hash: &str) -> Result<Option<String>, StoreError> {
        self.connection
            .clone()
            .get(format!("{}:seen", self.events_key(hash)))
            .await
            .map_err(failure("stream cursor"))
    }

    pub(super) async fn set_seen(
        &self,
        hash: &str,
        id: &str,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        let () = self
            .connection
            .clone()
            .pset_ex(
                format!("{}:seen", self.events_key(hash)),
                id,
                ttl.as_millis().max(1) as u64,
            )
            .await
            .map_err(failure("stream cursor"))?;
        Ok(())
    }

    pub(super) async fn renew(&self, hashes: &[&str], ttl: Duration) -> Result<(), StoreError> {
        let millis = ttl.as_millis().max(1) as u64;
        let mut pipe = redis::pipe();
        for hash in hashes {
            pipe.cmd("SET")
                .arg(self.session_key(hash))
                .arg(1)
                .arg("PX")
                .arg(millis)
                .ignore()
                .pexpire(self.upstreams_key(hash), millis as i64)
                .ignore()
                .pexpire(self.subscriptions_key(hash), millis as i64)
                .ignore()
                .pexpire(self.found_key(hash), millis as i64)
                .ignore();
        }
        let () = pipe
            .query_async(&mut self.connection.clone())
            .await
            .map_err(failure("session"))?;
        Ok(())
    }

    pub(super) async fn alive_many(&self, hashes: &[&str]) -> Result<Vec<bool>, StoreError> {
        let mut pipe = redis::pipe();
        for hash in hashes {
            pipe.exists(self.session_key(hash));
        }
        let found: Vec<i64> = pipe
            .query_async(&mut self.connection.clone())
            .await
            .map_err(failure("session"))?;
        Ok(found.into_iter().map(|n| n > 0).collect())
    }

    pub(super) async fn end(&self, hash: &str) -> Result<(), StoreError> {
        let events = self.events_key(hash);
        let () = redis::pipe()
            .del(&[
                self.session_key(hash),
                format!("{events}:seen"),
                events,
                self.upstreams_key(hash),
                self.subscriptions_key(hash),
                self.found_key(hash),
            ])
            .ignore()
            .publish(self.ended_channel(), hash)
            .ignore()
            .query_async(&mut self.connection.clone())
            .await
            .map_err(failure("session"))?;
        Ok(())
    }

    /// Subscribes to the channels, and again after every failure, until `shutdown`.
    pub(super) async fn listen(
        &self,
        health: &Health,
        heard: &dyn Heard,
        shutdown: CancellationToken,
    ) {
        let mut delay = RELISTEN_DELAY;
        loop {
            let listened = tokio::select! {
                listened = self.listen_once(health, heard) => listened,
                () = shutdown.cancelled() => return,
            };
            if let Err(error) = listened {
                health.failed(&error);
            }
            tokio::select! {
                () = tokio::time::sleep(delay) => {}
                () = shutdown.cancelled() => return,
            }
            delay = (delay * 2).min(RELISTEN_MAX_DELAY);
        }
    }

    async fn listen_once(&self, health: &Health, heard: &dyn Heard) -> Result<(), StoreError> {
        let connect = self.client.get_async_pubsub();
        let mut pubsub = tokio::time::timeout(CONNECT_TIMEOUT, connect)
            .await
            .map_err(|_| StoreError::Unreachable("Redis: connecting timed out".into()))?
            .map_err(failure("ended session"))?;
        let (ended, events, changed, relayed) = (
            self.ended_channel(),
            self.events_channel(),
            self.changed_channel(),
            self.relayed_channel(),
        );
        pubsub
            .subscribe(&[&ended, &events, &changed, &relayed])
            .await
            .map_err(failure("ended session"))?;
        health.up();
        // Events published while no one listened are read when a stream next pulls.
        heard.reconnected();
        let mut messages = pubsub.on_message();
        while let Some(message) = messages.next().await {
            let channel = message.get_channel_name();
            if channel == relayed {
                let payload = message.get_payload_bytes();
                match payload.iter().position(|b| *b == b' ') {
                    Some(at) => match std::str::from_utf8(&payload[..at]) {
                        Ok(hash) => heard.session_message(hash, &payload[at + 1..]),
                        Err(_) => tracing::warn!("a relayed message without a session was ignored"),
                    },
                    None => tracing::warn!("a relayed message without a session was ignored"),
                }
                continue;
            }
            let Ok(payload) = std::str::from_utf8(message.get_payload_bytes()) else {
                tracing::warn!("a message that is not text was ignored on the store's channels");
                continue;
            };
            if channel == ended {
                heard.session_ended(payload);
            } else if channel == events {
                heard.session_event(payload);
            } else if let Some((kind, hash)) = payload.split_once(' ') {
                heard.record_changed(kind, hash);
            }
        }
        Err(StoreError::Unreachable(
            "Redis: the subscription ended".into(),
        ))
    }
}

/// The store error for a failed command on a key of `kind`: an answer that does not parse
/// names the kind; anything else is the store being unreachable.
pub(super) fn failure(kind: &'static str) -> impl Fn(redis::RedisError) -> StoreError {
    move |error| match error.kind() {
        redis::ErrorKind::Parse | redis::ErrorKind::UnexpectedReturnType => {
            StoreError::Unreadable {
                kind,
                reason: error.to_string(),
            }
        }
        _ => StoreError::Unreachable(format!("Redis: {error}")),
    }
}
