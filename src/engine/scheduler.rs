//! The operations on jobs, runs, nodes and alarms that a [`Scheduler`] offers, before
//! and after `start`. Every change goes through the scheduler's [`Ops`] as the
//! library actor: validated against this node (its payload limit, its handlers),
//! audited in the same step as the change, and waking this node's poller.

use super::Scheduler;
use super::lock;
use super::node::Core;
use crate::error::Result;
use crate::job::{Job, JobId};
pub use crate::ops::Doctor;
use crate::ops::{Actor, Ops, RunKiller};
use crate::record::*;
use crate::store::{AlarmChange, AlarmQuery, JobQuery, Page, RunQuery};
use async_trait::async_trait;
use chrono::NaiveDate;
use std::sync::Arc;

fn job_id(id: &str) -> Result<JobId> {
    JobId::new(id)
}

/// Kills runs for a scheduler: a run of this node's own handlers through its
/// cancellation, a run on one of its executor groups through the group's instances.
struct NodeKiller(Arc<Core>);

#[async_trait]
impl RunKiller for NodeKiller {
    async fn kill(&self, run: &RunRecord, job: Option<&Job>) -> Result<Vec<String>> {
        let core = &self.0;
        let mut killed = Vec::new();
        if *run.node == *core.node_id
            && let Some(entry) = lock(&core.load.running).get_mut(&run.id)
        {
            entry.killed = true;
            entry.cancel.cancel();
            killed.push(core.node_id.to_string());
        }
        if let Some(group) = job
            .and_then(Job::remote)
            .and_then(|t| core.handlers.remote.get(t.group()))
        {
            killed.extend(group.kill_everywhere(run.id.0, run.token).await?);
        }
        Ok(killed)
    }
}

impl Scheduler {
    /// This scheduler's operations layer: changes validated against this node (its
    /// `max_payload_bytes`, its registered handlers and executor groups), audited,
    /// and waking its poller. A server's admin API uses its node's; an embedding
    /// program may act as another [`Actor`] through it.
    pub fn ops(&self) -> Ops {
        let (check, wake, kill) = (self.core.clone(), self.core.clone(), self.core.clone());
        Ops::new(self.core.store.clone())
            .max_payload_bytes(self.core.config.max_payload_bytes)
            .validator(Arc::new(move |job: &Job| {
                check.handlers.for_job(job).map(drop)
            }))
            .on_change(Arc::new(move |next| wake.changed(next)))
            .killer(Arc::new(NodeKiller(kill)))
    }

    /// Creates or replaces a job and wakes the poller. Idempotent for an unchanged
    /// definition. Audited as `job.upsert` by `library`.
    ///
    /// Errors: [`Error::UnknownHandler`](crate::Error::UnknownHandler) when no handler
    /// of that name is registered on this node; [`Error::Invalid`](crate::Error::Invalid)
    /// naming `job.payload` over `config.max_payload_bytes`, or `job.schedule` for a
    /// cron expression that never fires again (`0 0 0 30 2 ?`, or a year list in the
    /// past); nothing is stored then.
    pub async fn upsert(&self, job: Job) -> Result<UpsertOutcome> {
        self.ops().upsert(&Actor::library(), job).await
    }

    /// Creates a job unless one with its id exists: [`UpsertOutcome::Created`], or
    /// [`UpsertOutcome::Kept`] with the existing job left exactly as it was (its
    /// schedule, next fire and pending retries). The way to declare a one-shot or a
    /// job from every process of a fleet: each process may call it, the job is
    /// created once and never re-armed.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> jobwheel::Result<()> {
    /// use jobwheel::prelude::*;
    /// let scheduler = Scheduler::builder()
    ///     .backend(connect("memory:").await?)
    ///     .handler("welcome", |_ctx: JobContext| async { Ok(()) })
    ///     .build()?;
    /// let at = Timestamp::now() + std::time::Duration::from_secs(60);
    /// let once = || Job::builder("welcome-42", "welcome", Schedule::once(at)).build();
    /// assert_eq!(scheduler.create(once()?).await?, UpsertOutcome::Created);
    /// // Another process (or a restart) declaring the same one-shot changes nothing.
    /// assert_eq!(scheduler.create(once()?).await?, UpsertOutcome::Kept);
    /// # Ok(()) }
    /// ```
    ///
    /// Errors: as [`upsert`](Self::upsert).
    pub async fn create(&self, job: Job) -> Result<UpsertOutcome> {
        self.ops().create(&Actor::library(), job).await
    }

    /// Upserts many jobs in as few store round trips as the backend allows (one
    /// statement or script per 500 jobs on the SQL and Redis stores); outcomes in the
    /// order of `jobs`. Every job is checked first, as [`upsert`](Self::upsert) checks
    /// one, and nothing is stored when any is refused or when an id appears twice.
    /// This is the bulk path for enqueueing: the batch is one audit entry,
    /// `job.upsert_many` by `library` ([`Ops::upsert_many`]).
    ///
    /// Errors: as `upsert` (children that close a cycle, through the batch or the
    /// stored jobs, included), and [`Error::Invalid`](crate::Error::Invalid) naming
    /// `jobs` for a repeated id.
    pub async fn upsert_many(&self, jobs: Vec<Job>) -> Result<Vec<UpsertOutcome>> {
        self.ops().upsert_many(&Actor::library(), jobs).await
    }

    /// Removes a job; its runs stay in the log. Returns whether it existed.
    pub async fn remove(&self, id: &str) -> Result<bool> {
        self.ops().remove(&Actor::library(), &job_id(id)?).await
    }

    /// Pauses a job: it fires no more until resumed (a run in progress finishes).
    /// Errors: [`Error::NotFound`](crate::Error::NotFound).
    pub async fn pause(&self, id: &str) -> Result<()> {
        self.ops()
            .pause(&Actor::library(), &job_id(id)?)
            .await
            .map(drop)
    }

    /// Resumes a paused job from its next fire after now (a one-shot: its instant).
    /// Errors: [`Error::NotFound`](crate::Error::NotFound).
    pub async fn resume(&self, id: &str) -> Result<()> {
        self.ops()
            .resume(&Actor::library(), &job_id(id)?)
            .await
            .map(drop)
    }

    /// Runs job `id`, which waits for several parents, once for the upstream
    /// instant `fire_at` in place of the parents that have not released it (see
    /// [`Ops::release_instant`](crate::ops::Ops::release_instant)); returns them.
    pub async fn release_instant(
        &self,
        id: &str,
        fire_at: crate::time::Timestamp,
    ) -> Result<Vec<crate::job::JobId>> {
        self.ops()
            .release_instant(&Actor::library(), &job_id(id)?, fire_at)
            .await
    }

    /// Drops the releases queued for job `id` at the upstream instant `fire_at`
    /// (see [`Ops::skip_instant`](crate::ops::Ops::skip_instant)); returns how many.
    pub async fn skip_instant(&self, id: &str, fire_at: crate::time::Timestamp) -> Result<u64> {
        self.ops()
            .skip_instant(&Actor::library(), &job_id(id)?, fire_at)
            .await
    }

    /// Runs a job now (trigger `manual`), once any run in progress has finished.
    /// Errors: [`Error::NotFound`](crate::Error::NotFound).
    pub async fn trigger_now(&self, id: &str) -> Result<()> {
        self.ops()
            .trigger(&Actor::library(), &job_id(id)?, None)
            .await
            .map(drop)
    }

    /// Runs a job now as [`trigger_now`](Self::trigger_now) does, with `payload` in
    /// place of the job's own for this fire and its retries ([`JobContext::payload`]
    /// returns it; the run log records it). The job's definition is unchanged: its
    /// later fires run its own payload. A later trigger or a change of the job
    /// replaces the override before it runs.
    ///
    /// Errors: [`Error::Invalid`](crate::Error::Invalid) naming `payload` over
    /// `config.max_payload_bytes` or nested too deep (nothing is written);
    /// [`Error::NotFound`](crate::Error::NotFound).
    ///
    /// [`JobContext::payload`]: crate::JobContext::payload
    pub async fn trigger_now_with(&self, id: &str, payload: serde_json::Value) -> Result<()> {
        self.ops()
            .trigger(&Actor::library(), &job_id(id)?, Some(payload))
            .await
            .map(drop)
    }

    /// Kills a running run: on this node through its cancellation, on an executor
    /// group of this node through the group's instances. Returns where it was
    /// stopped. Audited as `run.kill` by `library`.
    ///
    /// Errors: [`Error::NotFound`](crate::Error::NotFound);
    /// [`Error::Conflict`](crate::Error::Conflict) when it is not running, or nothing
    /// this node reaches runs it.
    pub async fn kill(&self, run: RunId) -> Result<Vec<String>> {
        self.ops().kill(&Actor::library(), run).await
    }

    /// Retries (delivers again now) or discards (never delivers) an alarm event.
    /// Audited by `library`.
    ///
    /// Errors: [`Error::NotFound`](crate::Error::NotFound);
    /// [`Error::Conflict`](crate::Error::Conflict) when the event is neither pending
    /// nor failed.
    pub async fn alarm_change(&self, change: AlarmChange) -> Result<()> {
        self.ops().alarm_change(&Actor::library(), change).await
    }

    /// One job.
    pub async fn get(&self, id: &str) -> Result<Option<JobRecord>> {
        self.core.store.get(&job_id(id)?).await
    }

    /// Jobs in id order, per `query`; rows the store could not read are in
    /// [`Page::corrupt`] (and counted in `corrupt_rows`).
    pub async fn list_jobs(&self, query: &JobQuery) -> Result<Page<JobRecord>> {
        let page = self.core.store.list(query).await?;
        self.core.saw_corrupt(&page.corrupt);
        Ok(page)
    }

    /// The run log.
    pub async fn runs(&self, query: &RunQuery) -> Result<Vec<RunRecord>> {
        self.core.store.runs(query).await
    }

    /// Per-day run counts.
    pub async fn daily_stats(&self, from: NaiveDate, to: NaiveDate) -> Result<Vec<DailyStats>> {
        self.core.store.daily_stats(from, to).await
    }

    /// Registered nodes; rows the store could not read are in [`Page::corrupt`].
    pub async fn nodes(&self) -> Result<Page<NodeRecord>> {
        let page = self.core.store.nodes().await?;
        self.core.saw_corrupt(&page.corrupt);
        Ok(page)
    }

    /// Alarm events in the outbox, newest first, per `query`.
    pub async fn alarms(&self, query: &AlarmQuery) -> Result<Vec<AlarmRecord>> {
        self.core.store.alarms(query).await
    }

    /// Reads every stored job and node and lists the rows the store cannot decode
    /// (each also counted in `corrupt_rows` and logged once). Such a row is skipped by
    /// every scan, so the rest of the fleet keeps running; repair it or remove the job.
    pub async fn doctor(&self) -> Result<Doctor> {
        let doctor = Doctor::scan(&*self.core.store).await?;
        self.core.saw_corrupt(&doctor.jobs);
        self.core.saw_corrupt(&doctor.nodes);
        Ok(doctor)
    }
}
