//! `GET /api/events`: an operator following the gateway hears a state change as it happens,
//! picks up what it missed with `Last-Event-ID`, is told to reset when that cannot be done,
//! needs the admin token, and is one of a bounded number.

use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::Value;

use crate::harness::{GatewayBuilder, TestGateway};

/// One event as received.
#[derive(Debug, Default)]
struct Heard {
    id: Option<String>,
    kind: String,
    data: Value,
}

/// An open event stream and what of it is not read yet.
struct Follower {
    body: futures::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    buffer: String,
}

impl Follower {
    async fn open(gw: &TestGateway, last: Option<&str>) -> Self {
        let mut request = gw.admin_request(reqwest::Method::GET, "/api/events");
        if let Some(last) = last {
            request = request.header("last-event-id", last);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(
            response.headers()["content-type"],
            "text/event-stream",
            "an event stream"
        );
        assert_eq!(response.headers()["x-accel-buffering"], "no");
        assert_eq!(response.headers()["cache-control"], "no-store");
        Self {
            body: response.bytes_stream().boxed(),
            buffer: String::new(),
        }
    }

    /// The next event (comments and keep-alives skipped), within 10 s.
    async fn next(&mut self) -> Heard {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let mut heard = Heard::default();
                for line in block.lines() {
                    match line.split_once(':') {
                        Some(("id", value)) => heard.id = Some(value.trim().to_owned()),
                        Some(("event", value)) => heard.kind = value.trim().to_owned(),
                        Some(("data", value)) => heard.data = serde_json::from_str(value).unwrap(),
                        _ => {}
                    }
                }
                if !heard.kind.is_empty() {
                    return heard;
                }
                continue;
            }
            let chunk = tokio::time::timeout(Duration::from_secs(10), self.body.next())
                .await
                .expect("an event within 10 s")
                .expect("the stream goes on")
                .unwrap();
            self.buffer.push_str(&String::from_utf8_lossy(&chunk));
        }
    }

    /// The next event of `kind` that `wanted` accepts.
    async fn until(&mut self, kind: &str, wanted: impl Fn(&Value) -> bool) -> Heard {
        loop {
            let heard = self.next().await;
            if heard.kind == kind && wanted(&heard.data) {
                return heard;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_hears_a_change_at_once_and_resumes_where_it_left() {
    let dir = tempfile::tempdir().unwrap();
    let gw = GatewayBuilder::two_demos_on_file(dir.path()).await;
    let mut follower = Follower::open(&gw, None).await;
    gw.wait_state("demo", "ready", Duration::from_secs(15))
        .await;

    let (status, _) = gw
        .admin_answer(reqwest::Method::POST, "/api/upstreams/demo/reconnect")
        .await;
    assert_eq!(status, 202);
    let asked = Instant::now();
    let heard = follower
        .until("upstream", |data| {
            data["name"] == "demo" && data["state"] == "connecting"
        })
        .await;
    let took = asked.elapsed();
    assert!(
        took < Duration::from_millis(100),
        "heard within 100 ms, not {took:?}"
    );
    assert!(heard.id.is_some(), "a state event has an id");
    let ready = follower
        .until("upstream", |data| {
            data["name"] == "demo" && data["state"] == "ready"
        })
        .await;
    let last = ready.id.unwrap();
    drop(follower);

    // Missed while away: a reload (switching `other` off) and what it did.
    let (status, _) = gw
        .admin_answer(reqwest::Method::POST, "/api/upstreams/other/disable")
        .await;
    assert_eq!(status, 200);
    let mut back = Follower::open(&gw, Some(&last)).await;
    let first = back.next().await;
    assert_ne!(first.kind, "reset", "{first:?}");
    assert_ne!(first.id.as_deref(), Some(last.as_str()), "not heard twice");
    let reload = if first.kind == "reload" {
        first
    } else {
        back.until("reload", |_| true).await
    };
    assert_eq!(reload.data["outcome"], "applied", "{:?}", reload.data);
    assert_eq!(reload.data["trigger"], "admin");

    // An id this run never gave: read everything again.
    let mut stranger = Follower::open(&gw, Some("00000000-1")).await;
    assert_eq!(stranger.next().await.kind, "reset");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_event_stream_wants_the_admin_token_and_the_same_origin() {
    let gw = GatewayBuilder::new().demo("demo").start().await;
    let client = reqwest::Client::new();
    let bare = client
        .get(gw.admin_url("/api/events"))
        .send()
        .await
        .unwrap();
    assert_eq!(bare.status(), 401);
    let foreign = gw
        .admin_request(reqwest::Method::GET, "/api/events")
        .header("origin", "http://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(foreign.status(), 403, "a page of another origin");
    let rebound = gw
        .admin_request(reqwest::Method::GET, "/api/events")
        .header("host", "rebound.evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(rebound.status(), 403, "a rebound host name");
}

/// Followers are bounded: past the limit, the next is refused with 429 (a JSON error and
/// `Retry-After`) rather than holding one more task and receiver; once one leaves, there is
/// room again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn followers_of_the_event_stream_are_bounded() {
    let gw = GatewayBuilder::new().demo("demo").start().await;
    let mut followers = Vec::new();
    for _ in 0..64 {
        followers.push(Follower::open(&gw, None).await);
    }
    let refused = gw
        .admin_request(reqwest::Method::GET, "/api/events")
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 429);
    assert!(refused.headers().contains_key("retry-after"));
    let body: Value = refused.json().await.unwrap();
    assert!(
        body["error"].as_str().unwrap().contains("followers"),
        "{body}"
    );
    drop(followers.pop());
    // (The gateway learns of it when it next writes to it: a keep-alive at the latest.)
    let mut admitted = false;
    for _ in 0..250 {
        let again = gw
            .admin_request(reqwest::Method::GET, "/api/events")
            .send()
            .await
            .unwrap();
        if again.status() == 200 {
            admitted = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(admitted, "a place is given back when a follower leaves");
}
