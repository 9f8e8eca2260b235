//! The memory backend against the shared conformance suites.

use jobwheel::memory::{LocalLocks, MemoryStore};
use jobwheel::{Timestamp, TokioClock, conformance};
use std::sync::Arc;

#[tokio::test]
async fn memory_store_passes_the_store_suite() {
    conformance::store_suite(&MemoryStore::new()).await;
}

#[tokio::test]
async fn memory_locks_pass_the_lock_suite() {
    conformance::lock_suite(&LocalLocks::new()).await;
}

/// The same suites on a paused tokio clock: waits for expiry take no real time.
#[tokio::test(start_paused = true)]
async fn memory_backend_passes_on_a_paused_clock() {
    let clock = Arc::new(TokioClock::starting_at(Timestamp::now()));
    conformance::store_suite(&MemoryStore::with_clock(clock.clone())).await;
    conformance::lock_suite(&LocalLocks::with_clock(clock)).await;
}

/// Several stores through `Arc<dyn JobStore>` work as the trait objects the engine uses.
#[tokio::test]
async fn suites_run_through_trait_objects() {
    let store: Arc<dyn jobwheel::JobStore> = Arc::new(MemoryStore::new());
    conformance::store_suite(&store).await;
    let locks: Arc<dyn jobwheel::LockProvider> = Arc::new(LocalLocks::new());
    conformance::lock_suite(&locks).await;
}
