//! What operators are told as it happens: upstream state changes, reloads, tools held for or
//! given approval, failures. Each event gets an id; the last ones are kept, so that a
//! follower that lost its stream (`GET /api/events` with `Last-Event-ID`) is given what it
//! missed. Ids name this process's run too: an id from before a restart, or one older than
//! what is kept, is answered with a `reset` (look at the whole state again) instead of a gap.

use std::{
    collections::VecDeque,
    sync::{Arc, Mutex},
};

use serde::Serialize;
use tokio::sync::broadcast;

/// How many events are kept for followers that come back.
const KEPT: usize = 256;
/// How many events a follower may fall behind before it is told to reset.
const LAG: usize = 1024;

/// One event: its id (`RUN-SEQUENCE`), its kind and its data as JSON, written once.
#[derive(Debug)]
pub struct Event {
    pub sequence: u64,
    pub id: String,
    pub kind: &'static str,
    pub data: String,
}

/// Where events are published and followed.
pub struct Events {
    /// This run's name, the first part of every id.
    run: String,
    sender: broadcast::Sender<Arc<Event>>,
    /// The last `KEPT` events and the next sequence number; also held while a follower
    /// subscribes, so that nothing falls between what it is given and what it hears.
    kept: Mutex<(VecDeque<Arc<Event>>, u64)>,
}

/// What a follower gets: what it missed (or that it must reset), then every new event.
pub struct Following {
    /// Whether the follower's last id cannot be continued from (another run, or too old).
    pub reset: bool,
    pub missed: Vec<Arc<Event>>,
    pub next: broadcast::Receiver<Arc<Event>>,
}

impl Default for Events {
    fn default() -> Self {
        let mut bytes = [0u8; 4];
        // Without randomness, the time tells runs apart as well.
        if aws_lc_rs::rand::fill(&mut bytes).is_err() {
            bytes = (crate::clock::now_seconds() as u32).to_be_bytes();
        }
        let run = bytes.iter().map(|b| format!("{b:02x}")).collect();
        Self {
            run,
            sender: broadcast::Sender::new(LAG),
            kept: Mutex::new((VecDeque::with_capacity(KEPT), 1)),
        }
    }
}

impl Events {
    /// Publishes an event of `kind` with `data`.
    pub fn publish(&self, kind: &'static str, data: &impl Serialize) {
        let data = serde_json::to_string(data).unwrap_or_else(|_| "null".to_owned());
        let mut kept = self.lock();
        let sequence = kept.1;
        kept.1 += 1;
        let event = Arc::new(Event {
            sequence,
            id: format!("{}-{sequence}", self.run),
            kind,
            data,
        });
        if kept.0.len() == KEPT {
            kept.0.pop_front();
        }
        kept.0.push_back(event.clone());
        // Nobody following is not an error.
        let _ = self.sender.send(event);
    }

    /// Follows from after `last` (a `Last-Event-ID`), or from now.
    pub fn follow(&self, last: Option<&str>) -> Following {
        let kept = self.lock();
        let next = self.sender.subscribe();
        let Some(last) = last else {
            return Following {
                reset: false,
                missed: Vec::new(),
                next,
            };
        };
        let after = last
            .split_once('-')
            .filter(|(run, _)| *run == self.run)
            .and_then(|(_, sequence)| sequence.parse::<u64>().ok())
            .filter(|sequence| *sequence < kept.1);
        let oldest = kept.0.front().map_or(kept.1, |event| event.sequence);
        match after {
            // Continued without a gap: the event after `last` is still kept (or none came).
            Some(after) if after + 1 >= oldest => Following {
                reset: false,
                missed: (kept.0.iter())
                    .filter(|event| event.sequence > after)
                    .cloned()
                    .collect(),
                next,
            },
            _ => Following {
                reset: true,
                missed: Vec::new(),
                next,
            },
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (VecDeque<Arc<Event>>, u64)> {
        self.kept
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(events: &[Arc<Event>]) -> Vec<u64> {
        events.iter().map(|event| event.sequence).collect()
    }

    #[test]
    fn a_follower_is_given_what_it_missed_and_then_hears_what_comes() {
        let events = Events::default();
        events.publish("a", &1);
        events.publish("b", &2);
        events.publish("c", &3);
        let first = format!("{}-1", events.run);
        let following = events.follow(Some(&first));
        assert!(!following.reset);
        assert_eq!(ids(&following.missed), [2, 3]);
        let mut next = following.next;
        events.publish("d", &4);
        let heard = next.try_recv().unwrap();
        assert_eq!((heard.kind, heard.data.as_str()), ("d", "4"));
        assert_eq!(heard.id, format!("{}-4", events.run));
        // Up to date: nothing missed.
        assert!(events.follow(Some(&heard.id)).missed.is_empty());
    }

    #[test]
    fn an_id_that_cannot_be_continued_from_means_reset() {
        let events = Events::default();
        for n in 0..KEPT + 10 {
            events.publish("n", &n);
        }
        let run = &events.run;
        // Fallen out of what is kept.
        assert!(events.follow(Some(&format!("{run}-3"))).reset);
        // Events 1 to KEPT + 10 were published; KEPT of them are kept, from 11 on. Having
        // seen 10, nothing is lost; having seen 9, event 10 is.
        let following = events.follow(Some(&format!("{run}-10")));
        assert!(!following.reset);
        assert_eq!(following.missed.len(), KEPT);
        assert!(events.follow(Some(&format!("{run}-9"))).reset);
        // Another run (a restart), a sequence not reached, or no id at all that parses.
        for other in ["0000beef-5", &format!("{run}-999999"), "nonsense", ""] {
            assert!(events.follow(Some(other)).reset, "{other}");
        }
        assert!(!events.follow(None).reset);
    }
}
