//! Cached tool calls and resource reads, for the tools and upstreams an operator marked
//! cacheable (`cache`, `tool_cache`; a `readOnlyHint` alone is not enough). A result is kept
//! per principal unless the rule says it is shared, in Redis when replicas share one (sealed,
//! lapsing with the rule's time), else in this process (bounded). Identical calls in flight are
//! coalesced: the first goes upstream and the others wait for its answer. Only successful
//! results are kept (not errors, nor tool results that report a failure); the answer is stored
//! without the client's id and given each caller under its own.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use bytes::Bytes;
use dashmap::DashMap;
use tokio::sync::watch;

use crate::{
    config::CacheRule,
    metrics::Metrics,
    store::Store,
    wire::{self, Answer, Outcome},
};

/// The most results kept in this process (without Redis).
const MAX_LOCAL_ENTRIES: usize = 10_000;
/// The kind of the store's records.
const KIND: &str = "cache";

/// What was answered, without the request's id: the `result` or `error`, and what it says.
#[derive(Clone)]
struct Kept {
    text: Bytes,
    outcome: Outcome,
}

impl Kept {
    /// The answer to request `id`.
    fn answer(&self, id: &str) -> Answer {
        let message = match self.outcome {
            Outcome::Error { .. } => wire::write::error_raw(Some(id), text(&self.text)),
            _ => wire::write::response(id, text(&self.text)),
        };
        Answer {
            message,
            outcome: self.outcome,
        }
    }
}

/// The cache and the calls in flight.
pub struct ResultCache {
    store: Arc<Store>,
    metrics: Arc<Metrics>,
    local: DashMap<String, (Instant, Bytes)>,
    in_flight: DashMap<String, watch::Receiver<Option<Kept>>>,
}

/// The leader's promise to its followers, kept until it answers (or is dropped, when the
/// followers go upstream themselves).
struct Leading<'a> {
    cache: &'a ResultCache,
    key: &'a str,
    sender: watch::Sender<Option<Kept>>,
}

impl Drop for Leading<'_> {
    fn drop(&mut self) {
        self.cache.in_flight.remove(self.key);
    }
}

impl ResultCache {
    pub fn new(store: Arc<Store>, metrics: Arc<Metrics>) -> Self {
        Self {
            store,
            metrics,
            local: DashMap::new(),
            in_flight: DashMap::new(),
        }
    }

    /// The answer to request `id` whose cache key is `key`, from the cache, from an identical
    /// call in flight, or from `call` (which goes upstream), counted for `upstream`.
    pub async fn answer(
        &self,
        upstream: &str,
        key: &str,
        id: &str,
        rule: CacheRule,
        call: impl Future<Output = Answer>,
    ) -> Answer {
        let count = |outcome: &str| {
            self.metrics
                .cache
                .with_label_values(&[upstream, outcome])
                .inc();
        };
        if let Some(result) = self.cached(key).await {
            count("hit");
            return Answer::result(wire::write::response(id, text(&result)));
        }
        loop {
            let leading = match self.in_flight.entry(key.to_owned()) {
                dashmap::Entry::Occupied(entry) => {
                    let mut waiting = entry.get().clone();
                    drop(entry);
                    let Ok(kept) = waiting.wait_for(Option::is_some).await.map(|k| k.clone())
                    else {
                        // The call we waited for was dropped unanswered: try again.
                        continue;
                    };
                    count("coalesced");
                    return match kept {
                        Some(kept) => kept.answer(id),
                        None => unreachable!("waited for an answer"),
                    };
                }
                dashmap::Entry::Vacant(entry) => {
                    let (sender, receiver) = watch::channel(None);
                    entry.insert(receiver);
                    Leading {
                        cache: self,
                        key,
                        sender,
                    }
                }
            };
            count("miss");
            let answer = call.await;
            let kept = keep(&answer);
            if let Some(kept) = kept.as_ref().filter(|k| k.outcome == Outcome::Result) {
                self.store_result(key, kept.text.clone(), rule.ttl);
            }
            leading.sender.send_replace(kept);
            return answer;
        }
    }

    async fn cached(&self, key: &str) -> Option<Bytes> {
        if self.store.is_shared() {
            return match self.store.load_record(KIND, key).await {
                Ok(found) => found.map(Bytes::from),
                Err(error) => {
                    tracing::debug!(%error, "the result cache cannot be read; calling upstream");
                    None
                }
            };
        }
        let entry = self.local.get(key)?;
        let (until, result) = entry.value();
        (*until > Instant::now()).then(|| result.clone())
    }

    fn store_result(&self, key: &str, result: Bytes, ttl: Duration) {
        if self.store.is_shared() {
            let store = self.store.clone();
            let key = key.to_owned();
            tokio::spawn(async move {
                if let Err(error) = store.save_record(KIND, &key, &result, Some(ttl)).await {
                    tracing::debug!(%error, "a result cannot be cached");
                }
            });
            return;
        }
        if self.local.len() >= MAX_LOCAL_ENTRIES {
            let now = Instant::now();
            self.local.retain(|_, (until, _)| *until > now);
            if self.local.len() >= MAX_LOCAL_ENTRIES {
                // Still full of live entries: make room (which ones go is not ordered).
                let excess: Vec<String> = self
                    .local
                    .iter()
                    .take(MAX_LOCAL_ENTRIES / 10)
                    .map(|entry| entry.key().clone())
                    .collect();
                for key in excess {
                    self.local.remove(&key);
                }
            }
        }
        self.local
            .insert(key.to_owned(), (Instant::now() + ttl, result));
    }
}

/// What of `answer` followers get (only a result that is not a tool reporting a failure is
/// cached).
fn keep(answer: &Answer) -> Option<Kept> {
    let text = match wire::parse(&answer.message).ok()? {
        wire::Message::Response { result, .. } => result.get(),
        wire::Message::Error { error, .. } => error.get(),
        _ => return None,
    };
    Some(Kept {
        text: Bytes::copy_from_slice(text.as_bytes()),
        outcome: answer.outcome,
    })
}

fn text(bytes: &Bytes) -> &str {
    std::str::from_utf8(bytes).unwrap_or("{}")
}
