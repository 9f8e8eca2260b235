//! Operations on a store that need no running scheduler node: resuming and
//! triggering a job on the store's clock, and scanning for rows the store cannot
//! read. [`Scheduler`](crate::Scheduler) uses them (and then wakes its poller), and
//! so does the `jobwheel` command line.

use super::{CorruptRow, JobQuery, JobStore};
use crate::error::{Error, Result};
use crate::job::JobId;

/// Resumes a paused job from its next fire after the store's now (a one-shot: its
/// instant). Errors: [`Error::NotFound`] when there is no such job.
pub async fn resume(store: &dyn JobStore, id: &JobId) -> Result<()> {
    let rec = store
        .get(id)
        .await?
        .ok_or_else(|| Error::not_found("job", id))?;
    let now = store.now().await?;
    let next = rec.job.schedule().first_fire(now);
    store.set_enabled(id, true, next).await
}

/// The first fire of `job` after `now` (the store's clock), as a job is stored.
///
/// Errors: [`Error::Invalid`] naming `job.schedule` for a cron expression that never
/// fires again (`0 0 0 30 2 ?`, or a year list in the past).
pub fn first_fire(
    job: &crate::job::Job,
    now: crate::time::Timestamp,
) -> Result<Option<crate::time::Timestamp>> {
    let next = job.schedule().first_fire(now);
    if let (None, crate::schedule::Schedule::Cron(c)) = (next, job.schedule()) {
        return Err(Error::invalid(
            "job.schedule",
            c.expr().to_string(),
            format!("never fires after {now}; remove the job instead"),
        ));
    }
    Ok(next)
}

/// Makes a job due now on the store's clock (trigger `manual`); it runs once any
/// run in progress has finished. With `payload`, that fire (and its retries) runs
/// with it in place of the job's payload; the job's definition is unchanged.
///
/// Errors: [`Error::Invalid`] naming `payload` when it nests too deep or exceeds
/// `max_payload_bytes` (nothing is written); [`Error::NotFound`] when there is no
/// such job.
pub async fn trigger_now(
    store: &dyn JobStore,
    id: &JobId,
    payload: Option<&serde_json::Value>,
    max_payload_bytes: usize,
) -> Result<()> {
    if let Some(p) = payload {
        crate::job::check_payload_value("payload", p, max_payload_bytes)?;
    }
    let now = store.now().await?;
    store.trigger(id, now, payload).await
}

/// What a scan of the store found: every stored row it could not read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Doctor {
    /// Job rows skipped by every scan (they never fire until repaired or removed).
    pub jobs: Vec<CorruptRow>,
    /// Node rows skipped.
    pub nodes: Vec<CorruptRow>,
}

impl Doctor {
    /// Reads every job and node row of `store` and keeps those it cannot read.
    pub async fn scan(store: &dyn JobStore) -> Result<Doctor> {
        let mut doctor = Doctor::default();
        let mut query = JobQuery::new(1000);
        loop {
            let page = store.list(&query).await?;
            let last = page
                .corrupt
                .iter()
                .filter_map(|c| JobId::new(&c.id).ok())
                .chain(page.items.iter().map(|r| r.job.id().clone()))
                .max();
            let full = page.rows() >= query.effective_limit();
            doctor.jobs.extend(page.corrupt);
            match last {
                Some(id) if full => query = query.after(Some(id)),
                _ => break,
            }
        }
        doctor.nodes = store.nodes().await?.corrupt;
        Ok(doctor)
    }

    /// Whether every row could be read.
    pub fn is_healthy(&self) -> bool {
        self.jobs.is_empty() && self.nodes.is_empty()
    }
}
