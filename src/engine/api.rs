//! The operations on jobs, runs, nodes and alarms that a [`Scheduler`] offers, before
//! and after `start`.

use super::Scheduler;
use crate::error::{Error, Result};
use crate::job::{Job, JobId};
use crate::record::*;
pub use crate::store::admin::Doctor;
use crate::store::{AlarmQuery, JobQuery, Page, RunQuery};
use crate::time::Timestamp;
use chrono::NaiveDate;

fn job_id(id: &str) -> Result<JobId> {
    JobId::new(id)
}

impl Scheduler {
    /// Creates or replaces a job and wakes the poller. Idempotent for an unchanged
    /// definition.
    ///
    /// Errors: [`Error::UnknownHandler`] when no handler of that name is registered on
    /// this node; [`Error::Invalid`] naming `job.payload` over
    /// `config.max_payload_bytes`, or `job.schedule` for a cron expression that never
    /// fires again (`0 0 0 30 2 ?`, or a year list in the past); nothing is stored then.
    pub async fn upsert(&self, job: Job) -> Result<UpsertOutcome> {
        let next = self.first_fire(&job).await?;
        let out = self.core.store.upsert(&job, next).await?;
        self.core.rescan();
        Ok(out)
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
        let next = self.first_fire(&job).await?;
        let out = self.core.store.create(&job, next).await?;
        if out == UpsertOutcome::Created {
            self.core.rescan();
        }
        Ok(out)
    }

    /// Checks `job` for this node and computes its first fire on the store's clock.
    async fn first_fire(&self, job: &Job) -> Result<Option<Timestamp>> {
        let now = self.core.store.now().await?;
        self.checked(job, now)
    }

    /// Upserts many jobs in as few store round trips as the backend allows (one
    /// statement or script per 500 jobs on the SQL and Redis stores); outcomes in the
    /// order of `jobs`. Every job is checked first, as [`upsert`](Self::upsert) checks
    /// one, and nothing is stored when any is refused or when an id appears twice.
    ///
    /// Errors: as `upsert`, and [`Error::Invalid`] naming `jobs` for a repeated id.
    pub async fn upsert_many(&self, jobs: Vec<Job>) -> Result<Vec<UpsertOutcome>> {
        let now = self.core.store.now().await?;
        let mut seen = std::collections::HashSet::with_capacity(jobs.len());
        let mut batch = Vec::with_capacity(jobs.len());
        for job in jobs {
            if !seen.insert(job.id().clone()) {
                return Err(Error::invalid(
                    "jobs",
                    job.id(),
                    "appears twice in one batch",
                ));
            }
            let next = self.checked(&job, now)?;
            batch.push((job, next));
        }
        let out = self.core.store.upsert_many(&batch).await?;
        self.core.rescan();
        Ok(out)
    }

    /// Checks `job` for this node and computes its first fire after `now`.
    fn checked(&self, job: &Job, now: Timestamp) -> Result<Option<Timestamp>> {
        self.core.handlers.for_job(job)?;
        job.check_payload(self.core.config.max_payload_bytes)?;
        crate::store::admin::first_fire(job, now)
    }

    /// Removes a job; its runs stay in the log. Returns whether it existed.
    pub async fn remove(&self, id: &str) -> Result<bool> {
        self.core.store.remove(&job_id(id)?).await
    }

    /// Pauses a job: it fires no more until resumed (a run in progress finishes).
    pub async fn pause(&self, id: &str) -> Result<()> {
        self.core.store.set_enabled(&job_id(id)?, false, None).await
    }

    /// Resumes a paused job from its next fire after now (a one-shot: its instant).
    pub async fn resume(&self, id: &str) -> Result<()> {
        crate::store::admin::resume(&*self.core.store, &job_id(id)?).await?;
        self.core.rescan();
        Ok(())
    }

    /// Runs a job now (trigger `manual`), once any run in progress has finished.
    /// Errors: [`Error::NotFound`].
    pub async fn trigger_now(&self, id: &str) -> Result<()> {
        self.trigger(id, None).await
    }

    /// Runs a job now as [`trigger_now`](Self::trigger_now) does, with `payload` in
    /// place of the job's own for this fire and its retries ([`JobContext::payload`]
    /// returns it; the run log records it). The job's definition is unchanged: its
    /// later fires run its own payload. A later trigger or a change of the job
    /// replaces the override before it runs.
    ///
    /// Errors: [`Error::Invalid`] naming `payload` over
    /// `config.max_payload_bytes` or nested too deep (nothing is written);
    /// [`Error::NotFound`].
    ///
    /// [`JobContext::payload`]: crate::JobContext::payload
    pub async fn trigger_now_with(&self, id: &str, payload: serde_json::Value) -> Result<()> {
        self.trigger(id, Some(&payload)).await
    }

    async fn trigger(&self, id: &str, payload: Option<&serde_json::Value>) -> Result<()> {
        let max = self.core.config.max_payload_bytes;
        crate::store::admin::trigger_now(&*self.core.store, &job_id(id)?, payload, max).await?;
        self.core.rescan();
        Ok(())
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
