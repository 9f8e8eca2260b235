//! The [`JobStore`] trait: where jobs, runs, nodes and alarm events live.

use crate::error::Result;
use crate::job::{Job, JobId};
use crate::record::*;
use crate::time::Timestamp;
use async_trait::async_trait;
use chrono::NaiveDate;
use std::sync::Arc;
use std::time::Duration;

/// Persistent state of a jobwheel deployment.
///
/// # Contract
///
/// * **The store computes nothing.** The engine decides next fires, attempt counts and
///   outcomes; the store writes them under the conditions stated on each method.
/// * **Store clock.** Every instant the store writes on its own (`started_at`,
///   `ended_at`, `last_beat`, `created_at`, claim deadlines) and every "now" it
///   compares against comes from [`now`](JobStore::now), the store's clock (the
///   database's `now()`, Redis `TIME`), never from the calling node.
/// * **Atomic per item.** Each item of a batched call ([`start_runs`](JobStore::start_runs),
///   [`finish_runs`](JobStore::finish_runs)) is checked and written atomically: either
///   everything it describes is written, or nothing is and its outcome says why.
///   Items are independent; the result vector is in request order.
/// * **Fencing.** A start with a token older than the job's last token, or a finish
///   whose token is not the job's last token (outside a takeover), is refused.
/// * **Errors.** A server or driver failure is [`Error::Backend`](crate::Error::Backend)
///   (marked temporary when a retry may succeed); a refused condition is never an
///   error but a `Refused` outcome.
#[async_trait]
pub trait JobStore: Send + Sync + 'static {
    /// Short backend name for logs and errors (`"memory"`, `"postgres"`).
    fn name(&self) -> &'static str;

    /// The store's clock.
    async fn now(&self) -> Result<Timestamp>;

    // ----- definitions -----

    /// Creates or replaces a job. Idempotent: when the stored definition is equal to
    /// `job`, nothing changes and the result is [`UpsertOutcome::Unchanged`].
    /// Otherwise the definition is written, `version` is bumped, `next_fire_at` is set
    /// to `next_fire_at`, the trigger to `Schedule` and the attempt count to 0; a run in
    /// progress keeps running, and its finish will not overwrite this state.
    async fn upsert(&self, job: &Job, next_fire_at: Option<Timestamp>) -> Result<UpsertOutcome>;

    /// The stored job, or `None`.
    async fn get(&self, id: &JobId) -> Result<Option<JobRecord>>;

    /// Jobs ordered by id, those with an id greater than `after`, at most `limit`.
    async fn list(&self, after: Option<&JobId>, limit: usize) -> Result<Vec<JobRecord>>;

    /// Removes a job (its runs stay in the log). Returns whether it existed.
    async fn remove(&self, id: &JobId) -> Result<bool>;

    /// Pauses (`enabled = false`) or resumes a job, bumping its version; on resume
    /// `next_fire_at` becomes the given value and the attempt count 0. Errors:
    /// [`Error::NotFound`](crate::Error::NotFound).
    async fn set_enabled(
        &self,
        id: &JobId,
        enabled: bool,
        next_fire_at: Option<Timestamp>,
    ) -> Result<()>;

    /// Makes a job due at `at` with trigger `Manual` and attempt count 0. When a run
    /// is in progress the job becomes due once it finishes. Errors: `NotFound`.
    async fn trigger(&self, id: &JobId, at: Timestamp) -> Result<()>;

    // ----- scheduling -----

    /// Fires with `next_fire_at <= until` of enabled jobs that have no run in
    /// progress, ordered by `fire_at` (then job id), at most `limit`; with `after`, only
    /// those that sort strictly after that key (a keyset page: the engine continues a
    /// full poll where the last one stopped instead of reading the fires it already
    /// holds again).
    async fn due(
        &self,
        until: Timestamp,
        after: Option<&DueKey>,
        limit: usize,
    ) -> Result<Vec<DueFire>>;

    /// Records runs as `Running`. Each item is written only when the job exists, is
    /// enabled, has `version == item.version`, `next_fire_at == item.fire_at`, no run
    /// in progress, and `last_token <= item.token`; then `last_token` becomes
    /// `item.token` and the run becomes the job's running run.
    async fn start_runs(&self, runs: &[StartRun]) -> Result<Vec<StartOutcome>>;

    /// Records run outcomes. Each item is written only when the run is `Running` and
    /// its token is acceptable (see [`FinishRun::token`]). Then, in one atomic step:
    /// the run gets its status, `ended_at`, error and `will_retry`; the job's running
    /// run is cleared; when the job's version and `next_fire_at` are unchanged since the
    /// start, `item.next` is written into the job; `item.alarms` enter the outbox as
    /// `Pending`. A run of a removed job is still recorded.
    async fn finish_runs(&self, runs: &[FinishRun]) -> Result<Vec<FinishOutcome>>;

    // ----- run log -----

    /// Runs matching `query`, newest first.
    async fn runs(&self, query: &RunQuery) -> Result<Vec<RunRecord>>;

    /// Deletes finished runs that ended before `before`. Returns how many.
    async fn purge_runs(&self, before: Timestamp) -> Result<u64>;

    /// Per-day counts (UTC days, by start time) for `from..=to`, one entry per day
    /// that has runs, oldest first.
    async fn daily_stats(&self, from: NaiveDate, to: NaiveDate) -> Result<Vec<DailyStats>>;

    // ----- cluster -----

    /// Registers or refreshes a node; `last_beat` becomes the store's now, which is
    /// returned.
    async fn heartbeat(&self, node: &NodeInfo) -> Result<Timestamp>;

    /// Every registered node, ordered by id.
    async fn nodes(&self) -> Result<Vec<NodeRecord>>;

    /// Removes nodes whose last beat is older than `silent_for` before the store's
    /// now; returns their ids.
    async fn reap_nodes(&self, silent_for: Duration) -> Result<Vec<String>>;

    /// Removes one node (graceful shutdown). Returns whether it was registered.
    async fn deregister(&self, node_id: &str) -> Result<bool>;

    /// `Running` runs whose node is not registered, oldest first, at most `limit`.
    async fn orphaned_runs(&self, limit: usize) -> Result<Vec<RunRecord>>;

    // ----- alarm outbox -----

    /// Puts events in the outbox as `Pending`; returns their ids.
    async fn enqueue_alarms(&self, events: &[AlarmEvent]) -> Result<Vec<AlarmId>>;

    /// Claims up to `limit` events for delivery by `owner`: `Pending` or `Failed`
    /// events whose `next_attempt_at` has come, and `Sending` events whose claim has
    /// lapsed. Each becomes `Sending` with `claim_until = now + lease` and its attempt
    /// count bumped. An event is handed to exactly one claimer at a time.
    async fn claim_alarms(
        &self,
        owner: &str,
        limit: usize,
        lease: Duration,
    ) -> Result<Vec<AlarmRecord>>;

    /// Records the end of a delivery. Written only while `owner` holds the claim;
    /// returns whether it was written.
    async fn complete_alarm(
        &self,
        id: AlarmId,
        owner: &str,
        delivery: &AlarmDelivery,
    ) -> Result<bool>;

    /// Events, newest first, optionally of one status, at most `limit`.
    async fn alarms(&self, status: Option<AlarmStatus>, limit: usize) -> Result<Vec<AlarmRecord>>;
}

macro_rules! forward_store {
    ($($ptr:ty),*) => {$(
        #[async_trait]
        impl<S: JobStore + ?Sized> JobStore for $ptr {
            fn name(&self) -> &'static str { (**self).name() }
            async fn now(&self) -> Result<Timestamp> { (**self).now().await }
            async fn upsert(&self, job: &Job, next: Option<Timestamp>) -> Result<UpsertOutcome> { (**self).upsert(job, next).await }
            async fn get(&self, id: &JobId) -> Result<Option<JobRecord>> { (**self).get(id).await }
            async fn list(&self, after: Option<&JobId>, limit: usize) -> Result<Vec<JobRecord>> { (**self).list(after, limit).await }
            async fn remove(&self, id: &JobId) -> Result<bool> { (**self).remove(id).await }
            async fn set_enabled(&self, id: &JobId, enabled: bool, next: Option<Timestamp>) -> Result<()> { (**self).set_enabled(id, enabled, next).await }
            async fn trigger(&self, id: &JobId, at: Timestamp) -> Result<()> { (**self).trigger(id, at).await }
            async fn due(&self, until: Timestamp, after: Option<&DueKey>, limit: usize) -> Result<Vec<DueFire>> { (**self).due(until, after, limit).await }
            async fn start_runs(&self, runs: &[StartRun]) -> Result<Vec<StartOutcome>> { (**self).start_runs(runs).await }
            async fn finish_runs(&self, runs: &[FinishRun]) -> Result<Vec<FinishOutcome>> { (**self).finish_runs(runs).await }
            async fn runs(&self, q: &RunQuery) -> Result<Vec<RunRecord>> { (**self).runs(q).await }
            async fn purge_runs(&self, before: Timestamp) -> Result<u64> { (**self).purge_runs(before).await }
            async fn daily_stats(&self, from: NaiveDate, to: NaiveDate) -> Result<Vec<DailyStats>> { (**self).daily_stats(from, to).await }
            async fn heartbeat(&self, node: &NodeInfo) -> Result<Timestamp> { (**self).heartbeat(node).await }
            async fn nodes(&self) -> Result<Vec<NodeRecord>> { (**self).nodes().await }
            async fn reap_nodes(&self, silent_for: Duration) -> Result<Vec<String>> { (**self).reap_nodes(silent_for).await }
            async fn deregister(&self, node_id: &str) -> Result<bool> { (**self).deregister(node_id).await }
            async fn orphaned_runs(&self, limit: usize) -> Result<Vec<RunRecord>> { (**self).orphaned_runs(limit).await }
            async fn enqueue_alarms(&self, events: &[AlarmEvent]) -> Result<Vec<AlarmId>> { (**self).enqueue_alarms(events).await }
            async fn claim_alarms(&self, owner: &str, limit: usize, lease: Duration) -> Result<Vec<AlarmRecord>> { (**self).claim_alarms(owner, limit, lease).await }
            async fn complete_alarm(&self, id: AlarmId, owner: &str, d: &AlarmDelivery) -> Result<bool> { (**self).complete_alarm(id, owner, d).await }
            async fn alarms(&self, status: Option<AlarmStatus>, limit: usize) -> Result<Vec<AlarmRecord>> { (**self).alarms(status, limit).await }
        }
    )*};
}

forward_store!(Arc<S>, Box<S>);
