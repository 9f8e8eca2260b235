//! [`Jobs`]: definitions and their scheduling state.

use super::{DueQuery, JobQuery, Page};
use crate::error::Result;
use crate::job::{Job, JobId};
use crate::record::*;
use crate::time::Timestamp;
use async_trait::async_trait;
use serde_json::Value;
use std::sync::Arc;

/// A store's schema version ([`Jobs::schema`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct SchemaVersion {
    /// The newest migration recorded in the store; `None` when it was never migrated.
    pub found: Option<i64>,
    /// The newest migration this code has.
    pub known: i64,
}

/// Job definitions and the scheduling state the engine keeps in them: what a node
/// needs to run jobs.
///
/// # Contract
///
/// The conditions of [`start_runs`](Jobs::start_runs) and
/// [`finish_runs`](Jobs::finish_runs) are those of [`rules`](super::rules), in the
/// order it checks them; see the [module docs](super) for what every part keeps.
#[async_trait]
pub trait Jobs: Send + Sync + 'static {
    /// Short backend name for logs and errors (`"memory"`, `"postgres"`).
    fn name(&self) -> &'static str;

    /// The store's clock.
    async fn now(&self) -> Result<Timestamp>;

    /// The schema: the newest migration recorded in the store (`None` before the
    /// first migration) and the newest this code has. `Ok(None)` (the default) for a
    /// store without a versioned schema, such as the memory store.
    async fn schema(&self) -> Result<Option<SchemaVersion>> {
        Ok(None)
    }

    /// Creates or replaces a job. Idempotent: when the stored definition is equal to
    /// `job`, nothing changes and the result is [`UpsertOutcome::Unchanged`].
    /// Otherwise the definition is written, `version` is bumped, `next_fire_at` is set
    /// to `next_fire_at`, the trigger to `Schedule`, the attempt count to 0 and
    /// `resume_after` and `next_payload` cleared; a run in progress keeps running, and
    /// its finish will not overwrite this state.
    async fn upsert(&self, job: &Job, next_fire_at: Option<Timestamp>) -> Result<UpsertOutcome>;

    /// Creates a job unless one with its id exists, atomically: the result is
    /// [`UpsertOutcome::Created`] (stored as `upsert` would) or
    /// [`UpsertOutcome::Kept`] (the existing job is left exactly as it was, its
    /// definition, schedule and pending retries included).
    async fn create(&self, job: &Job, next_fire_at: Option<Timestamp>) -> Result<UpsertOutcome>;

    /// [`upsert`](Self::upsert) for each `(job, next_fire_at)`, outcomes in order.
    /// Ids are distinct (the scheduler refuses a batch that repeats one). Each job is
    /// written as `upsert` writes it; a store writes the batch in as few round trips as
    /// it can (the default calls `upsert` once per job). On an error some jobs may be
    /// written: calling it again with the same batch is idempotent.
    async fn upsert_many(&self, jobs: &[(Job, Option<Timestamp>)]) -> Result<Vec<UpsertOutcome>> {
        let mut out = Vec::with_capacity(jobs.len());
        for (job, next) in jobs {
            out.push(self.upsert(job, *next).await?);
        }
        Ok(out)
    }

    /// The stored job, or `None`. Errors with [`Error::Corrupt`](crate::Error::Corrupt)
    /// when its row cannot be decoded.
    async fn get(&self, id: &JobId) -> Result<Option<JobRecord>>;

    /// Jobs in bytewise id order, per [`JobQuery`]; rows that cannot be decoded are
    /// skipped into [`Page::corrupt`].
    async fn list(&self, query: &JobQuery) -> Result<Page<JobRecord>>;

    /// Removes a job (its runs stay in the log). Returns whether it existed.
    async fn remove(&self, id: &JobId) -> Result<bool>;

    /// Pauses (`enabled = false`) or resumes a job, bumping its version; on resume
    /// `next_fire_at` becomes the given value, the attempt count 0, `resume_after`
    /// and `next_payload` empty. Errors: [`Error::NotFound`](crate::Error::NotFound).
    async fn set_enabled(
        &self,
        id: &JobId,
        enabled: bool,
        next_fire_at: Option<Timestamp>,
    ) -> Result<()>;

    /// Makes a job due at `at` with trigger `Manual`, attempt count 0, no
    /// `resume_after` and `next_payload` set to `payload` (`None`: the fire runs the
    /// job's own payload). When a run is in progress the job becomes due once it
    /// finishes. Errors: `NotFound`.
    async fn trigger(&self, id: &JobId, at: Timestamp, payload: Option<&Value>) -> Result<()>;

    /// Fires with `next_fire_at <= query.until` of enabled jobs that have no run in
    /// progress, in due order (`fire_at`, then job id bytewise), only those after
    /// `query.after`, looking at at most `query.limit` rows. A row that cannot be
    /// decoded is skipped into [`Page::corrupt`] with its due key.
    async fn due(&self, query: &DueQuery) -> Result<Page<DueFire>>;

    /// Records runs as `Running`, each item under [`rules::start`](super::rules::start),
    /// with the item's `covers` and `payload`: then `last_token` becomes `item.token`
    /// and the run becomes the job's running run.
    async fn start_runs(&self, runs: &[StartRun]) -> Result<Vec<StartOutcome>>;

    /// Records run outcomes, each item under [`rules::finish`](super::rules::finish).
    /// Then, in one atomic step: the run gets its status, `ended_at`, error and
    /// `will_retry`; the job's running run is cleared and `last_token` set to the
    /// item's token; when the rules say so, `item.next` is written into the job;
    /// `item.alarms` enter the outbox as `Pending`. A run of a removed job is still
    /// recorded.
    async fn finish_runs(&self, runs: &[FinishRun]) -> Result<Vec<FinishOutcome>>;
}

macro_rules! forward {
    ($($ptr:ty),*) => {$(
        #[async_trait]
        impl<S: Jobs + ?Sized> Jobs for $ptr {
            fn name(&self) -> &'static str { (**self).name() }
            async fn now(&self) -> Result<Timestamp> { (**self).now().await }
            async fn schema(&self) -> Result<Option<SchemaVersion>> { (**self).schema().await }
            async fn upsert(&self, job: &Job, next: Option<Timestamp>) -> Result<UpsertOutcome> { (**self).upsert(job, next).await }
            async fn create(&self, job: &Job, next: Option<Timestamp>) -> Result<UpsertOutcome> { (**self).create(job, next).await }
            async fn upsert_many(&self, jobs: &[(Job, Option<Timestamp>)]) -> Result<Vec<UpsertOutcome>> { (**self).upsert_many(jobs).await }
            async fn get(&self, id: &JobId) -> Result<Option<JobRecord>> { (**self).get(id).await }
            async fn list(&self, q: &JobQuery) -> Result<Page<JobRecord>> { (**self).list(q).await }
            async fn remove(&self, id: &JobId) -> Result<bool> { (**self).remove(id).await }
            async fn set_enabled(&self, id: &JobId, enabled: bool, next: Option<Timestamp>) -> Result<()> { (**self).set_enabled(id, enabled, next).await }
            async fn trigger(&self, id: &JobId, at: Timestamp, payload: Option<&Value>) -> Result<()> { (**self).trigger(id, at, payload).await }
            async fn due(&self, q: &DueQuery) -> Result<Page<DueFire>> { (**self).due(q).await }
            async fn start_runs(&self, runs: &[StartRun]) -> Result<Vec<StartOutcome>> { (**self).start_runs(runs).await }
            async fn finish_runs(&self, runs: &[FinishRun]) -> Result<Vec<FinishOutcome>> { (**self).finish_runs(runs).await }
        }
    )*};
}

forward!(Arc<S>, Box<S>);
