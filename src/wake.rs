//! A waker for a future that its task polls in rounds: a wake that comes while the future is
//! being polled is noted, for the poller to poll it again at once; only other wakes reach the
//! task.
//!
//! Tokio takes a wake that comes while a task runs for a yield: the task goes to the back of
//! the queue and an idle worker thread is woken for it (a futex call, and a thread that finds
//! nothing to do). Serving a call, a task wakes itself several times (hyper hands a body to
//! its reader through a channel the same task polls; a connection is woken by the request
//! handed to it), so the connections of the front (`front::repoll`) and the upstream
//! connections a call drives (`upstream::raw_client`) are polled with this waker instead.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering::SeqCst},
    },
    task::{Context, Wake, Waker},
};

use futures::task::AtomicWaker;

/// The waker, and what it notes.
pub struct NotedWakes {
    state: Arc<State>,
    /// `state` as a waker, made once: what a future registers with it stays the same.
    waker: Waker,
}

#[derive(Default)]
struct State {
    /// The waker of the task that polls the future.
    task: AtomicWaker,
    /// While the future is being polled.
    polling: AtomicBool,
    /// Woken while being polled.
    again: AtomicBool,
}

impl Wake for State {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // Noted first: a round that ends after this reads it (see `round`).
        self.again.store(true, SeqCst);
        if !self.polling.load(SeqCst) {
            self.task.wake();
        }
    }
}

impl Default for NotedWakes {
    fn default() -> Self {
        let state = Arc::new(State::default());
        Self {
            waker: Waker::from(state.clone()),
            state,
        }
    }
}

impl NotedWakes {
    /// The task whose waker is woken by wakes outside a round.
    pub fn register(&self, task: &Waker) {
        self.state.task.register(task);
    }

    /// Forgets the task: wakes outside a round reach no one until the next `register`.
    pub fn forget(&self) {
        self.state.task.take();
    }

    /// One round: `poll` with this waker. Whether it was woken during the round, in which
    /// case the caller polls again: a wake either is seen here or finds the round over and
    /// wakes the task, so none is lost.
    pub fn round<T>(&self, poll: impl FnOnce(&mut Context<'_>) -> T) -> (T, bool) {
        self.state.again.store(false, SeqCst);
        self.state.polling.store(true, SeqCst);
        let out = poll(&mut Context::from_waker(&self.waker));
        self.state.polling.store(false, SeqCst);
        (out, self.state.again.swap(false, SeqCst))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

    use super::*;

    /// Counts the wakes of the task.
    #[derive(Default)]
    struct Counting(AtomicUsize);

    impl Wake for Counting {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Relaxed);
        }
    }

    #[test]
    fn a_wake_in_a_round_is_noted_and_one_outside_wakes_the_task() {
        let task = Arc::new(Counting::default());
        let wakes = NotedWakes::default();
        wakes.register(&Waker::from(task.clone()));
        let ((), again) = wakes.round(|cx| cx.waker().wake_by_ref());
        assert!(again);
        assert_eq!(task.0.load(Relaxed), 0);
        let (waker, again) = wakes.round(|cx| cx.waker().clone());
        assert!(!again, "a round with no wake asks for no other");
        waker.wake();
        assert_eq!(task.0.load(Relaxed), 1);
        wakes.forget();
        wakes.waker.wake_by_ref();
        assert_eq!(task.0.load(Relaxed), 1, "a forgotten task is not woken");
    }
}
