//! Conformance suites every backend must pass.
//!
//! Plain async functions that take `&dyn JobStore` or `&dyn LockProvider` and panic
//! (with a message naming the broken promise) when a contract of [`JobStore`] or
//! [`LockProvider`] does not hold. A backend opts in with one test that builds it and
//! calls [`store_suite`] and [`lock_suite`]:
//!
//! ```no_run
//! # async fn t() {
//! let store = jobwheel::memory::MemoryStore::new();
//! jobwheel::conformance::store_suite(&store).await;
//! jobwheel::conformance::lock_suite(&jobwheel::memory::LocalLocks::new()).await;
//! # }
//! ```
//!
//! The checks may share a store with other data: they use unique job ids, fire times
//! a thousand days in the past, and before/after differences, and they remove what
//! they create. Some of them wait for leases and heartbeats to lapse (a few hundred
//! milliseconds, through `tokio::time::sleep`, so a paused runtime skips the wait
//! when the backend's clock follows tokio's). They must not run while a scheduler
//! uses the same store, since `purge_runs`, `reap_nodes` and `claim_alarms` act on the
//! whole store.

mod due;
mod locks;
mod rules;
mod spans;
mod store;
mod store_log;

pub use due::{due_ordering_and_limits, due_pages};
pub use locks::*;
pub use rules::{finish_rules_agree, start_rules_agree};
pub use spans::{jobs_keep_where_their_schedule_resumes, runs_keep_their_misfire_span};
pub use store::{
    conditional_start, fencing, finish_writes_state_run_and_alarms,
    finish_yields_to_changes_during_the_run, refuses_missing_jobs, upsert_get_list_remove,
};
pub use store_log::*;

use crate::lock::LockProvider;
use crate::store::JobStore;

/// A prefix unique to one check run, so checks can share a database.
pub(crate) fn unique(name: &str) -> String {
    format!("cf-{:08x}-{name}", fastrand::u32(..))
}

/// Runs every [`JobStore`] check in turn.
pub async fn store_suite(store: &dyn JobStore) {
    upsert_get_list_remove(store).await;
    refuses_missing_jobs(store).await;
    due_ordering_and_limits(store).await;
    due_pages(store).await;
    conditional_start(store).await;
    finish_writes_state_run_and_alarms(store).await;
    finish_yields_to_changes_during_the_run(store).await;
    fencing(store).await;
    runs_keep_their_misfire_span(store).await;
    jobs_keep_where_their_schedule_resumes(store).await;
    start_rules_agree(store).await;
    finish_rules_agree(store).await;
    run_log_queries(store).await;
    purge_runs(store).await;
    daily_stats(store).await;
    heartbeats_and_dead_nodes(store).await;
    alarm_outbox_claimed_once(store).await;
}

/// Runs every [`LockProvider`] check in turn.
pub async fn lock_suite(locks: &dyn LockProvider) {
    exclusive_under_contention(locks).await;
    tokens_strictly_increase(locks).await;
    held_keys_are_not_granted_again(locks).await;
    renew_is_owner_and_token_checked(locks).await;
    release_is_owner_and_token_checked(locks).await;
    leases_expire(locks).await;
    batches_are_independent(locks).await;
}
