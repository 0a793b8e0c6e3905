//! Admission: the per-upstream limit on requests in flight (`max_concurrent_requests`), with a
//! bounded queue (`max_queued_requests`) in front of it. A request that finds the queue full is
//! refused at once with an error naming the upstream, rather than waiting without bound.
//!
//! Without a configured limit there is no admission at all: no semaphore, no counter, nothing on
//! the hot path.

use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::{Semaphore, SemaphorePermit};

/// Why a request was not admitted.
#[derive(Debug, thiserror::Error)]
#[error(
    "it is overloaded: {limit} requests are in flight (max_concurrent_requests) and \
     {queued} are waiting (max_queued_requests)"
)]
pub struct Overloaded {
    pub limit: usize,
    pub queued: usize,
}

/// The limit of one upstream.
pub struct Admission {
    slots: Semaphore,
    limit: usize,
    waiting: AtomicUsize,
    max_waiting: usize,
}

/// A place in flight; freed when dropped.
pub type Admitted<'a> = SemaphorePermit<'a>;

impl Admission {
    pub fn new(limit: usize, max_waiting: usize) -> Self {
        Self {
            slots: Semaphore::new(limit),
            limit,
            waiting: AtomicUsize::new(0),
            max_waiting,
        }
    }

    /// Takes a place in flight, waiting in the queue if all are taken, or refuses if the queue
    /// is full too.
    pub async fn admit(&self) -> Result<Admitted<'_>, Overloaded> {
        if let Ok(permit) = self.slots.try_acquire() {
            return Ok(permit);
        }
        let queued = self.waiting.fetch_add(1, Ordering::AcqRel);
        let _leave = Leave(&self.waiting);
        if queued >= self.max_waiting {
            return Err(Overloaded {
                limit: self.limit,
                queued,
            });
        }
        // The semaphore is never closed.
        self.slots.acquire().await.map_err(|_| Overloaded {
            limit: self.limit,
            queued,
        })
    }

    /// Requests in flight now.
    pub fn in_flight(&self) -> usize {
        self.limit - self.slots.available_permits()
    }

    /// Requests waiting now.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Acquire)
    }
}

/// Leaves the queue when the wait ends, however it ends (admitted, refused or abandoned).
struct Leave<'a>(&'a AtomicUsize);

impl Drop for Leave<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn queues_up_to_the_bound_then_refuses() {
        let admission = std::sync::Arc::new(Admission::new(1, 1));
        let first = admission.admit().await.unwrap();
        assert_eq!(admission.in_flight(), 1);

        let queued = {
            let admission = admission.clone();
            tokio::spawn(async move { admission.admit().await.map(drop) })
        };
        while admission.waiting() == 0 {
            tokio::task::yield_now().await;
        }
        let refused = admission.admit().await.unwrap_err();
        assert_eq!((refused.limit, refused.queued), (1, 1));
        assert!(refused.to_string().contains("max_concurrent_requests"));

        drop(first);
        queued.await.unwrap().unwrap();
        assert_eq!((admission.in_flight(), admission.waiting()), (0, 0));
    }

    #[tokio::test]
    async fn an_abandoned_wait_leaves_the_queue() {
        let admission = Admission::new(1, 4);
        let _held = admission.admit().await.unwrap();
        let wait = admission.admit();
        let timed_out = tokio::time::timeout(std::time::Duration::from_millis(10), wait).await;
        assert!(timed_out.is_err());
        assert_eq!(admission.waiting(), 0);
    }
}
