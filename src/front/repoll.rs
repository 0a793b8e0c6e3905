//! A connection's future polled again in place when it wakes itself.
//!
//! Serving one request, a connection's task wakes itself several times while it runs, and
//! tokio takes each such wake for a yield that also wakes an idle worker thread (`wake` says
//! why, and how it is avoided). `Repolled` polls the connection with a waker of its own
//! (`wake::NotedWakes`): a wake during a poll asks for one more, which follows at once; any
//! other wake goes to the task's waker as before. The polls in a row are bounded
//! (`REPOLLS`): past them the task yields as it would have, so a connection that keeps waking
//! itself cannot hold a worker from the others.

use std::{
    pin::Pin,
    task::{Context, Poll},
};

use pin_project_lite::pin_project;

use crate::wake::NotedWakes;

/// The polls in a row a future that wakes itself gets before its task yields.
const REPOLLS: usize = 16;

pin_project! {
    /// `future`, polled again at once when it wakes itself while being polled.
    pub struct Repolled<F> {
        #[pin]
        future: F,
        wakes: NotedWakes,
    }
}

impl<F: Future> Repolled<F> {
    pub fn new(future: F) -> Self {
        Self {
            future,
            wakes: NotedWakes::default(),
        }
    }
}

/// hyper's executor for the tasks a connection spawns (an HTTP/2 connection's requests, each
/// a task of its own), each `Repolled` as the connections are.
#[derive(Clone, Copy, Default)]
pub struct RepolledTasks;

impl<F> hyper::rt::Executor<F> for RepolledTasks
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn execute(&self, future: F) {
        tokio::spawn(Repolled::new(future));
    }
}

impl<F: Future> Future for Repolled<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let mut this = self.project();
        this.wakes.register(cx.waker());
        for _ in 0..REPOLLS {
            let (polled, again) = this.wakes.round(|inner| this.future.as_mut().poll(inner));
            if polled.is_ready() || !again {
                return polled;
            }
        }
        // Still waking itself: let the others run first.
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use std::{
        sync::{
            Arc,
            atomic::{AtomicUsize, Ordering::Relaxed},
        },
        task::{Poll, Wake, Waker},
    };

    use super::*;

    /// Counts the wakes of the task that polls it.
    #[derive(Default)]
    struct Counting(AtomicUsize);

    impl Wake for Counting {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Relaxed);
        }
    }

    /// Wakes itself `times` times while polled, then is ready with its polls.
    fn waking_itself(times: usize) -> impl Future<Output = usize> {
        let mut polls = 0;
        std::future::poll_fn(move |cx| {
            polls += 1;
            if polls > times {
                return Poll::Ready(polls);
            }
            cx.waker().wake_by_ref();
            Poll::Pending
        })
    }

    #[test]
    fn a_future_that_wakes_itself_is_polled_again_without_its_task_being_woken() {
        let task = Arc::new(Counting::default());
        let waker = Waker::from(task.clone());
        let mut future = std::pin::pin!(Repolled::new(waking_itself(3)));
        let polled = future.as_mut().poll(&mut Context::from_waker(&waker));
        assert_eq!(polled, Poll::Ready(4));
        assert_eq!(task.0.load(Relaxed), 0);
    }

    #[test]
    fn one_that_keeps_waking_itself_yields_to_its_task_after_a_bound() {
        let task = Arc::new(Counting::default());
        let waker = Waker::from(task.clone());
        let mut future = std::pin::pin!(Repolled::new(waking_itself(REPOLLS + 5)));
        let polled = future.as_mut().poll(&mut Context::from_waker(&waker));
        assert_eq!(polled, Poll::Pending);
        assert_eq!(
            task.0.load(Relaxed),
            1,
            "the task is woken to poll it again"
        );
        let polled = future.as_mut().poll(&mut Context::from_waker(&waker));
        assert_eq!(polled, Poll::Ready(REPOLLS + 6));
    }

    #[test]
    fn a_wake_from_elsewhere_wakes_the_task() {
        let task = Arc::new(Counting::default());
        let waker = Waker::from(task.clone());
        let (sender, receiver) = tokio::sync::oneshot::channel::<u8>();
        let mut future = std::pin::pin!(Repolled::new(receiver));
        let polled = future.as_mut().poll(&mut Context::from_waker(&waker));
        assert!(polled.is_pending());
        sender.send(7).unwrap();
        assert_eq!(task.0.load(Relaxed), 1);
        let polled = future.as_mut().poll(&mut Context::from_waker(&waker));
        assert_eq!(polled, Poll::Ready(Ok(7)));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn wakes_from_other_threads_while_it_is_polled_are_not_lost() {
        // A channel fed from another thread as fast as it can, read through `Repolled`: every
        // message arrives, whichever moment of a poll its wake falls in.
        let (sender, mut receiver) = tokio::sync::mpsc::channel::<u32>(1);
        let feeder = tokio::spawn(async move {
            for n in 0..20_000 {
                sender.send(n).await.unwrap();
            }
        });
        let sum = Repolled::new(async move {
            let mut sum = 0u64;
            while let Some(n) = receiver.recv().await {
                sum += u64::from(n);
            }
            sum
        })
        .await;
        feeder.await.unwrap();
        assert_eq!(sum, (0..20_000u64).sum::<u64>());
    }
}
