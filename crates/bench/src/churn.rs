//! Opening and closing many sessions at once, with at most `concurrency` requests in flight
//! (one connection per task): the sessions of a load phase, and the soak's churn.

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use tokio::task::JoinSet;

use super::{
    check::Failure,
    mcp::Context,
    setup::{close_session, open_session},
    wire::Endpoint,
};

/// The sessions that opened, and why the others did not.
pub struct Opened {
    pub contexts: Vec<Context>,
    pub failures: Vec<Failure>,
}

/// Opens `count` sessions.
pub async fn open_many(
    endpoint: &Arc<Endpoint>,
    count: usize,
    concurrency: usize,
    timeout: Duration,
) -> Opened {
    // Tasks claim session numbers from one counter, so a slow one never holds back the rest.
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = JoinSet::new();
    for _ in 0..concurrency.min(count) {
        let (endpoint, next) = (endpoint.clone(), next.clone());
        tasks.spawn(async move {
            let mut conn = None;
            let mut opened = Opened {
                contexts: Vec::new(),
                failures: Vec::new(),
            };
            while next.fetch_add(1, Ordering::Relaxed) < count {
                match open_session(&mut conn, &endpoint, timeout).await {
                    Ok(context) => opened.contexts.push(context),
                    Err(failure) => opened.failures.push(failure),
                }
            }
            opened
        });
    }
    let mut all = Opened {
        contexts: Vec::with_capacity(count),
        failures: Vec::new(),
    };
    while let Some(done) = tasks.join_next().await {
        if let Ok(mut opened) = done {
            all.contexts.append(&mut opened.contexts);
            all.failures.append(&mut opened.failures);
        }
    }
    all
}

/// Ends every session; the failures.
pub async fn close_many(
    endpoint: &Arc<Endpoint>,
    contexts: Vec<Context>,
    concurrency: usize,
    timeout: Duration,
) -> Vec<Failure> {
    let contexts = Arc::new(contexts);
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = JoinSet::new();
    for _ in 0..concurrency.min(contexts.len()) {
        let (endpoint, next, contexts) = (endpoint.clone(), next.clone(), contexts.clone());
        tasks.spawn(async move {
            let mut conn = None;
            let mut failures = Vec::new();
            loop {
                let index = next.fetch_add(1, Ordering::Relaxed);
                let Some(context) = contexts.get(index) else {
                    break;
                };
                if let Err(failure) = close_session(&mut conn, &endpoint, context, timeout).await {
                    failures.push(failure);
                }
            }
            failures
        });
    }
    let mut failures = Vec::new();
    while let Some(done) = tasks.join_next().await {
        if let Ok(mut some) = done {
            failures.append(&mut some);
        }
    }
    failures
}
