//! With replicas: this replica's beat, and the taking over of what a dead replica held for the
//! sessions served here (their resource subscriptions, see `subscribed`). Every `BEAT` the
//! replica tells the store it is alive and learns which replicas stopped; for each newly dead
//! one, the sessions it held that have a copy here are taken over. A replica that was out of
//! touch with the store for long enough to be taken for dead confirms what it still holds.

use std::{
    collections::HashSet,
    sync::{Arc, Weak},
    time::Instant,
};

use tokio_util::sync::CancellationToken;

use super::SessionTable;
use crate::{
    gateway::Gateway,
    store::{BEAT, STALE},
};

/// Beats and takes over for `table`'s sessions until `shutdown` (the replica says it leaves
/// when the gateway closes); nothing without a shared store.
pub fn spawn_takeover(
    gateway: Arc<Gateway>,
    table: Weak<SessionTable>,
    shutdown: CancellationToken,
) {
    if !gateway.store().is_shared() {
        return;
    }
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(BEAT);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // The dead replicas whose sessions were taken over here already.
        let mut handled: HashSet<String> = HashSet::new();
        let mut last_beat = Instant::now();
        let mut recoveries = gateway.store().recoveries();
        loop {
            tokio::select! {
                _ = ticks.tick() => {}
                () = shutdown.cancelled() => return,
            }
            let Some(table) = table.upgrade() else {
                return;
            };
            let store = gateway.store();
            let Ok(dead) = store.beat().await else {
                continue;
            };
            let out_of_touch = last_beat.elapsed() > STALE || store.recoveries() != recoveries;
            last_beat = Instant::now();
            recoveries = store.recoveries();
            if out_of_touch {
                for session in table.sessions() {
                    if session.has_subscriptions() {
                        session.confirm_held(&gateway).await;
                    }
                }
            }
            handled.retain(|replica| dead.contains(replica));
            for replica in dead {
                if handled.contains(&replica) {
                    continue;
                }
                let Ok(hashes) = store.held_by(&replica).await else {
                    continue;
                };
                let here: Vec<_> = hashes
                    .iter()
                    .filter_map(|hash| table.hashed(hash))
                    .collect();
                tracing::info!(
                    %replica,
                    held = hashes.len(),
                    here = here.len(),
                    "a replica stopped beating: taking over what it held for the sessions served here"
                );
                for session in here {
                    session.take_over(&gateway).await;
                }
                handled.insert(replica);
            }
        }
    });
}
