//! [`MemoryStore`]: the state behind one mutex, and its [`Jobs`] part.

use super::latency::{StoreLatency, answer, delay};
use crate::error::{Error, Result};
use crate::job::{Job, JobId};
use crate::record::*;
use crate::store::rules::{self, JobState, RunState};
use crate::store::{Applied, DueQuery, JobChange, JobQuery, Jobs, Page};
use crate::time::{Clock, SystemClock, Timestamp};
use async_trait::async_trait;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};

/// What a due-index entry keeps of its job, so a due scan never touches the job map.
#[derive(Debug)]
struct DueEntry {
    job: Arc<Job>,
    version: u64,
    fire: FireState,
}

#[derive(Debug, Default)]
pub(super) struct Inner {
    pub(super) jobs: BTreeMap<JobId, JobRecord>,
    /// `(next_fire_at, id)` of every enabled job with a next fire and no running run,
    /// with what `due` returns besides, so a scan never touches the job map.
    due: BTreeMap<(Timestamp, JobId), DueEntry>,
    pub(super) runs: BTreeMap<RunId, RunRecord>,
    /// Runs' log lines by run and offset.
    pub(super) lines: BTreeMap<(RunId, u64), String>,
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
    /// Runtime accounts and tokens by kind and name.
    pub(super) credentials: BTreeMap<(CredentialKind, String), CredentialRecord>,
    /// Releases queued per job, oldest first.
    pub(super) releases: BTreeMap<JobId, Vec<Queued>>,
    /// The leases kept with the jobs ([`JobLeases`](crate::store::JobLeases)): holder
    /// and expiry; the token is the job's `last_token`.
    pub(super) leases: std::collections::HashMap<JobId, (String, Timestamp)>,
}

/// A queued release: its upstream run (the key's source and instant), that run
/// as stored (JSON), when it was written.
#[derive(Debug)]
pub(super) struct Queued {
    pub(super) from: crate::dependency::UpstreamRun,
    pub(super) upstream: String,
    pub(super) released_at: Timestamp,
    /// When a `waiting` alarm was raised for its job and instant.
    pub(super) alarmed_at: Option<Timestamp>,
    /// When a job that joins by a window took it: kept so a later release of the
    /// window is not queued (see [`rules::WINDOW_KEPT`](crate::store::rules::WINDOW_KEPT)).
    pub(super) taken_at: Option<Timestamp>,
}

impl Inner {
    fn unindex(&mut self, rec: &JobRecord) {
        if let Some(at) = rec.next_fire_at() {
            self.due.remove(&(at, rec.job.id().clone()));
        }
    }

    fn index(&mut self, rec: &JobRecord) {
        if let (Some(fire), true, None) = (&rec.next, rec.job.enabled(), rec.running) {
            let entry = DueEntry {
                job: rec.job.clone(),
                version: rec.version,
                fire: fire.clone(),
            };
            self.due.insert((fire.at, rec.job.id().clone()), entry);
        }
    }

    /// Appends an audit entry stamped `at`.
    pub(super) fn append_audit(&mut self, entry: &AuditEntry, at: Timestamp) {
        self.next_audit += 1;
        let id = self.next_audit;
        self.audit.push(AuditRecord {
            id,
            at,
            entry: entry.clone(),
        });
    }

    /// Applies `f` to a job, keeping the due index in step.
    pub(super) fn with_job<T>(
        &mut self,
        id: &JobId,
        f: impl FnOnce(&mut JobRecord) -> T,
    ) -> Option<T> {
        let mut rec = self.jobs.remove(id)?;
        self.unindex(&rec);
        let out = f(&mut rec);
        self.index(&rec);
        self.jobs.insert(id.clone(), rec);
        Some(out)
    }

    pub(super) fn enqueue(&mut self, events: &[AlarmEvent], now: Timestamp) {
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

    /// `fresh`: the runs this batch recorded, which a later item of the batch is
    /// never the repeat of (items of one job in one batch: the first decides).
    pub(super) fn start(
        &mut self,
        r: &StartRun,
        now: Timestamp,
        fresh: &mut Vec<RunId>,
    ) -> StartOutcome {
        let state = self.jobs.get(&r.job_id).map(JobState::from);
        // Only a job whose last token is the request's can be running the request's
        // run (so the batch's own runs are searched only then).
        let running = state
            .as_ref()
            .filter(|j| j.last_token == r.token)
            .and_then(|j| j.running)
            .filter(|id| !fresh.contains(id))
            .and_then(|id| self.runs.get(&id));
        match rules::start(state.as_ref(), running.map(RunState::from).as_ref(), r) {
            Err(refusal) => return StartOutcome::Refused(refusal),
            Ok(rules::Admit::Recorded) => {
                let run = running.expect("a recorded start has its run");
                return StartOutcome::Started {
                    run_id: run.id,
                    started_at: run.started_at,
                };
            }
            Ok(rules::Admit::Record) => {}
        }
        self.next_run += 1;
        let run_id = RunId(self.next_run);
        self.with_job(&r.job_id, |j| {
            j.last_token = r.token;
            j.running = Some(run_id);
        });
        self.running.insert(run_id);
        fresh.push(run_id);
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
                executor: None,
                covers: r.covers,
                context: r.context.clone(),
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
                j.next = f.next.clone();
            }
        });
        match f.lease {
            LeaseEnd::Untouched => {}
            LeaseEnd::Release => {
                self.leases.remove(&f.job_id);
            }
            LeaseEnd::Keep(ttl) => {
                if let Some((_, until)) = self.leases.get_mut(&f.job_id) {
                    *until = now + ttl;
                }
            }
        }
        self.running.remove(&f.run_id);
        if let Some(run) = self.runs.get_mut(&f.run_id) {
            run.status = f.status;
            run.ended_at = Some(now);
            run.error = f.error.clone();
            run.will_retry = f.will_retry;
            run.executor = f.executor.clone();
        }
        self.enqueue(&f.alarms, now);
        for r in &f.releases {
            self.queue(r, now);
        }
        for r in &f.releases {
            self.take_release(&r.job, now);
        }
        self.take_release(&f.job_id, now);
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
    pub(super) latency: Option<StoreLatency>,
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
        inner: &mut Inner,
        job: &Job,
        next_fire_at: Option<Timestamp>,
        context: &FireContext,
        only_if_absent: bool,
        now: Timestamp,
    ) -> UpsertOutcome {
        let id = job.id().clone();
        let next =
            next_fire_at.map(|at| FireState::fresh(at, TriggerKind::Schedule, context.clone()));
        let outcome = inner.with_job(&id, |j| {
            if only_if_absent {
                return UpsertOutcome::Kept;
            }
            if *j.job == *job {
                return UpsertOutcome::Unchanged;
            }
            j.job = Arc::new(job.clone());
            j.version += 1;
            j.next = next.clone();
            j.updated_at = now;
            UpsertOutcome::Updated
        });
        if let Some(outcome) = outcome {
            return outcome;
        }
        let rec = JobRecord {
            job: Arc::new(job.clone()),
            version: 1,
            next,
            last_token: 0,
            running: None,
            created_at: now,
            updated_at: now,
        };
        inner.index(&rec);
        inner.jobs.insert(id, rec);
        UpsertOutcome::Created
    }

    /// Applies `change` to `inner` (see [`Jobs::apply`]), first returning to the queue
    /// the releases of a taken, unstarted next fire the change replaces
    /// ([`rules::returns_release`]), and letting the job take one after.
    fn change(inner: &mut Inner, change: &JobChange, now: Timestamp) -> Result<Applied> {
        let id = change.job_id().clone();
        let replaces = matches!(
            change,
            JobChange::Upsert { .. }
                | JobChange::Pause { .. }
                | JobChange::Resume { .. }
                | JobChange::Trigger { .. }
        );
        let returned: Vec<crate::dependency::Release> = inner
            .jobs
            .get(&id)
            .filter(|r| replaces && rules::returns_release(r.running.is_some(), r.next_trigger()))
            .and_then(|r| r.next.as_ref())
            .map(|f| {
                f.context
                    .upstream
                    .iter()
                    .map(|u| crate::dependency::Release::new(id.clone(), u.clone()))
                    .collect()
            })
            .unwrap_or_default();
        let before = inner.jobs.get(&id).map(|r| (r.version, r.next.clone()));
        let applied = Self::apply_change(inner, change, now)?;
        if matches!(change, JobChange::Resume { .. }) {
            inner.take_release(&id, now);
        }
        if matches!(change, JobChange::Pause { .. }) {
            inner.with_job(&id, |j| {
                if j.next_trigger() == TriggerKind::Upstream {
                    j.next = None;
                }
            });
        }
        let after = inner.jobs.get(&id).map(|r| (r.version, r.next.clone()));
        if !returned.is_empty() && before != after {
            for r in &returned {
                inner.requeue(r, now);
            }
            inner.take_release(&id, now);
        }
        Ok(applied)
    }

    fn apply_change(inner: &mut Inner, change: &JobChange, now: Timestamp) -> Result<Applied> {
        let missing = |id: &JobId| Error::not_found("job", id);
        Ok(match change {
            JobChange::Upsert { job, next, context } => {
                Applied::Upsert(Self::store_job(inner, job, *next, context, false, now))
            }
            JobChange::Create { job, next, context } => {
                Applied::Upsert(Self::store_job(inner, job, *next, context, true, now))
            }
            JobChange::Remove { id } => match inner.jobs.remove(id) {
                Some(rec) => {
                    inner.unindex(&rec);
                    inner.releases.remove(id);
                    inner.leases.remove(id);
                    Applied::Removed(true)
                }
                None => Applied::Removed(false),
            },
            JobChange::Pause { id } => inner
                .with_job(id, |j| {
                    if j.job.enabled() {
                        j.job = Arc::new(j.job.with_enabled(false));
                        j.version += 1;
                        j.updated_at = now;
                    }
                    Applied::Done
                })
                .ok_or_else(|| missing(id))?,
            JobChange::Resume { id, next } => inner
                .with_job(id, |j| {
                    if !j.job.enabled() {
                        j.job = Arc::new(j.job.with_enabled(true));
                        j.version += 1;
                        j.updated_at = now;
                        j.next = next.clone();
                    }
                    Applied::Done
                })
                .ok_or_else(|| missing(id))?,
            JobChange::Trigger { id, fire } => inner
                .with_job(id, |j| {
                    j.next = Some(fire.clone());
                    Applied::Done
                })
                .ok_or_else(|| missing(id))?,
        })
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
            latency: None,
        }
    }

    /// The same store (its state shared with `self`) answering as `latency` says:
    /// each call on the engine's path waits for a connection and its time first.
    pub fn with_latency(&self, latency: StoreLatency) -> Self {
        MemoryStore {
            latency: Some(latency),
            ..self.clone()
        }
    }

    pub(super) fn inner(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Number of stored jobs.
    pub fn job_count(&self) -> usize {
        self.inner().jobs.len()
    }

    /// This store's leases as a lock provider: a scheduler given both keeps each
    /// job's lease with the job ([`JobLeases`](crate::store::JobLeases)), so a claim
    /// and its start are one call. Without a scheduler the provider is an ordinary
    /// [`LocalLocks`](super::LocalLocks) on the store's clock and latency, keyed as
    /// the store's leases are named.
    pub fn locks(&self) -> super::LocalLocks {
        let locks = super::LocalLocks::with_clock(self.clock.clone())
            .homed(crate::store::JobLeases::home(self));
        match &self.latency {
            Some(l) => locks.with_latency(l.clone()),
            None => locks,
        }
    }

    /// Where its leases live, unique to this store and its clones.
    pub(super) fn home_name(&self) -> String {
        format!("memory {:p}", Arc::as_ptr(&self.inner))
    }
}

#[async_trait]
impl Jobs for MemoryStore {
    fn name(&self) -> &'static str {
        "memory"
    }

    async fn now(&self) -> Result<Timestamp> {
        delay(&self.latency, 0).await;
        Ok(self.clock.now())
    }

    async fn apply(&self, change: &JobChange, audit: Option<&AuditEntry>) -> Result<Applied> {
        delay(&self.latency, 1).await;
        let now = self.clock.now();
        let mut inner = self.inner();
        let applied = Self::change(&mut inner, change, now)?;
        if let Some(entry) = audit.filter(|_| applied.changed()) {
            inner.append_audit(entry, now);
        }
        Ok(applied)
    }

    async fn upsert_many(&self, jobs: &[(Job, Option<Timestamp>)]) -> Result<Vec<UpsertOutcome>> {
        delay(&self.latency, jobs.len()).await;
        let now = self.clock.now();
        let mut inner = self.inner();
        Ok(jobs
            .iter()
            .map(|(job, next)| {
                Self::store_job(&mut inner, job, *next, &FireContext::default(), false, now)
            })
            .collect())
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

    async fn due(&self, query: &DueQuery) -> Result<Page<DueFire>> {
        use std::ops::Bound;
        // A read: the call's cost, not the rows'.
        delay(&self.latency, 0).await;
        let now = self.clock.now();
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
                // A job whose lease another holder keeps with it is not claimable.
                .filter(|((_, id), _)| inner.leases.get(id).is_none_or(|(_, u)| *u <= now))
                .take(query.limit)
                .map(|((_, id), e)| DueFire {
                    job_id: id.clone(),
                    job: e.job.clone(),
                    version: e.version,
                    fire: e.fire.clone(),
                })
                .collect(),
        ))
    }

    async fn start_runs(&self, runs: &[StartRun]) -> Result<Vec<StartOutcome>> {
        delay(&self.latency, runs.len()).await;
        let now = self.clock.now();
        let mut inner = self.inner();
        let mut fresh = Vec::new();
        let out = runs
            .iter()
            .map(|r| inner.start(r, now, &mut fresh))
            .collect();
        drop(inner);
        answer(&self.latency, "start_runs")?;
        Ok(out)
    }

    async fn finish_runs(&self, runs: &[FinishRun]) -> Result<Vec<FinishOutcome>> {
        delay(&self.latency, runs.len()).await;
        let now = self.clock.now();
        let mut inner = self.inner();
        let out = runs.iter().map(|f| inner.finish(f, now)).collect();
        drop(inner);
        answer(&self.latency, "finish_runs")?;
        Ok(out)
    }

    async fn releases(
        &self,
        job: Option<&JobId>,
        limit: usize,
    ) -> Result<Vec<crate::dependency::QueuedRelease>> {
        Ok(self.inner().queued_releases(job, limit))
    }

    async fn queue_releases(
        &self,
        releases: &[crate::dependency::Release],
        audit: Option<&AuditEntry>,
    ) -> Result<()> {
        let now = self.clock.now();
        self.inner().queue_releases(releases, audit, now);
        Ok(())
    }

    async fn drop_releases(
        &self,
        job: &JobId,
        fire_at: Timestamp,
        audit: Option<&AuditEntry>,
    ) -> Result<u64> {
        let now = self.clock.now();
        Ok(self.inner().drop_releases(job, fire_at, audit, now))
    }

    async fn take_releases(&self, limit: usize) -> Result<u64> {
        let now = self.clock.now();
        Ok(self.inner().take_releases(limit, now))
    }

    async fn alarm_waiting(
        &self,
        job: &JobId,
        fire_at: Timestamp,
        event: &AlarmEvent,
    ) -> Result<bool> {
        let now = self.clock.now();
        Ok(self.inner().alarm_waiting(job, fire_at, event, now))
    }

    fn job_leases(&self) -> Option<&dyn crate::store::JobLeases> {
        Some(self)
    }
}
