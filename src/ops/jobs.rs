//! The operations on jobs: upsert, create, update, copy, remove, pause, resume,
//! trigger.

use super::{Actor, Ops, entry};
use crate::error::{Error, Result};
use crate::job::{Job, JobId};
use crate::record::AuditAction;
use crate::record::{DueKey, FireContext, FireState, JobRecord, TriggerKind, UpsertOutcome};
use crate::store::{Applied, JobChange};
use crate::time::Timestamp;
use serde::Serialize;
use serde_json::Value;

/// A job's state as the audit log records it before and after a change: its
/// definition (the JSON that creates it) and its next fire.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct JobSnapshot {
    /// The definition.
    pub job: Job,
    /// Its next fire; `None` when nothing is left to fire.
    pub next: Option<FireState>,
}

impl JobSnapshot {
    /// The state of a stored job.
    pub fn of(rec: &JobRecord) -> JobSnapshot {
        JobSnapshot {
            job: (*rec.job).clone(),
            next: rec.next.clone(),
        }
    }

    fn json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// The executor group of a job (`None`: one run by a scheduler's own handlers).
pub(super) fn group_of(job: &Job) -> Option<&str> {
    job.remote().map(|t| t.group())
}

/// The first fire of `job` after `now` (the store's clock), as a job is stored.
///
/// Errors: [`Error::Invalid`] naming `job.schedule` for a cron expression that never
/// fires again (`0 0 0 30 2 ?`, or a year list in the past).
pub fn first_fire(job: &Job, now: Timestamp) -> Result<Option<Timestamp>> {
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

/// How a job is stored: created if absent, or created or replaced.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Store {
    Create,
    Upsert,
}

impl Ops {
    /// The stored job `id` as `actor` may see it.
    ///
    /// Errors: [`Error::NotFound`], also for a job of a group the actor is not
    /// limited to (it does not learn the job exists).
    pub async fn visible(&self, actor: &Actor, id: &JobId) -> Result<JobRecord> {
        match self.store.get(id).await? {
            Some(r) if actor.sees(group_of(&r.job)) => Ok(r),
            _ => Err(Error::not_found("job", id)),
        }
    }

    /// Refuses a job the actor may not place ([`Error::Forbidden`]).
    fn may_place(actor: &Actor, job: &Job) -> Result<()> {
        if actor.sees(group_of(job)) {
            return Ok(());
        }
        Err(Error::Forbidden {
            reason: format!(
                "{} may not act on jobs of {}",
                actor.name(),
                group_of(job).map_or("local handlers".to_string(), |g| format!("group {g}"))
            ),
        })
    }

    /// Checks `job` against the configuration in force and computes its first fire
    /// on the store's clock.
    async fn checked(&self, job: &Job) -> Result<Option<Timestamp>> {
        self.check(job, self.store.now().await?)
    }

    /// [`checked`](Self::checked) against the store's clock read once as `now`.
    fn check(&self, job: &Job, now: Timestamp) -> Result<Option<Timestamp>> {
        job.check_payload(self.max_payload_bytes)?;
        if let Some(v) = &self.validator {
            v(job)?;
        }
        first_fire(job, now)
    }

    /// Stores `job` (`how`), audited as `action` with `before` as the prior state.
    async fn store_job(
        &self,
        actor: &Actor,
        job: Job,
        how: Store,
        before: Option<&JobRecord>,
        action: AuditAction,
    ) -> Result<UpsertOutcome> {
        Self::may_place(actor, &job)?;
        let next = self.checked(&job).await?;
        let alone = std::collections::HashMap::new();
        refuse_cycles(&*self.store, &job, &alone).await?;
        refuse_unreleased_after(&*self.store, &job, &alone).await?;
        let id = job.id().clone();
        // Made inside an OpenTelemetry trace: the first fire's run joins it.
        let context = FireContext {
            trace: next.and(crate::trace::current()),
            ..FireContext::default()
        };
        let after = JobSnapshot {
            job: job.clone(),
            next: next.map(|at| FireState::fresh(at, TriggerKind::Schedule, context.clone())),
        };
        let audit = entry(
            actor,
            action,
            job.id().as_str(),
            before.map(|b| JobSnapshot::of(b).json()),
            Some(after.json()),
        );
        let change = match how {
            Store::Create => JobChange::Create { job, next, context },
            Store::Upsert => JobChange::Upsert { job, next, context },
        };
        let out = self
            .store
            .apply(&change, Some(&audit))
            .await?
            .upsert_outcome();
        if matches!(out, UpsertOutcome::Created | UpsertOutcome::Updated) {
            self.changed(next.map(|at| DueKey {
                fire_at: at,
                job_id: id.clone(),
            }));
        }
        Ok(out)
    }

    /// Creates or replaces `job` (idempotent for an unchanged definition).
    ///
    /// Errors: [`Error::Invalid`] naming `job.payload` over the payload limit,
    /// `job.schedule` for a cron expression that never fires again, or
    /// `job.children` for children that lead back to the job (the value names the
    /// cycle, `a → b → a`; see [`dependency`](crate::dependency)); the validator's
    /// error ([`Error::UnknownHandler`] on a scheduler without the job's handler);
    /// [`Error::Forbidden`] for a job of a group the actor may not place;
    /// [`Error::NotFound`] when the id belongs to a job the actor does not see.
    /// Nothing is written then.
    pub async fn upsert(&self, actor: &Actor, job: Job) -> Result<UpsertOutcome> {
        let before = self.store.get(job.id()).await?;
        if let Some(b) = &before
            && !actor.sees(group_of(&b.job))
        {
            return Err(Error::not_found("job", job.id()));
        }
        self.store_job(
            actor,
            job,
            Store::Upsert,
            before.as_ref(),
            AuditAction::JobUpsert,
        )
        .await
    }

    /// Creates or replaces each of `jobs` in a few round trips (a bulk import or
    /// enqueue; [`Jobs::upsert_many`](crate::store::Jobs::upsert_many)), outcomes in
    /// order. Every job is checked as [`upsert`](Self::upsert) checks it before any
    /// is written. The batch is one audit entry, `job.upsert_many`, appended after
    /// it is written when anything was created or changed: its target counts the
    /// jobs, its `after` holds the counts (`created`, `updated`, `unchanged`) and
    /// the first 100 ids. The batch is not one transaction: on an error some jobs
    /// may be written and no entry is appended; calling again with the same batch
    /// is idempotent and appends the entry. The actor must see every job's group
    /// (new jobs only: the ids of stored jobs are not read first).
    ///
    /// Errors: as [`upsert`](Self::upsert), and [`Error::Invalid`] on `jobs` for an
    /// id that appears twice. Nothing is written then.
    pub async fn upsert_many(&self, actor: &Actor, jobs: Vec<Job>) -> Result<Vec<UpsertOutcome>> {
        let now = self.store.now().await?;
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
            Self::may_place(actor, &job)?;
            let next = self.check(&job, now)?;
            batch.push((job, next));
        }
        let pending: std::collections::HashMap<_, _> =
            batch.iter().map(|(j, _)| (j.id().clone(), j)).collect();
        for (job, _) in &batch {
            refuse_cycles(&*self.store, job, &pending).await?;
            refuse_unreleased_after(&*self.store, job, &pending).await?;
        }
        let out = self.store.upsert_many(&batch).await?;
        let count = |o: UpsertOutcome| out.iter().filter(|x| **x == o).count();
        let (created, updated) = (count(UpsertOutcome::Created), count(UpsertOutcome::Updated));
        if created + updated > 0 {
            let ids: Vec<&str> = batch
                .iter()
                .take(100)
                .map(|(j, _)| j.id().as_str())
                .collect();
            let after = serde_json::json!({
                "created": created,
                "updated": updated,
                "unchanged": out.len() - created - updated,
                "ids": ids,
            });
            let audit = entry(
                actor,
                AuditAction::JobUpsertMany,
                &format!("{} jobs", batch.len()),
                None,
                Some(after),
            );
            self.store.append_audit(&audit).await?;
            let first = batch
                .iter()
                .zip(&out)
                .filter(|(_, o)| matches!(o, UpsertOutcome::Created | UpsertOutcome::Updated))
                .filter_map(|((job, next), _)| {
                    next.map(|at| DueKey {
                        fire_at: at,
                        job_id: job.id().clone(),
                    })
                })
                .min_by(|a, b| (a.fire_at, a.job_id.as_str()).cmp(&(b.fire_at, b.job_id.as_str())));
            self.changed(first);
        }
        Ok(out)
    }

    /// Creates `job` unless one with its id exists: [`UpsertOutcome::Created`], or
    /// [`UpsertOutcome::Kept`] with the existing job left exactly as it was (nothing
    /// audited then).
    ///
    /// Errors: as [`upsert`](Self::upsert).
    pub async fn create(&self, actor: &Actor, job: Job) -> Result<UpsertOutcome> {
        self.store_job(actor, job, Store::Create, None, AuditAction::JobCreate)
            .await
    }

    /// Replaces the definition of the existing job `id` with `job`.
    ///
    /// Errors: [`Error::Invalid`] naming `job.id` when `job` has another id; and as
    /// [`upsert`](Self::upsert), [`Error::NotFound`] when there is no such job.
    pub async fn update(&self, actor: &Actor, id: &JobId, job: Job) -> Result<UpsertOutcome> {
        if job.id() != id {
            return Err(Error::invalid(
                "job.id",
                job.id(),
                format!("must be the job's id ({id}); copy a job to change its id"),
            ));
        }
        let before = self.visible(actor, id).await?;
        self.store_job(
            actor,
            job,
            Store::Upsert,
            Some(&before),
            AuditAction::JobUpdate,
        )
        .await
    }

    /// Creates a copy of job `from` under the id `to` (its definition, with its
    /// schedule starting afresh).
    ///
    /// Errors: [`Error::Invalid`] naming `job.id` for an id not allowed;
    /// [`Error::NotFound`] for `from`; and as [`create`](Self::create) (a copy onto an
    /// existing id is [`UpsertOutcome::Kept`]).
    pub async fn copy(&self, actor: &Actor, from: &JobId, to: &str) -> Result<UpsertOutcome> {
        let source = self.visible(actor, from).await?;
        let mut def = serde_json::to_value(&*source.job)
            .map_err(|e| Error::invalid("job", from, e.to_string()))?;
        def["id"] = Value::String(to.to_string());
        let job = Job::from_json(&def.to_string())?;
        self.store_job(actor, job, Store::Create, None, AuditAction::JobCopy)
            .await
    }

    /// Removes job `id` (its runs stay in the log). Returns whether it existed (as
    /// the actor sees it).
    pub async fn remove(&self, actor: &Actor, id: &JobId) -> Result<bool> {
        let before = match self.visible(actor, id).await {
            Ok(b) => b,
            Err(Error::NotFound { .. }) => return Ok(false),
            Err(e) => return Err(e),
        };
        let audit = entry(
            actor,
            AuditAction::JobRemove,
            id.as_str(),
            Some(JobSnapshot::of(&before).json()),
            None,
        );
        let change = JobChange::Remove { id: id.clone() };
        Ok(matches!(
            self.store.apply(&change, Some(&audit)).await?,
            Applied::Removed(true)
        ))
    }

    /// Applies a pause, resume or trigger of `before`, audited as `action` with
    /// `after` as the new state; returns the job as stored after it.
    async fn act(
        &self,
        actor: &Actor,
        before: &JobRecord,
        change: JobChange,
        after: JobSnapshot,
        action: AuditAction,
    ) -> Result<JobRecord> {
        let id = before.job.id();
        let audit = entry(
            actor,
            action,
            id.as_str(),
            Some(JobSnapshot::of(before).json()),
            Some(after.json()),
        );
        let next = after.next.as_ref().map(|f| DueKey {
            fire_at: f.at,
            job_id: id.clone(),
        });
        self.store.apply(&change, Some(&audit)).await?;
        self.changed(next);
        self.store
            .get(id)
            .await?
            .ok_or_else(|| Error::not_found("job", id))
    }

    /// Pauses job `id`: it fires no more until resumed (a run in progress finishes).
    /// Returns the job as stored after it.
    ///
    /// Errors: [`Error::NotFound`].
    pub async fn pause(&self, actor: &Actor, id: &JobId) -> Result<JobRecord> {
        let before = self.visible(actor, id).await?;
        let after = JobSnapshot {
            job: before.job.with_enabled(false),
            next: before.next.clone(),
        };
        let change = JobChange::Pause { id: id.clone() };
        self.act(actor, &before, change, after, AuditAction::JobPause)
            .await
    }

    /// Resumes job `id` from its next fire after the store's now (a one-shot: its
    /// instant); a job that is not paused is left as it is. Returns the job as stored
    /// after it.
    ///
    /// Errors: [`Error::NotFound`].
    pub async fn resume(&self, actor: &Actor, id: &JobId) -> Result<JobRecord> {
        let before = self.visible(actor, id).await?;
        let now = self.store.now().await?;
        let next = before
            .job
            .schedule()
            .first_fire(now)
            .map(FireState::scheduled);
        let after = if before.job.enabled() {
            JobSnapshot::of(&before)
        } else {
            JobSnapshot {
                job: before.job.with_enabled(true),
                next: next.clone(),
            }
        };
        let change = JobChange::Resume {
            id: id.clone(),
            next,
        };
        self.act(actor, &before, change, after, AuditAction::JobResume)
            .await
    }

    /// Makes job `id` due now on the store's clock (trigger `manual`); it runs once
    /// any run in progress has finished. With `payload`, that fire (and its retries)
    /// runs with it in place of the job's payload; the definition is unchanged.
    /// Returns the job as stored after it.
    ///
    /// Errors: [`Error::Invalid`] naming `payload` when it nests too deep or exceeds
    /// the payload limit; [`Error::NotFound`]; [`Error::Conflict`] when the job is
    /// paused (a paused job never fires: resume it first). Nothing is written then.
    pub async fn trigger(
        &self,
        actor: &Actor,
        id: &JobId,
        payload: Option<Value>,
    ) -> Result<JobRecord> {
        if let Some(p) = &payload {
            crate::job::check_payload_value("payload", p, self.max_payload_bytes)?;
        }
        let before = self.visible(actor, id).await?;
        if !before.job.enabled() {
            return Err(super::conflict(
                "job",
                id,
                "it is paused: resume it to run it",
            ));
        }
        let now = self.store.now().await?;
        let mut context = FireContext::with_payload(payload);
        // Triggered inside an OpenTelemetry trace: the run joins it.
        context.trace = crate::trace::current();
        let fire = FireState::fresh(now, TriggerKind::Manual, context);
        let after = JobSnapshot {
            job: (*before.job).clone(),
            next: Some(fire.clone()),
        };
        let change = JobChange::Trigger {
            id: id.clone(),
            fire,
        };
        self.act(actor, &before, change, after, AuditAction::JobTrigger)
            .await
    }
}

/// Refuses `job` when its children, followed through the jobs' children (those of
/// `batch`, stored with it, else the stored ones), lead back to it:
/// [`Error::Invalid`] naming `job.children`, its value the cycle (`a → b → a`).
/// Reads each job reachable from it once; more than
/// [`MAX_GRAPH_READS`](crate::dependency::MAX_GRAPH_READS) is refused as too large
/// to check.
async fn refuse_cycles(
    store: &dyn crate::store::JobStore,
    job: &Job,
    batch: &std::collections::HashMap<JobId, &Job>,
) -> Result<()> {
    let me = job.id();
    // How each reached job was reached (its parent), to name the cycle.
    let mut via: std::collections::HashMap<JobId, JobId> = std::collections::HashMap::new();
    let mut todo: Vec<JobId> = Vec::new();
    for c in job.children() {
        via.entry(c.job.clone()).or_insert_with(|| me.clone());
        todo.push(c.job.clone());
    }
    let mut reads = 0;
    while let Some(id) = todo.pop() {
        if &id == me {
            let mut path = vec![me.to_string()];
            let mut at = via[me].clone();
            while &at != me {
                path.push(at.to_string());
                at = via[&at].clone();
            }
            path.push(me.to_string());
            path.reverse();
            return Err(Error::invalid(
                "job.children",
                path.join(" → "),
                "the children lead back to the job: a cycle would release it forever",
            ));
        }
        reads += 1;
        if reads > crate::dependency::MAX_GRAPH_READS {
            return Err(Error::invalid(
                "job.children",
                me.as_str(),
                format!(
                    "more than {} jobs are reachable through children; the graph is too large to check for cycles",
                    crate::dependency::MAX_GRAPH_READS
                ),
            ));
        }
        let stored;
        let children = match batch.get(&id) {
            Some(j) => j.children(),
            None => {
                stored = store.get(&id).await?;
                match &stored {
                    Some(rec) => rec.job.children(),
                    None => continue,
                }
            }
        };
        for c in children {
            if !via.contains_key(&c.job) || &c.job == me {
                via.insert(c.job.clone(), id.clone());
                todo.push(c.job.clone());
            }
        }
    }
    Ok(())
}

/// Refuses `job` when a parent in its `after` list exists (in `batch`, stored with
/// it, else in the store) and does not list it among its children: that parent's
/// releases would never reach it, and it would never run. [`Error::Invalid`] naming
/// `job.after`, its value the parent.
async fn refuse_unreleased_after(
    store: &dyn crate::store::JobStore,
    job: &Job,
    batch: &std::collections::HashMap<JobId, &Job>,
) -> Result<()> {
    for parent in job.after() {
        let stored;
        let p = match batch.get(parent) {
            Some(p) => *p,
            None => {
                stored = store.get(parent).await?;
                match &stored {
                    Some(rec) => &*rec.job,
                    None => continue,
                }
            }
        };
        if !p.children().iter().any(|c| c.job == *job.id()) {
            return Err(Error::invalid(
                "job.after",
                parent.as_str(),
                format!(
                    "{parent} does not list {} among its children, so its fires never release it; add it there first",
                    job.id()
                ),
            ));
        }
    }
    Ok(())
}
