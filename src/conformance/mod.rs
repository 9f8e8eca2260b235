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
//! uses the same store, since `purge_runs`, `reap_nodes`, `reap_executors`, `claim_alarms` and
//! `purge_audit` act on the whole store.

mod audit;
mod credentials;
mod due;
mod edges;
mod executors;
mod leases;
mod locks;
mod outbox;
mod overrides;
mod releases;
mod rows;
mod rules;
mod spans;
mod store;
mod store_log;
mod waiting;
mod windows;

pub use audit::{
    alarm_outbox_operator_retry_and_discard, audit_log_reads_back, changes_and_their_audit_entries,
};
pub use credentials::credentials_are_kept;
pub use due::{due_ordering_and_limits, due_pages};
pub use edges::{
    any_text_is_stored, create_never_rearms, huge_limits_are_lowered, upsert_many_matches_upsert,
};
pub use executors::executor_instances_by_heartbeat;
pub use leases::{
    a_finish_frees_or_keeps_the_lease, a_removed_jobs_claimed_run_finishes, claim_rules_agree,
    claims_take_at_most_want_in_order, job_leases_are_exclusive_and_fenced,
    racing_claims_start_each_fire_once,
};
pub use locks::*;
pub use outbox::{alarm_outbox_claimed_once, alarm_outbox_purges_done_events};
pub use overrides::{
    first_fire_carries_its_context, never_fires_until_triggered, trigger_payload_override,
};
pub use releases::{
    a_change_returns_a_taken_release, a_fan_in_takes_every_parents_release_of_one_instant_once,
    operators_release_and_skip_instants, releases_are_queued_once_and_taken_in_order,
};
pub use rows::{
    RawRows, ids_sort_bytewise, oversized_payloads_read_back, rows_from_newer_versions_are_read,
    unreadable_rows_are_skipped,
};
pub use rules::{finish_rules_agree, start_rules_agree};
pub use spans::{jobs_keep_where_their_schedule_resumes, runs_keep_their_misfire_span};
pub use store::{
    conditional_start, fencing, finish_writes_state_run_and_alarms,
    finish_yields_to_changes_during_the_run, refuses_missing_jobs, upsert_get_list_remove,
};
pub use store_log::*;
pub use waiting::waiting_alarms_are_raised_once;
pub use windows::a_windowed_join_takes_each_window_once;

use crate::lock::LockProvider;
use crate::store::JobStore;

/// A prefix unique to one check run, so checks can share a database.
pub(crate) fn unique(name: &str) -> String {
    format!("cf-{:08x}-{name}", fastrand::u32(..))
}

/// Runs every [`JobStore`] check in turn: the five part suites below.
pub async fn store_suite(store: &dyn JobStore) {
    jobs_suite(store).await;
    run_log_suite(store).await;
    node_registry_suite(store).await;
    alarm_outbox_suite(store).await;
    audit_log_suite(store).await;
}

/// The checks of [`Jobs`](crate::store::Jobs): definitions, due order and paging,
/// conditional start and finish, fencing, the start/finish rules against
/// [`rules`](crate::store::rules), payload sizes, id order, any text, any limit, and a
/// manual trigger's payload override.
pub async fn jobs_suite(store: &dyn JobStore) {
    upsert_get_list_remove(store).await;
    refuses_missing_jobs(store).await;
    due_ordering_and_limits(store).await;
    due_pages(store).await;
    conditional_start(store).await;
    finish_writes_state_run_and_alarms(store).await;
    finish_yields_to_changes_during_the_run(store).await;
    fencing(store).await;
    jobs_keep_where_their_schedule_resumes(store).await;
    start_rules_agree(store).await;
    finish_rules_agree(store).await;
    oversized_payloads_read_back(store).await;
    ids_sort_bytewise(store).await;
    any_text_is_stored(store).await;
    huge_limits_are_lowered(store).await;
    create_never_rearms(store).await;
    upsert_many_matches_upsert(store).await;
    trigger_payload_override(store).await;
    never_fires_until_triggered(store).await;
    first_fire_carries_its_context(store).await;
    releases_are_queued_once_and_taken_in_order(store).await;
    a_fan_in_takes_every_parents_release_of_one_instant_once(store).await;
    operators_release_and_skip_instants(store).await;
    a_change_returns_a_taken_release(store).await;
    waiting_alarms_are_raised_once(store).await;
    a_windowed_join_takes_each_window_once(store).await;
    if store.job_leases().is_some() {
        job_leases_suite(store).await;
    }
}

/// The checks of [`JobLeases`](crate::store::JobLeases), for a store that keeps each
/// job's lease in its row ([`jobs_suite`] runs them when the store has them): claims
/// against [`rules::claim`](crate::store::rules::claim), the candidates a claim
/// takes, exclusive and fenced leases, a finish's lease, racing claims, and a removed
/// job's claimed run.
pub async fn job_leases_suite(store: &dyn JobStore) {
    claim_rules_agree(store).await;
    claims_take_at_most_want_in_order(store).await;
    job_leases_are_exclusive_and_fenced(store).await;
    a_finish_frees_or_keeps_the_lease(store).await;
    racing_claims_start_each_fire_once(store).await;
    a_removed_jobs_claimed_run_finishes(store).await;
}

/// The checks of [`RunLog`](crate::store::RunLog): queries, misfire spans, retention,
/// runs' log lines and daily statistics (runs are made through [`Jobs`](crate::store::Jobs)).
pub async fn run_log_suite(store: &dyn JobStore) {
    run_log_queries(store).await;
    runs_keep_their_misfire_span(store).await;
    purge_runs(store).await;
    run_lines_are_kept(store).await;
    daily_stats(store).await;
}

/// The checks of [`NodeRegistry`](crate::store::NodeRegistry): heartbeats on the
/// store's clock, dead nodes and the runs they left, executor instances by group.
pub async fn node_registry_suite(store: &dyn JobStore) {
    heartbeats_and_dead_nodes(store).await;
    executor_instances_by_heartbeat(store).await;
}

/// The checks of [`AlarmOutbox`](crate::store::AlarmOutbox): each event claimed by
/// one claimer at a time, completed and retried; done events purged by retention;
/// an operator's retry and discard.
pub async fn alarm_outbox_suite(store: &dyn JobStore) {
    alarm_outbox_claimed_once(store).await;
    alarm_outbox_purges_done_events(store).await;
    alarm_outbox_operator_retry_and_discard(store).await;
}

/// The checks of [`AuditLog`](crate::store::AuditLog) and
/// [`Credentials`](crate::store::Credentials): entries read back exactly, newest
/// first, filtered, paged and purged by age; every audited change appends its entry
/// in the same step as the change, and only then; credentials kept exactly, one per
/// kind and name, however many adds race.
pub async fn audit_log_suite(store: &dyn JobStore) {
    audit_log_reads_back(store).await;
    changes_and_their_audit_entries(store).await;
    credentials_are_kept(store).await;
}

/// Runs the checks that need rows written as they are ([`RawRows`]): unreadable rows
/// are skipped and reported, and rows from newer versions are read.
pub async fn raw_rows_suite(store: &dyn JobStore, raw: &dyn RawRows) {
    unreadable_rows_are_skipped(store, raw).await;
    rows_from_newer_versions_are_read(store, raw).await;
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
    idle_keys_are_forgotten_and_tokens_still_increase(locks).await;
}
