//! A session's standalone stream across replicas: events sent by one replica reach the stream
//! another holds, and a client resuming on a third with `Last-Event-ID` misses nothing.

use std::{net::SocketAddr, time::Duration};

use super::cluster::{Cluster, echo, post, raw_session, reload_with};
use crate::{fixtures::redis::RedisServer, harness::SWITCHYARD};

/// Reads an event stream: each event as (id, data), as they come.
pub struct Events {
    response: reqwest::Response,
    buffer: String,
}

impl Events {
    pub async fn open(addr: SocketAddr, session: &str, last_event_id: Option<&str>) -> Self {
        let mut request = reqwest::Client::new()
            .get(format!("http://{addr}/mcp"))
            .header("accept", "text/event-stream")
            .header("mcp-session-id", session)
            .header("mcp-protocol-version", "2025-11-25");
        if let Some(id) = last_event_id {
            request = request.header("last-event-id", id);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), 200);
        Self {
            response,
            buffer: String::new(),
        }
    }

    /// The events that come within `within`, then until none comes for a second.
    pub async fn batch(&mut self, within: Duration) -> Vec<(String, String)> {
        let mut events = Vec::new();
        let mut wait = within;
        while let Some(event) = self.next(wait).await {
            events.push(event);
            wait = Duration::from_secs(1);
        }
        events
    }

    /// The next event with data, within `within`.
    pub async fn next(&mut self, within: Duration) -> Option<(String, String)> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            while let Some(end) = self.buffer.find("\n\n") {
                let event: String = self.buffer.drain(..end + 2).collect();
                let field = |name: &str| {
                    event
                        .lines()
                        .find_map(|line| line.strip_prefix(name))
                        .map(|v| v.trim().to_owned())
                };
                if let Some(data) = field("data:").filter(|d| !d.is_empty()) {
                    return Some((field("id:").unwrap_or_default(), data));
                }
            }
            let chunk = tokio::time::timeout_at(deadline, self.response.chunk())
                .await
                .ok()?
                .ok()??;
            self.buffer.push_str(&String::from_utf8_lossy(&chunk));
        }
    }
}

/// A session's standalone stream is open on one replica while another sends it something (a
/// list change after its reload): the event reaches it through Redis. The replica dies; the
/// client comes back on a third with `Last-Event-ID` and gets what was sent meanwhile, and
/// nothing twice. Redis holds the events sealed.
#[tokio::test]
async fn a_stream_resumed_on_another_replica_misses_no_event() {
    let redis = RedisServer::start().await;
    let mut cluster = Cluster::start(&redis, 300).await;
    let url = cluster.balancer.url();
    let session = raw_session(&url).await;
    let (status, _) = post(&url, Some(&session), echo(1, "hello")).await;
    assert_eq!(status, 200, "every replica has served the session once");

    let mut stream = Events::open(cluster.replicas[0].addr, &session, None).await;
    reload_with(
        &cluster,
        1,
        &format!("[upstreams.second]\ncommand = \"{SWITCHYARD}\"\nargs = [\"demo-server\"]\n"),
    );
    let first = stream.batch(Duration::from_secs(20)).await;
    assert!(
        first
            .iter()
            .any(|(_, data)| data.contains("notifications/tools/list_changed")),
        "replica 1's list change reaches the stream on replica 0: {first:?}"
    );
    assert!(first.iter().all(|(id, _)| !id.is_empty()), "ids: {first:?}");
    let last_seen = first.last().unwrap().0.clone();

    cluster.replicas[0].kill();
    reload_with(
        &cluster,
        2,
        &format!("[upstreams.third]\ncommand = \"{SWITCHYARD}\"\nargs = [\"demo-server\"]\n"),
    );
    // Sent while no stream is open anywhere: kept.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mut resumed = Events::open(cluster.replicas[1].addr, &session, Some(&last_seen)).await;
    let second = resumed.batch(Duration::from_secs(20)).await;
    assert!(
        second
            .iter()
            .any(|(_, data)| data.contains("notifications/tools/list_changed")),
        "the events sent while the client was away: {second:?}"
    );
    for (id, _) in &second {
        assert!(
            first.iter().all(|(seen, _)| seen != id),
            "{id} was sent twice: {first:?} then {second:?}"
        );
    }

    // Without Last-Event-ID, a stream starts after the last event any stream was sent.
    drop(resumed);
    let mut fresh = Events::open(cluster.replicas[2].addr, &session, None).await;
    assert!(fresh.next(Duration::from_millis(800)).await.is_none());

    // In Redis: the events, sealed.
    let stored = redis.dump("switchyard:events:*").await;
    assert!(!stored.is_empty());
    for (key, value) in &stored {
        let text = String::from_utf8_lossy(value);
        assert!(
            !text.contains("list_changed"),
            "{key} holds a message in clear"
        );
    }
}
