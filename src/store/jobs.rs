//! [`Jobs`]: definitions and their scheduling state.

use super::{DueQuery, JobQuery, Page};
use crate::error::Result;
use crate::job::{Job, JobId};
use crate::record::*;
use crate::time::Timestamp;
use async_trait::async_trait;
use std::sync::Arc;

/// A change to a job, applied by [`Jobs::apply`] (with its audit entry, when the
/// operations layer makes it).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum JobChange {
    /// Creates or replaces `job`, its first fire at `next`.
    Upsert {
        /// The definition.
        job: Job,
        /// Its first fire (`None`: nothing to fire).
        next: Option<Timestamp>,
        /// What its first fire carries (the trace it was created in); stored as a
        /// scheduled fire's context when the job is created or replaced.
        context: FireContext,
    },
    /// Creates `job` unless one with its id exists.
    Create {
        /// The definition.
        job: Job,
        /// Its first fire (`None`: nothing to fire).
        next: Option<Timestamp>,
        /// What its first fire carries, as for [`Upsert`](Self::Upsert).
        context: FireContext,
    },
    /// Removes a job.
    Remove {
        /// The job.
        id: JobId,
    },
    /// Pauses a job.
    Pause {
        /// The job.
        id: JobId,
    },
    /// Resumes a paused job from `next`.
    Resume {
        /// The job.
        id: JobId,
        /// Its next fire (`None`: nothing left to fire).
        next: Option<FireState>,
    },
    /// Makes a job due with `fire`.
    Trigger {
        /// The job.
        id: JobId,
        /// The manual fire: its instant, trigger, attempt 0 and context.
        fire: FireState,
    },
}

impl JobChange {
    /// The job it changes.
    pub fn job_id(&self) -> &JobId {
        match self {
            JobChange::Upsert { job, .. } | JobChange::Create { job, .. } => job.id(),
            JobChange::Remove { id }
            | JobChange::Pause { id }
            | JobChange::Resume { id, .. }
            | JobChange::Trigger { id, .. } => id,
        }
    }
}

/// What [`Jobs::apply`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Applied {
    /// An upsert or create, and what it did.
    Upsert(UpsertOutcome),
    /// A removal, and whether the job existed.
    Removed(bool),
    /// A pause, resume or trigger was written.
    Done,
}

impl Applied {
    /// Whether the change was written (and its audit entry with it).
    pub fn changed(self) -> bool {
        match self {
            Applied::Upsert(o) => matches!(o, UpsertOutcome::Created | UpsertOutcome::Updated),
            Applied::Removed(existed) => existed,
            Applied::Done => true,
        }
    }

    /// The outcome of an upsert or create (`Unchanged` for any other change).
    pub fn upsert_outcome(self) -> UpsertOutcome {
        match self {
            Applied::Upsert(o) => o,
            _ => UpsertOutcome::Unchanged,
        }
    }
}

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

    /// Applies one change to a job and, when `audit` is given, appends that audit
    /// entry (stamped with the store's clock) in the same atomic step: the same
    /// transaction on the SQL stores, the same script on Redis, the same lock on
    /// the memory store. Either both are written or neither is.
    ///
    /// The entry is appended only when the change is applied: not for an upsert that
    /// found the definition unchanged, a create that kept an existing job, or the
    /// removal of a job that did not exist. What each change writes:
    ///
    /// * [`JobChange::Upsert`]: when the stored definition equals `job`, nothing
    ///   ([`UpsertOutcome::Unchanged`]). Otherwise the definition is written,
    ///   `version` bumped, the next fire set to a scheduled fire at `next` (attempt 0,
    ///   no resume point, empty context); a run in progress keeps running, and its
    ///   finish will not overwrite this state.
    /// * [`JobChange::Create`]: as an upsert when no job has the id
    ///   ([`UpsertOutcome::Created`]); otherwise [`UpsertOutcome::Kept`] and the
    ///   existing job is left exactly as it was (its schedule, next fire and pending
    ///   retries included).
    /// * [`JobChange::Remove`]: the job goes (its runs stay in the log);
    ///   [`Applied::Removed`] says whether it existed.
    /// * [`JobChange::Pause`] / [`JobChange::Resume`]: `enabled` set (no change when
    ///   it already is), `version` bumped; on resume the next fire becomes `next`.
    /// * [`JobChange::Trigger`]: the next fire becomes `fire` (a manual fire: attempt
    ///   0, its context); when a run is in progress the job becomes due once it
    ///   finishes.
    ///
    /// Errors: [`Error::NotFound`](crate::Error::NotFound) for a pause, resume or
    /// trigger of a job that does not exist (nothing is written).
    async fn apply(&self, change: &JobChange, audit: Option<&AuditEntry>) -> Result<Applied>;

    /// [`JobChange::Upsert`] for each `(job, next_fire_at)`, outcomes in order.
    /// Ids are distinct (the scheduler refuses a batch that repeats one). Each job is
    /// written as an upsert writes it; a store writes the batch in as few round trips
    /// as it can (the default applies one change per job). On an error some jobs may be
    /// written: calling it again with the same batch is idempotent.
    async fn upsert_many(&self, jobs: &[(Job, Option<Timestamp>)]) -> Result<Vec<UpsertOutcome>> {
        let mut out = Vec::with_capacity(jobs.len());
        for (job, next) in jobs {
            let change = JobChange::Upsert {
                job: job.clone(),
                next: *next,
                context: FireContext::default(),
            };
            out.push(self.apply(&change, None).await?.upsert_outcome());
        }
        Ok(out)
    }

    /// The stored job, or `None`. Errors with [`Error::Corrupt`](crate::Error::Corrupt)
    /// when its row cannot be decoded.
    async fn get(&self, id: &JobId) -> Result<Option<JobRecord>>;

    /// Jobs in bytewise id order, per [`JobQuery`]; rows that cannot be decoded are
    /// skipped into [`Page::corrupt`].
    async fn list(&self, query: &JobQuery) -> Result<Page<JobRecord>>;

    /// Fires with `next_fire_at <= query.until` of enabled jobs that have no run in
    /// progress, in due order (`fire_at`, then job id bytewise), only those after
    /// `query.after`, looking at at most `query.limit` rows. A row that cannot be
    /// decoded is skipped into [`Page::corrupt`] with its due key.
    async fn due(&self, query: &DueQuery) -> Result<Page<DueFire>>;

    /// Records runs as `Running`, each item under [`rules::start`](super::rules::start),
    /// with the item's `covers` and `payload`: then `last_token` becomes `item.token`
    /// and the run becomes the job's running run. Starts are idempotent across calls:
    /// an item that repeats the start which recorded its job's running run (same
    /// token, fire and attempt; [`rules::recorded_by`](super::rules::recorded_by)) is
    /// answered with that run and writes nothing, so a caller may repeat a call whose
    /// answer it lost. Within one call, the first item of a job decides and a later
    /// item of the same job is refused `Running`.
    async fn start_runs(&self, runs: &[StartRun]) -> Result<Vec<StartOutcome>>;

    /// Records run outcomes, each item under [`rules::finish`](super::rules::finish).
    /// Then, in one atomic step: the run gets its status, `ended_at`, error and
    /// `will_retry`; the job's running run is cleared and `last_token` set to the
    /// item's token; when the rules say so, `item.next` is written into the job;
    /// `item.alarms` enter the outbox as `Pending`; each of `item.releases` whose job
    /// exists is queued unless a release with its key (job, upstream job, upstream
    /// fire's [`key`](crate::dependency::UpstreamRun::key): its instant or its
    /// window's start) is queued, or kept taken by a job that joins by a window.
    /// Then each released job, and the item's own job, takes its oldest queued
    /// release when [`rules::takes_release`](super::rules::takes_release) allows (a
    /// job that joins by a window keeps what it took, marked). A run of a removed job
    /// is still recorded.
    async fn finish_runs(&self, runs: &[FinishRun]) -> Result<Vec<FinishOutcome>>;

    /// Releases queued for `job` (every job's when `None`), oldest first (by
    /// `released_at`, then upstream job and fire), at most `limit`. A release whose
    /// stored context cannot be decoded is left out, and so are the releases a job
    /// that joins by a window took (kept marked: [`rules::WINDOW_KEPT`](super::rules::WINDOW_KEPT)).
    async fn releases(
        &self,
        job: Option<&JobId>,
        limit: usize,
    ) -> Result<Vec<crate::dependency::QueuedRelease>>;

    /// Forgets the marks of windows taken longer ago than
    /// [`rules::WINDOW_KEPT`](super::rules::WINDOW_KEPT), then lets up to `limit`
    /// jobs that have releases queued take their oldest, each under
    /// [`rules::takes_release`](super::rules::takes_release) in one atomic step;
    /// returns how many were taken. The engine calls it on every maintenance
    /// pass, for the jobs that became able to take a release through a change (a
    /// resume, an upsert) rather than a finish.
    async fn take_releases(&self, limit: usize) -> Result<u64>;

    /// Queues `releases` as a finish queues its own (each whose job exists, unless
    /// its key is queued) and lets their jobs take one, in one atomic step with the
    /// audit entry: an operator's release of an instant, in place of the parents
    /// that did not release it.
    async fn queue_releases(
        &self,
        releases: &[crate::dependency::Release],
        audit: Option<&AuditEntry>,
    ) -> Result<()>;

    /// Removes the releases queued for `job` at the upstream instant `fire_at`, with
    /// the audit entry when any was removed, in one atomic step; how many: an
    /// operator's skip of an instant.
    async fn drop_releases(
        &self,
        job: &JobId,
        fire_at: Timestamp,
        audit: Option<&AuditEntry>,
    ) -> Result<u64>;

    /// Raises a [`Waiting`](crate::AlarmKind::Waiting) alarm for the releases queued
    /// for `job` at the upstream instant `fire_at`, once: when any is queued and no
    /// alarm was raised for them, marks the instant alarmed (every release of it
    /// lists [`alarmed_at`](crate::dependency::QueuedRelease::alarmed_at), a release
    /// of it queued later too) and puts `event` in the outbox as `Pending`, in one
    /// atomic step; whether it did. Every node may call it for the same instant at
    /// once: one call raises the alarm. The mark goes with the instant's releases
    /// (taken, dropped, or the job removed).
    async fn alarm_waiting(
        &self,
        job: &JobId,
        fire_at: Timestamp,
        event: &crate::record::AlarmEvent,
    ) -> Result<bool>;

    /// The leases this store keeps in its job rows, when it keeps them there
    /// ([`JobLeases`](super::JobLeases)); `None` (the default) for a store whose
    /// leases live with a lock provider of their own.
    fn job_leases(&self) -> Option<&dyn super::JobLeases> {
        None
    }
}

macro_rules! forward {
    ($($ptr:ty),*) => {$(
        #[async_trait]
        impl<S: Jobs + ?Sized> Jobs for $ptr {
            fn name(&self) -> &'static str { (**self).name() }
            async fn now(&self) -> Result<Timestamp> { (**self).now().await }
            async fn schema(&self) -> Result<Option<SchemaVersion>> { (**self).schema().await }
            async fn apply(&self, change: &JobChange, audit: Option<&AuditEntry>) -> Result<Applied> { (**self).apply(change, audit).await }
            async fn upsert_many(&self, jobs: &[(Job, Option<Timestamp>)]) -> Result<Vec<UpsertOutcome>> { (**self).upsert_many(jobs).await }
            async fn get(&self, id: &JobId) -> Result<Option<JobRecord>> { (**self).get(id).await }
            async fn list(&self, q: &JobQuery) -> Result<Page<JobRecord>> { (**self).list(q).await }
            async fn due(&self, q: &DueQuery) -> Result<Page<DueFire>> { (**self).due(q).await }
            async fn start_runs(&self, runs: &[StartRun]) -> Result<Vec<StartOutcome>> { (**self).start_runs(runs).await }
            async fn finish_runs(&self, runs: &[FinishRun]) -> Result<Vec<FinishOutcome>> { (**self).finish_runs(runs).await }
            async fn releases(&self, job: Option<&JobId>, limit: usize) -> Result<Vec<crate::dependency::QueuedRelease>> { (**self).releases(job, limit).await }
            async fn take_releases(&self, limit: usize) -> Result<u64> { (**self).take_releases(limit).await }
            async fn queue_releases(&self, r: &[crate::dependency::Release], a: Option<&AuditEntry>) -> Result<()> { (**self).queue_releases(r, a).await }
            async fn drop_releases(&self, job: &JobId, at: Timestamp, a: Option<&AuditEntry>) -> Result<u64> { (**self).drop_releases(job, at, a).await }
            async fn alarm_waiting(&self, job: &JobId, at: Timestamp, e: &crate::record::AlarmEvent) -> Result<bool> { (**self).alarm_waiting(job, at, e).await }
            fn job_leases(&self) -> Option<&dyn super::JobLeases> { (**self).job_leases() }
        }
    )*};
}

forward!(Arc<S>, Box<S>);
