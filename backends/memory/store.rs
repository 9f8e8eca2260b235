//! [`MemoryStore`]: the state behind one mutex, and its [`Jobs`] part.

use crate::error::{Error, Result};
use crate::job::{Job, JobId};
use crate::record::*;
use crate::store::rules::{self, JobState, RunState};
use crate::store::{DueQuery, JobQuery, Jobs, Page};
use crate::time::{Clock, SystemClock, Timestamp};
use async_trait::async_trait;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};

/// What a due-index entry keeps of its job, so a due scan never touches the job map.
#[derive(Debug)]
struct DueEntry {
    job: Arc<Job>,
    version: u64,
    trigger: TriggerKind,
    attempt: u32,
    resume_after: Option<Timestamp>,
    payload: Option<serde_json::Value>,
}

#[derive(Debug, Default)]
pub(super) struct Inner {
    jobs: BTreeMap<JobId, JobRecord>,
    /// `(next_fire_at, id)` of every enabled job with a next fire and no running run,
    /// with what `due` returns besides, so a scan never touches the job map.
    due: BTreeMap<(Timestamp, JobId), DueEntry>,
    pub(super) runs: BTreeMap<RunId, RunRecord>,
    /// Ids of runs in `Running` state.
    pub(super) running: BTreeSet<RunId>,
    next_run: i64,
    pub(super) nodes: BTreeMap<String, NodeRecord>,
    /// Executor instances by `(group, address)`.
    pub(super) executors: BTreeMap<(String, String), ExecutorRecord>,
    pub(super) alarms: BTreeMap<AlarmId, AlarmRecord>,
    /// Events that may still be claimed (pending, failed with a retry, sending), so a
    /// claim never walks the delivered ones.
    pub(super) claimable: BTreeSet<AlarmId>,
    next_alarm: i64,
    pub(super) audit: Vec<AuditRecord>,
    pub(super) next_audit: i64,
}

impl Inner {
    fn unindex(&mut self, rec: &JobRecord) {
        if let Some(at) = rec.next_fire_at {
            self.due.remove(&(at, rec.job.id().clone()));
        }
    }

    fn index(&mut self, rec: &JobRecord) {
        if let (Some(at), true, None) = (rec.next_fire_at, rec.job.enabled(), rec.running) {
            let fire = DueEntry {
                job: rec.job.clone(),
                version: rec.version,
                trigger: rec.next_trigger,
                attempt: rec.attempt,
                resume_after: rec.resume_after,
                payload: rec.next_payload.clone(),
            };
            self.due.insert((at, rec.job.id().clone()), fire);
        }
    }

    /// Applies `f` to a job, keeping the due index in step.
    fn with_job<T>(&mut self, id: &JobId, f: impl FnOnce(&mut JobRecord) -> T) -> Option<T> {
        let mut rec = self.jobs.remove(id)?;
        self.unindex(&rec);
        let out = f(&mut rec);
        self.index(&rec);
        self.jobs.insert(id.clone(), rec);
        Some(out)
    }

    fn enqueue(&mut self, events: &[AlarmEvent], now: Timestamp) {
        for e in events {
            self.next_alarm += 1;
            let id = AlarmId(self.next_alarm);
            self.alarms.insert(
                id,
                AlarmRecord {
                    id,
                    event: e.clone(),
                    status: AlarmStatus::Pending,
                    attempts: 0,
                    next_attempt_at: Some(now),
                    claimed_by: None,
                    claim_until: None,
                    last_error: None,
                    created_at: now,
                },
            );
            self.claimable.insert(id);
        }
    }

    fn start(&mut self, r: &StartRun, now: Timestamp) -> StartOutcome {
        let state = self.jobs.get(&r.job_id).map(JobState::from);
        if let Err(refusal) = rules::start(state.as_ref(), r) {
            return StartOutcome::Refused(refusal);
        }
        self.next_run += 1;
        let run_id = RunId(self.next_run);
        self.with_job(&r.job_id, |j| {
            j.last_token = r.token;
            j.running = Some(run_id);
        });
        self.running.insert(run_id);
        self.runs.insert(
            run_id,
            RunRecord {
                id: run_id,
                job_id: r.job_id.clone(),
                fire_at: r.fire_at,
                trigger: r.trigger,
                node: r.node.clone(),
                attempt: r.attempt,
                token: r.token,
                status: RunStatus::Running,
                started_at: now,
                ended_at: None,
                error: None,
                will_retry: false,
                covers: r.covers,
                payload: r.payload.clone(),
            },
        );
        StartOutcome::Started {
            run_id,
            started_at: now,
        }
    }

    fn finish(&mut self, f: &FinishRun, now: Timestamp) -> FinishOutcome {
        let run = self.runs.get(&f.run_id).map(RunState::from);
        let job = self.jobs.get(&f.job_id).map(JobState::from);
        let rescheduled = match rules::finish(run.as_ref(), job.as_ref(), f) {
            Ok(r) => r,
            Err(refusal) => return FinishOutcome::Refused(refusal),
        };
        self.with_job(&f.job_id, |j| {
            j.last_token = f.token;
            if j.running == Some(f.run_id) {
                j.running = None;
            }
            if rescheduled {
                j.next_fire_at = f.next.at;
                j.next_trigger = f.next.trigger;
                j.attempt = f.next.attempt;
                j.resume_after = f.next.resume_after;
                j.next_payload = f.next.payload.clone();
            }
        });
        self.running.remove(&f.run_id);
        if let Some(run) = self.runs.get_mut(&f.run_id) {
            run.status = f.status;
            run.ended_at = Some(now);
            run.error = f.error.clone();
            run.will_retry = f.will_retry;
        }
        self.enqueue(&f.alarms, now);
        FinishOutcome::Finished {
            ended_at: now,
            rescheduled,
        }
    }
}

/// A complete [`JobStore`](crate::JobStore) in process memory.
///
/// Cloning shares the same state, so several schedulers in one process can use one
/// store as a cluster would use one database. It keeps values, never encoded rows, so
/// it never has a row it cannot read.
#[derive(Debug, Clone)]
pub struct MemoryStore {
    pub(super) clock: Arc<dyn Clock>,
    inner: Arc<Mutex<Inner>>,
}

impl Default for MemoryStore {
    fn default() -> Self {
        MemoryStore::new()
    }
}

impl MemoryStore {
    /// Writes `job` as `upsert` does, or, with `only_if_absent`, only when no job has
    /// its id.
    fn store_job(
        &self,
        job: &Job,
        next_fire_at: Option<Timestamp>,
        only_if_absent: bool,
    ) -> Result<UpsertOutcome> {
        let now = self.clock.now();
        let mut inner = self.inner();
        let id = job.id().clone();
        let outcome = inner.with_job(&id, |j| {
            if only_if_absent {
                return UpsertOutcome::Kept;
            }
            if *j.job == *job {
                return UpsertOutcome::Unchanged;
            }
            j.job = Arc::new(job.clone());
            j.version += 1;
            j.next_fire_at = next_fire_at;
            j.next_trigger = TriggerKind::Schedule;
            j.attempt = 0;
            j.resume_after = None;
            j.next_payload = None;
            j.updated_at = now;
            UpsertOutcome::Updated
        });
        if let Some(outcome) = outcome {
            return Ok(outcome);
        }
        let rec = JobRecord {
            job: Arc::new(job.clone()),
            version: 1,
            next_fire_at,
            next_trigger: TriggerKind::Schedule,
            attempt: 0,
            resume_after: None,
            next_payload: None,
            last_token: 0,
            running: None,
            created_at: now,
            updated_at: now,
        };
        inner.index(&rec);
        inner.jobs.insert(id, rec);
        Ok(UpsertOutcome::Created)
    }

    /// An empty store on the system clock.
    pub fn new() -> Self {
        MemoryStore::with_clock(Arc::new(SystemClock))
    }

    /// An empty store on the given clock.
    pub fn with_clock(clock: Arc<dyn Clock>) -> Self {
        MemoryStore {
            clock,
            inner: Arc::default(),
        }
    }

    pub(super) fn inner(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Number of stored jobs.
    pub fn job_count(&self) -> usize {
        self.inner().jobs.len()
    }
}

#[async_trait]
impl Jobs for MemoryStore {
    fn name(&self) -> &'static str {
        "memory"
    }

    async fn now(&self) -> Result<Timestamp> {
        Ok(self.clock.now())
    }

    async fn create(&self, job: &Job, next_fire_at: Option<Timestamp>) -> Result<UpsertOutcome> {
        self.store_job(job, next_fire_at, true)
    }

    async fn upsert(&self, job: &Job, next_fire_at: Option<Timestamp>) -> Result<UpsertOutcome> {
        self.store_job(job, next_fire_at, false)
    }

    async fn upsert_many(&self, jobs: &[(Job, Option<Timestamp>)]) -> Result<Vec<UpsertOutcome>> {
        jobs.iter()
            .map(|(job, next)| self.store_job(job, *next, false))
            .collect()
    }

    async fn get(&self, id: &JobId) -> Result<Option<JobRecord>> {
        Ok(self.inner().jobs.get(id).cloned())
    }

    async fn list(&self, query: &JobQuery) -> Result<Page<JobRecord>> {
        use std::ops::Bound;
        let inner = self.inner();
        let from = match &query.after {
            Some(a) => Bound::Excluded(a.clone()),
            None => Bound::Unbounded,
        };
        Ok(Page::of(
            inner
                .jobs
                .range((from, Bound::Unbounded))
                .take(query.effective_limit())
                .map(|(_, v)| v.clone())
                .collect(),
        ))
    }

    async fn remove(&self, id: &JobId) -> Result<bool> {
        let mut inner = self.inner();
        match inner.jobs.remove(id) {
            Some(rec) => {
                inner.unindex(&rec);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    async fn set_enabled(
        &self,
        id: &JobId,
        enabled: bool,
        next_fire_at: Option<Timestamp>,
    ) -> Result<()> {
        let now = self.clock.now();
        self.inner()
            .with_job(id, |j| {
                if j.job.enabled() == enabled {
                    return;
                }
                j.job = Arc::new(j.job.with_enabled(enabled));
                j.version += 1;
                j.updated_at = now;
                if enabled {
                    j.next_fire_at = next_fire_at;
                    j.next_trigger = TriggerKind::Schedule;
                    j.attempt = 0;
                    j.resume_after = None;
                    j.next_payload = None;
                }
            })
            .ok_or_else(|| Error::not_found("job", id))
    }

    async fn trigger(
        &self,
        id: &JobId,
        at: Timestamp,
        payload: Option<&serde_json::Value>,
    ) -> Result<()> {
        self.inner()
            .with_job(id, |j| {
                j.next_fire_at = Some(at);
                j.next_trigger = TriggerKind::Manual;
                j.attempt = 0;
                j.resume_after = None;
                j.next_payload = payload.cloned();
            })
            .ok_or_else(|| Error::not_found("job", id))
    }

    async fn due(&self, query: &DueQuery) -> Result<Page<DueFire>> {
        use std::ops::Bound;
        let inner = self.inner();
        let from = match &query.after {
            Some(k) => Bound::Excluded((k.fire_at, k.job_id.clone())),
            None => Bound::Unbounded,
        };
        Ok(Page::of(
            inner
                .due
                .range((from, Bound::Unbounded))
                .take_while(|((at, _), _)| *at <= query.until)
                .take(query.limit)
                .map(|((at, id), e)| DueFire {
                    job_id: id.clone(),
                    job: e.job.clone(),
                    fire_at: *at,
                    version: e.version,
                    trigger: e.trigger,
                    attempt: e.attempt,
                    resume_after: e.resume_after,
                    payload: e.payload.clone(),
                })
                .collect(),
        ))
    }

    async fn start_runs(&self, runs: &[StartRun]) -> Result<Vec<StartOutcome>> {
        let now = self.clock.now();
        let mut inner = self.inner();
        Ok(runs.iter().map(|r| inner.start(r, now)).collect())
    }

    async fn finish_runs(&self, runs: &[FinishRun]) -> Result<Vec<FinishOutcome>> {
        let now = self.clock.now();
        let mut inner = self.inner();
        Ok(runs.iter().map(|f| inner.finish(f, now)).collect())
    }
}
