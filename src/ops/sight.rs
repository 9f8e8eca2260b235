//! What an actor sees of the records about jobs: runs, alarm events and audit
//! entries.
//!
//! An actor that is not limited to executor groups sees every record. One that is
//! sees a record about a job when the job exists now, is of one of its groups, and
//! held the record's id when the record was made: **a record belongs to the job
//! that held its id at the record's time** (the store's clock, which both the job's
//! `created_at` and the record's time are read from). So a job removed and created
//! again under the same id, in another group or by another tenant, does not inherit
//! the runs, alarms and audit entries of the one before; they stay in the store for
//! actors without limits, whose history they are.

use super::jobs::group_of;
use super::{Actor, Ops};
use crate::error::Result;
use crate::job::JobId;
use crate::record::{AlarmRecord, AuditRecord, RunRecord};
use crate::time::Timestamp;
use std::collections::HashMap;

/// An actor's view of records, reading each job it meets from the store once.
pub struct Sight<'a> {
    ops: &'a Ops,
    actor: &'a Actor,
    /// Per job id: its group and creation time, or `None` when there is no such job.
    jobs: HashMap<JobId, Option<(Option<String>, Timestamp)>>,
}

impl std::fmt::Debug for Sight<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sight")
            .field("actor", self.actor)
            .field("jobs", &self.jobs.len())
            .finish_non_exhaustive()
    }
}

impl Ops {
    /// What `actor` sees of runs, alarm events and audit entries.
    pub fn sight<'a>(&'a self, actor: &'a Actor) -> Sight<'a> {
        Sight {
            ops: self,
            actor,
            jobs: HashMap::new(),
        }
    }
}

impl Sight<'_> {
    async fn job(&mut self, id: &JobId) -> Result<Option<(Option<String>, Timestamp)>> {
        if let Some(j) = self.jobs.get(id) {
            return Ok(j.clone());
        }
        let j = self
            .ops
            .store
            .get(id)
            .await?
            .map(|r| (group_of(&r.job).map(str::to_string), r.created_at));
        self.jobs.insert(id.clone(), j.clone());
        Ok(j)
    }

    /// The executor group of the job that holds `id` now, if it held it at `at`
    /// (`None`: a local job, a job that is gone, or one created after `at`).
    pub async fn group_at(&mut self, id: &JobId, at: Timestamp) -> Result<Option<String>> {
        Ok(match self.job(id).await? {
            Some((group, created)) if at >= created => group,
            _ => None,
        })
    }

    /// Whether the actor sees a record about job `id` made at `at`.
    pub async fn sees(&mut self, id: &JobId, at: Timestamp) -> Result<bool> {
        if self.actor.groups().is_none() {
            return Ok(true);
        }
        Ok(match self.job(id).await? {
            Some((group, created)) => at >= created && self.actor.sees(group.as_deref()),
            None => false,
        })
    }

    /// Whether the actor sees `run`.
    pub async fn run(&mut self, run: &RunRecord) -> Result<bool> {
        self.sees(&run.job_id, run.started_at).await
    }

    /// Whether the actor sees alarm event `a`.
    pub async fn alarm(&mut self, a: &AlarmRecord) -> Result<bool> {
        self.sees(&a.event.job_id, a.created_at).await
    }

    /// Whether the actor sees audit entry `r`: a job's change when the job was of
    /// one of its groups then (the entry's own before or after state says so, so a
    /// removal stays visible); a run's or an alarm's (whose before-state names the
    /// job) as the job's other records; one about no job (a login) when it is the
    /// actor's own.
    pub async fn audit(&mut self, r: &AuditRecord) -> Result<bool> {
        if self.actor.groups().is_none() {
            return Ok(true);
        }
        let e = &r.entry;
        if e.action.starts_with("job.") {
            let state = e.after.as_ref().or(e.before.as_ref());
            let group = state
                .and_then(|s| s.get("job")?.get("remote")?.get("group")?.as_str())
                .map(str::to_string);
            return Ok(state.is_some() && self.actor.sees(group.as_deref()));
        }
        match e
            .before
            .as_ref()
            .and_then(|b| b.get("job")?.as_str())
            .and_then(|j| JobId::new(j).ok())
        {
            Some(job) => self.sees(&job, r.at).await,
            None => Ok(e.actor == self.actor.name()),
        }
    }
}
