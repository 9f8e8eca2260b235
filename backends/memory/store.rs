use crate::error::{Error, Result};
use crate::job::{Job, JobId};
use crate::record::*;
use crate::store::JobStore;
use crate::time::{Clock, SystemClock, Timestamp};
use async_trait::async_trait;
use chrono::NaiveDate;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// What a due-index entry keeps of its job, so a due scan never touches the job map.
#[derive(Debug)]
struct DueEntry {
    job: Arc<Job>,
    version: u64,
    trigger: TriggerKind,
    attempt: u32,
    resume_after: Option<Timestamp>,
}

#[derive(Debug, Default)]
struct Inner {
    jobs: BTreeMap<JobId, JobRecord>,
    /// `(next_fire_at, id)` of every enabled job with a next fire and no running run,
    /// with what `due` returns besides (definition, version, trigger, attempt), so a
    /// scan never touches the job map.
    due: BTreeMap<(Timestamp, JobId), DueEntry>,
    runs: BTreeMap<RunId, RunRecord>,
    /// Ids of runs in `Running` state.
    running: BTreeSet<RunId>,
    next_run: i64,
    nodes: BTreeMap<String, NodeRecord>,
    alarms: BTreeMap<AlarmId, AlarmRecord>,
    next_alarm: i64,
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

    fn enqueue(&mut self, events: &[AlarmEvent], now: Timestamp) -> Vec<AlarmId> {
        events
            .iter()
            .map(|e| {
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
                id
            })
            .collect()
    }

    fn start(&mut self, r: &StartRun, now: Timestamp) -> StartOutcome {
        let refusal = match self.jobs.get(&r.job_id) {
            None => Some(StartRefusal::NotFound),
            Some(j) if !j.job.enabled() => Some(StartRefusal::Disabled),
            Some(j) if j.version != r.version => Some(StartRefusal::Changed),
            Some(j) if j.running.is_some() => Some(StartRefusal::Running),
            Some(j) if j.next_fire_at != Some(r.fire_at) => Some(StartRefusal::NotDue),
            Some(j) if j.last_token > r.token => Some(StartRefusal::Fenced {
                current: j.last_token,
            }),
            Some(_) => None,
        };
        if let Some(refusal) = refusal {
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
            },
        );
        StartOutcome::Started {
            run_id,
            started_at: now,
        }
    }

    fn finish(&mut self, f: &FinishRun, now: Timestamp) -> FinishOutcome {
        let Some(run) = self.runs.get(&f.run_id) else {
            return FinishOutcome::Refused(FinishRefusal::NotFound);
        };
        if run.status != RunStatus::Running {
            return FinishOutcome::Refused(FinishRefusal::NotRunning);
        }
        let fire_at = run.fire_at;
        let current = self.jobs.get(&f.job_id).map_or(run.token, |j| j.last_token);
        let token_ok = if f.takeover {
            f.token >= current && f.token >= run.token
        } else {
            f.token == run.token && f.token >= current
        };
        if !token_ok || run.job_id != f.job_id {
            return FinishOutcome::Refused(FinishRefusal::Fenced { current });
        }
        let rescheduled = self
            .with_job(&f.job_id, |j| {
                j.last_token = f.token;
                if j.running == Some(f.run_id) {
                    j.running = None;
                }
                let apply = j.version == f.version && j.next_fire_at == Some(fire_at);
                if apply {
                    j.next_fire_at = f.next.at;
                    j.next_trigger = f.next.trigger;
                    j.attempt = f.next.attempt;
                    j.resume_after = f.next.resume_after;
                }
                apply
            })
            .unwrap_or(false);
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

/// A complete [`JobStore`] in process memory.
///
/// Cloning shares the same state, so several schedulers in one process can use one
/// store as a cluster would use one database.
#[derive(Debug, Clone)]
pub struct MemoryStore {
    clock: Arc<dyn Clock>,
    inner: Arc<Mutex<Inner>>,
}

impl Default for MemoryStore {
    fn default() -> Self {
        MemoryStore::new()
    }
}

impl MemoryStore {
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

    fn inner(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Number of stored jobs.
    pub fn job_count(&self) -> usize {
        self.inner().jobs.len()
    }
}

#[async_trait]
impl JobStore for MemoryStore {
    fn name(&self) -> &'static str {
        "memory"
    }

    async fn now(&self) -> Result<Timestamp> {
        Ok(self.clock.now())
    }

    async fn upsert(&self, job: &Job, next_fire_at: Option<Timestamp>) -> Result<UpsertOutcome> {
        let now = self.clock.now();
        let mut inner = self.inner();
        let id = job.id().clone();
        let outcome = inner.with_job(&id, |j| {
            if *j.job == *job {
                return UpsertOutcome::Unchanged;
            }
            j.job = Arc::new(job.clone());
            j.version += 1;
            j.next_fire_at = next_fire_at;
            j.next_trigger = TriggerKind::Schedule;
            j.attempt = 0;
            j.resume_after = None;
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
            last_token: 0,
            running: None,
            created_at: now,
            updated_at: now,
        };
        inner.index(&rec);
        inner.jobs.insert(id, rec);
        Ok(UpsertOutcome::Created)
    }

    async fn get(&self, id: &JobId) -> Result<Option<JobRecord>> {
        Ok(self.inner().jobs.get(id).cloned())
    }

    async fn list(&self, after: Option<&JobId>, limit: usize) -> Result<Vec<JobRecord>> {
        let inner = self.inner();
        let iter: Box<dyn Iterator<Item = &JobRecord>> = match after {
            Some(a) => Box::new(
                inner
                    .jobs
                    .range::<JobId, _>((std::ops::Bound::Excluded(a), std::ops::Bound::Unbounded))
                    .map(|(_, v)| v),
            ),
            None => Box::new(inner.jobs.values()),
        };
        Ok(iter.take(limit).cloned().collect())
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
                }
            })
            .ok_or_else(|| Error::not_found("job", id))
    }

    async fn trigger(&self, id: &JobId, at: Timestamp) -> Result<()> {
        self.inner()
            .with_job(id, |j| {
                j.next_fire_at = Some(at);
                j.next_trigger = TriggerKind::Manual;
                j.attempt = 0;
                j.resume_after = None;
            })
            .ok_or_else(|| Error::not_found("job", id))
    }

    async fn due(
        &self,
        until: Timestamp,
        after: Option<&DueKey>,
        limit: usize,
    ) -> Result<Vec<DueFire>> {
        use std::ops::Bound;
        let inner = self.inner();
        let from = match after {
            Some(k) => Bound::Excluded((k.fire_at, k.job_id.clone())),
            None => Bound::Unbounded,
        };
        Ok(inner
            .due
            .range((from, Bound::Unbounded))
            .take_while(|((at, _), _)| *at <= until)
            .take(limit)
            .map(|((at, id), e)| DueFire {
                job_id: id.clone(),
                job: e.job.clone(),
                fire_at: *at,
                version: e.version,
                trigger: e.trigger,
                attempt: e.attempt,
                resume_after: e.resume_after,
            })
            .collect())
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

    async fn runs(&self, query: &RunQuery) -> Result<Vec<RunRecord>> {
        let inner = self.inner();
        Ok(inner
            .runs
            .values()
            .rev()
            .filter(|r| query.matches(r))
            .take(query.effective_limit())
            .cloned()
            .collect())
    }

    async fn purge_runs(&self, before: Timestamp) -> Result<u64> {
        let mut inner = self.inner();
        let n = inner.runs.len();
        inner
            .runs
            .retain(|_, r| r.ended_at.is_none_or(|e| e >= before));
        Ok((n - inner.runs.len()) as u64)
    }

    async fn daily_stats(&self, from: NaiveDate, to: NaiveDate) -> Result<Vec<DailyStats>> {
        let inner = self.inner();
        let mut days: BTreeMap<NaiveDate, DailyStats> = BTreeMap::new();
        for r in inner.runs.values() {
            let day = r.started_at.to_datetime().date_naive();
            if day >= from && day <= to {
                days.entry(day)
                    .or_insert_with(|| DailyStats {
                        day,
                        ..DailyStats::default()
                    })
                    .count(r.status);
            }
        }
        Ok(days.into_values().collect())
    }

    async fn heartbeat(&self, node: &NodeInfo) -> Result<Timestamp> {
        let now = self.clock.now();
        self.inner().nodes.insert(
            node.node_id.clone(),
            NodeRecord {
                info: node.clone(),
                last_beat: now,
            },
        );
        Ok(now)
    }

    async fn nodes(&self) -> Result<Vec<NodeRecord>> {
        Ok(self.inner().nodes.values().cloned().collect())
    }

    async fn reap_nodes(&self, silent_for: Duration) -> Result<Vec<String>> {
        let cutoff = self.clock.now() - silent_for;
        let mut inner = self.inner();
        let dead: Vec<String> = inner
            .nodes
            .values()
            .filter(|n| n.last_beat < cutoff)
            .map(|n| n.info.node_id.clone())
            .collect();
        for id in &dead {
            inner.nodes.remove(id);
        }
        Ok(dead)
    }

    async fn deregister(&self, node_id: &str) -> Result<bool> {
        Ok(self.inner().nodes.remove(node_id).is_some())
    }

    async fn orphaned_runs(&self, limit: usize) -> Result<Vec<RunRecord>> {
        let inner = self.inner();
        Ok(inner
            .running
            .iter()
            .filter_map(|id| inner.runs.get(id))
            .filter(|r| !inner.nodes.contains_key(&r.node))
            .take(limit)
            .cloned()
            .collect())
    }

    async fn enqueue_alarms(&self, events: &[AlarmEvent]) -> Result<Vec<AlarmId>> {
        let now = self.clock.now();
        Ok(self.inner().enqueue(events, now))
    }

    async fn claim_alarms(
        &self,
        owner: &str,
        limit: usize,
        lease: Duration,
    ) -> Result<Vec<AlarmRecord>> {
        let now = self.clock.now();
        let mut inner = self.inner();
        let mut out = Vec::new();
        for rec in inner.alarms.values_mut() {
            if out.len() >= limit {
                break;
            }
            let claimable = match rec.status {
                AlarmStatus::Pending | AlarmStatus::Failed => {
                    rec.next_attempt_at.is_some_and(|t| t <= now)
                }
                AlarmStatus::Sending => rec.claim_until.is_some_and(|t| t <= now),
                AlarmStatus::Sent | AlarmStatus::NotNeeded => false,
            };
            if claimable {
                rec.status = AlarmStatus::Sending;
                rec.claimed_by = Some(owner.to_string());
                rec.claim_until = Some(now + lease);
                rec.attempts += 1;
                out.push(rec.clone());
            }
        }
        Ok(out)
    }

    async fn complete_alarm(
        &self,
        id: AlarmId,
        owner: &str,
        delivery: &AlarmDelivery,
    ) -> Result<bool> {
        let mut inner = self.inner();
        let Some(rec) = inner.alarms.get_mut(&id) else {
            return Ok(false);
        };
        if rec.status != AlarmStatus::Sending || rec.claimed_by.as_deref() != Some(owner) {
            return Ok(false);
        }
        rec.claimed_by = None;
        rec.claim_until = None;
        match delivery {
            AlarmDelivery::Sent => {
                rec.status = AlarmStatus::Sent;
                rec.next_attempt_at = None;
            }
            AlarmDelivery::NotNeeded => {
                rec.status = AlarmStatus::NotNeeded;
                rec.next_attempt_at = None;
            }
            AlarmDelivery::Failed { error, retry_at } => {
                rec.status = AlarmStatus::Failed;
                rec.next_attempt_at = *retry_at;
                rec.last_error = Some(error.clone());
            }
        }
        Ok(true)
    }

    async fn alarms(&self, status: Option<AlarmStatus>, limit: usize) -> Result<Vec<AlarmRecord>> {
        Ok(self
            .inner()
            .alarms
            .values()
            .rev()
            .filter(|a| status.is_none_or(|s| a.status == s))
            .take(limit)
            .cloned()
            .collect())
    }
}
