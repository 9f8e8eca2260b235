//! [`StoreLatency`]: a delay model that makes the memory backend answer like a store
//! over a network, so the engine can be simulated where the store is slow or is the
//! bottleneck.

use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;

/// How long the memory store and locks take to answer, and how many calls they serve
/// at once.
///
/// Every call on the engine's path (`due`, `start_runs`, `finish_runs`, `apply`,
/// `upsert_many`, `now`; `acquire`, `renew`, `release`) first waits for one of
/// `connections` permits (a pool, shared by every store and lock value made with
/// clones of this model, as a store and a lock provider share one database), then
/// sleeps `per_call + per_item × items` on tokio's clock holding the permit, and only
/// then reads or writes: what it answers is the state at the end of the delay, as a
/// real store's commit is. The ceiling is `connections / per_item` items per second
/// for large batches and `connections / per_call` calls per second for small ones.
///
/// For simulations and tests on tokio's paused clock; a store without a model (the
/// default) answers at once. Sleeping needs a tokio runtime with its timer enabled.
///
/// [`losing_answers`](Self::losing_answers) adds the failure a network store has
/// and a memory one does not: a write applied whose answer never arrives.
#[derive(Clone, Debug)]
pub struct StoreLatency {
    per_call: Duration,
    per_item: Duration,
    connections: usize,
    pool: Arc<Semaphore>,
    lost_per_mille: u32,
    /// Draws which answers are lost; seeded, so a simulation can be replayed.
    lost_rng: Arc<std::sync::Mutex<fastrand::Rng>>,
}

impl StoreLatency {
    /// Each call costs `per_call`, plus `per_item` for every job, run or lease it
    /// names; at most `connections` calls (at least one) are served at once.
    pub fn new(per_call: Duration, per_item: Duration, connections: usize) -> Self {
        let connections = connections.max(1);
        StoreLatency {
            per_call,
            per_item,
            connections,
            pool: Arc::new(Semaphore::new(connections)),
            lost_per_mille: 0,
            lost_rng: Arc::new(std::sync::Mutex::new(fastrand::Rng::with_seed(0))),
        }
    }

    /// The same model, where `per_mille` of the `start_runs` and `finish_runs` calls
    /// (at most 1000, drawn from a generator seeded with `seed`) are written and then
    /// answered with a temporary error, as when a connection is cut after the commit.
    pub fn losing_answers(mut self, per_mille: u32, seed: u64) -> Self {
        self.lost_per_mille = per_mille.min(1000);
        self.lost_rng = Arc::new(std::sync::Mutex::new(fastrand::Rng::with_seed(seed)));
        self
    }

    /// The calls in a thousand whose answer is lost.
    pub fn lost_per_mille(&self) -> u32 {
        self.lost_per_mille
    }

    /// The fixed cost of one call.
    pub fn per_call(&self) -> Duration {
        self.per_call
    }

    /// The added cost of each item in a call.
    pub fn per_item(&self) -> Duration {
        self.per_item
    }

    /// The calls served at once.
    pub fn connections(&self) -> usize {
        self.connections
    }

    /// How long one call naming `items` items takes once it holds a permit.
    pub fn call_time(&self, items: usize) -> Duration {
        self.per_call + self.per_item * u32::try_from(items).unwrap_or(u32::MAX)
    }

    /// Waits for a permit, then for the call's time.
    pub(crate) async fn wait(&self, items: usize) {
        // The semaphore is never closed, so acquiring cannot fail.
        let _permit = self.pool.acquire().await;
        tokio::time::sleep(self.call_time(items)).await;
    }
}

/// Whether the answer of a write `latency` models is lost (`Err` naming `op`).
pub(crate) fn answer(latency: &Option<StoreLatency>, op: &'static str) -> crate::error::Result<()> {
    match latency {
        Some(l)
            if l.lost_per_mille > 0
                && l.lost_rng.lock().unwrap().u32(0..1000) < l.lost_per_mille =>
        {
            Err(crate::error::Error::backend(
                "memory",
                op,
                true,
                "the answer was lost (simulated)",
            ))
        }
        _ => Ok(()),
    }
}

/// Waits as `latency` says, when there is one.
pub(crate) async fn delay(latency: &Option<StoreLatency>, items: usize) {
    if let Some(l) = latency {
        l.wait(items).await;
    }
}
