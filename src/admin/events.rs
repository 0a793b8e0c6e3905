//! `GET /api/events`: what operators are told as it happens (`crate::events`), as a stream of
//! server-sent events. Each state event has an id; a follower that comes back with
//! `Last-Event-ID` is given what it missed, or a `reset` when that cannot be done (another
//! run, too long ago, or it fell behind), after which it reads the whole state again. A
//! `traffic` event (no id: it is not state) carries the counters once a second while they
//! move. At most `MAX_FOLLOWERS` follow at once; the next is refused with 429.

use std::{convert::Infallible, sync::Arc, time::Duration};

use axum::{
    extract::State,
    response::{
        IntoResponse, Response,
        sse::{Event as Sent, KeepAlive, Sse},
    },
};
use futures::{StreamExt, stream};
use http::HeaderMap;
use serde_json::json;
use tokio::sync::broadcast::{Receiver, error::RecvError};

use super::{Admin, api};
use crate::events::Event;

/// How often the traffic counters are looked at.
const TRAFFIC_EVERY: Duration = Duration::from_secs(1);
/// How long a follower waits before it comes back, once its stream ended.
const RETRY: Duration = Duration::from_secs(2);
/// The most followers at once (an operator's pages and tools; each costs a task and a
/// receiver of every event).
pub const MAX_FOLLOWERS: usize = 64;

/// `GET /api/events`.
pub async fn follow(State(admin): State<Admin>, headers: HeaderMap) -> Response {
    let Ok(place) = admin.followers.clone().try_acquire_owned() else {
        let mut refused = api::error(
            http::StatusCode::TOO_MANY_REQUESTS,
            &format!(
                "{MAX_FOLLOWERS} followers of the event stream already: close one (a status \
                 page) and try again"
            ),
        );
        refused
            .headers_mut()
            .insert(http::header::RETRY_AFTER, http::HeaderValue::from(5));
        return refused;
    };
    let last = (headers.get("last-event-id")).and_then(|value| value.to_str().ok());
    let following = admin.gateway.events().follow(last);
    let first = following
        .reset
        .then(|| reset("the events since the given id are not kept"));
    let opening = stream::iter(
        std::iter::once(Sent::default().retry(RETRY).comment("switchyard events"))
            .chain(first)
            .chain(following.missed.into_iter().map(|event| sent(&event))),
    );
    let live = stream::unfold(
        Follower {
            admin,
            _place: place,
            next: following.next,
            ticks: tokio::time::interval(TRAFFIC_EVERY),
            traffic: None,
        },
        Follower::next,
    );
    let events = opening.chain(live).map(Ok::<_, Infallible>);
    let mut response = Sse::new(events)
        .keep_alive(KeepAlive::default())
        .into_response();
    // A reverse proxy in front (nginx, say) passes each event on at once.
    response
        .headers_mut()
        .insert("x-accel-buffering", http::HeaderValue::from_static("no"));
    response
}

struct Follower {
    admin: Admin,
    /// Its place among the followers, given back when its stream is dropped.
    _place: tokio::sync::OwnedSemaphorePermit,
    next: Receiver<Arc<Event>>,
    ticks: tokio::time::Interval,
    /// The traffic last sent.
    traffic: Option<api::Traffic>,
}

impl Follower {
    /// The next event for the follower; `None` once no more can come.
    async fn next(mut self) -> Option<(Sent, Self)> {
        loop {
            tokio::select! {
                heard = self.next.recv() => {
                    let event = match heard {
                        Ok(event) => sent(&event),
                        Err(RecvError::Lagged(_)) => reset("this stream fell behind"),
                        Err(RecvError::Closed) => return None,
                    };
                    return Some((event, self));
                }
                _ = self.ticks.tick() => {
                    let now = api::traffic(&self.admin);
                    if self.traffic.as_ref() != Some(&now) {
                        let event = Sent::default()
                            .event("traffic")
                            .json_data(&now)
                            .unwrap_or_default();
                        self.traffic = Some(now);
                        return Some((event, self));
                    }
                }
            }
        }
    }
}

fn sent(event: &Event) -> Sent {
    Sent::default()
        .id(&event.id)
        .event(event.kind)
        .data(&event.data)
}

/// Tells the follower to read the whole state again, for `reason`.
fn reset(reason: &str) -> Sent {
    Sent::default()
        .event("reset")
        .data(json!({ "reason": reason }).to_string())
}
