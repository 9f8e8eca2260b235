//! The runs an executor instance holds: admission under its block strategies and
//! capacity, execution, results kept for the schedulers to collect, kills.

use super::logs::{Logs, RunKey};
use crate::executor::{Execution, Executor, Outcome};
use crate::handler::{JobContext, JobHandler, RetryAdvice};
use crate::job::Job;
use crate::local_executor::LocalExecutor;
use crate::placement::BlockStrategy;
use crate::record::{RunId, TriggerKind};
use crate::remote::protocol::{Phase, RemoteOutcome, RunRequest, RunState};
use crate::time::Timestamp;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Why a run was not admitted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refused {
    /// The job names a handler this instance does not serve.
    UnknownHandler(String),
    /// Discarded: a run of the job is in progress (discard-later).
    Discarded,
    /// No free slot, or the job's queue is full.
    Busy,
    /// The same run id came with another token.
    Conflict,
    /// The request's job definition cannot be read.
    BadJob(String),
}

struct Entry {
    /// What the block strategy counts runs by: the job, or the job and shard.
    job_id: String,
    token: u64,
    attempt: u32,
    phase: Phase,
    outcome: Option<RemoteOutcome>,
    cancel: CancellationToken,
    /// Changes once, when the run ends.
    done: watch::Sender<bool>,
    ended: Option<Instant>,
    /// The admitted request, until the run starts (a queued run).
    pending: Option<Box<(RunRequest, Arc<Job>)>>,
}

#[derive(Default)]
struct Table {
    runs: HashMap<RunKey, Entry>,
    /// Per job (and shard): the run in progress (first) and the runs queued behind
    /// it.
    jobs: HashMap<String, VecDeque<RunKey>>,
    running: usize,
    /// Ended runs in the order they ended, to drop past the retention.
    ended: VecDeque<RunKey>,
}

/// Limits of an instance's run table.
#[derive(Clone, Debug)]
pub(crate) struct Limits {
    pub(crate) capacity: usize,
    pub(crate) max_queued_per_job: usize,
    pub(crate) retention: Duration,
    pub(crate) max_results: usize,
}

/// The runs of one instance.
pub(crate) struct Runs {
    table: Mutex<Table>,
    handlers: HashMap<String, Arc<dyn JobHandler>>,
    executor: LocalExecutor,
    limits: Limits,
    instance: Arc<str>,
    pub(crate) logs: Arc<Logs>,
}

impl Runs {
    pub(crate) fn new(
        handlers: HashMap<String, Arc<dyn JobHandler>>,
        limits: Limits,
        instance: Arc<str>,
        logs: Arc<Logs>,
    ) -> crate::error::Result<Runs> {
        let executor = LocalExecutor::new(crate::local_executor::LocalExecutorConfig {
            // Admission counts slots; the executor never makes an admitted run wait
            // (a covered run may still be ending beside the run that covers it).
            concurrency: limits.capacity * 2 + 16,
            slow_lane: crate::local_executor::SlowLaneConfig {
                concurrency: 0,
                ..Default::default()
            },
        })?;
        Ok(Runs {
            table: Mutex::default(),
            handlers,
            executor,
            limits,
            instance,
            logs,
        })
    }

    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The handlers served, sorted.
    pub(crate) fn handler_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.handlers.keys().cloned().collect();
        names.sort();
        names
    }

    /// (running, queued, capacity). Queued runs are found through the jobs in
    /// progress, not the whole table (which keeps ended runs' results).
    pub(crate) fn load(&self) -> (usize, usize, usize) {
        let t = self.table();
        let queued = t
            .jobs
            .values()
            .flatten()
            .filter(|id| t.runs.get(id).is_some_and(|e| e.phase == Phase::Queued))
            .count();
        (t.running, queued, self.limits.capacity)
    }

    /// Whether no run of `job` is in progress or queued here and a slot is free.
    pub(crate) fn idle_for(&self, job: &str) -> bool {
        let t = self.table();
        t.running < self.limits.capacity && t.jobs.get(job).is_none_or(|q| q.is_empty())
    }

    /// Admits a run under its block strategy: starts it, queues it, or refuses it.
    /// A request for a run already admitted (a retransmission) answers its state;
    /// an ended shard asked again with a later attempt (the shard's retry) runs again.
    pub(crate) fn admit(self: &Arc<Self>, req: RunRequest) -> Result<RunState, Refused> {
        if let Some(shard) = req.shard
            && shard.index >= shard.total
        {
            return Err(Refused::BadJob(format!(
                "shard.index {} must be below shard.total {}",
                shard.index, shard.total
            )));
        }
        // An executor needs the job's id, handler and payload; a definition sent
        // without a schedule runs as a one-shot at its fire.
        let mut definition = req.job.clone();
        if let Some(d) = definition.as_object_mut() {
            d.entry("schedule").or_insert_with(
                || serde_json::json!({"kind": "once", "at": Timestamp::from_millis(req.fire_at)}),
            );
        }
        let job = Job::from_stored(&definition.to_string())
            .map_err(|e| Refused::BadJob(e.to_string()))?;
        if !self.handlers.contains_key(job.handler()) {
            return Err(Refused::UnknownHandler(job.handler().to_string()));
        }
        // Shards of one job are apart for the block strategy: each is its own work.
        let job_id = match req.shard {
            Some(shard) => format!("{}#{}", job.id(), shard.index),
            None => job.id().to_string(),
        };
        let key: RunKey = (req.run_id, req.shard.map(|s| s.index));
        let mut t = self.table();
        self.forget_old(&mut t);
        if let Some(e) = t.runs.get(&key) {
            if e.token != req.token {
                return Err(Refused::Conflict);
            }
            if !(e.phase == Phase::Done && req.attempt > e.attempt && key.1.is_some()) {
                return Ok(state_of(key, e));
            }
            t.runs.remove(&key);
            t.ended.retain(|k| *k != key);
            self.logs.forget(key);
        }
        let in_progress = t.jobs.get(&job_id).map_or(0, VecDeque::len);
        let start_now = match (in_progress, req.block) {
            (0, _) => true,
            (_, BlockStrategy::DiscardLater) => return Err(Refused::Discarded),
            (_, BlockStrategy::CoverEarly) => {
                for id in t.jobs.get(&job_id).into_iter().flatten() {
                    if let Some(e) = t.runs.get(id) {
                        e.cancel.cancel();
                    }
                }
                true
            }
            (n, BlockStrategy::Serial) => {
                if n > self.limits.max_queued_per_job {
                    return Err(Refused::Busy);
                }
                false
            }
        };
        if start_now && t.running >= self.limits.capacity {
            return Err(Refused::Busy);
        }
        let (done, _) = watch::channel(false);
        let job = Arc::new(job);
        let entry = Entry {
            job_id: job_id.clone(),
            token: req.token,
            attempt: req.attempt,
            phase: if start_now {
                Phase::Running
            } else {
                Phase::Queued
            },
            outcome: None,
            cancel: CancellationToken::new(),
            done,
            ended: None,
            pending: (!start_now).then(|| Box::new((req.clone(), job.clone()))),
        };
        let queue = t.jobs.entry(job_id).or_default();
        if start_now {
            // A covered run stays in the queue until it ends; the new one runs
            // beside it and the queue's order no longer matters for it.
            queue.push_front(key);
        } else {
            queue.push_back(key);
        }
        let state = state_of(key, &entry);
        let cancel = entry.cancel.clone();
        t.runs.insert(key, entry);
        if start_now {
            t.running += 1;
            drop(t);
            self.spawn(req, job, cancel);
        }
        Ok(state)
    }

    fn spawn(self: &Arc<Self>, req: RunRequest, job: Arc<Job>, cancel: CancellationToken) {
        let this = self.clone();
        let handler = self.handlers[job.handler()].clone();
        let logs = self.logs.clone();
        let key: RunKey = (req.run_id, req.shard.map(|s| s.index));
        logs.open(key);
        tokio::spawn(async move {
            let span = tracing::info_span!(
                super::logs::RUN_SPAN,
                run_id = req.run_id,
                shard = key.1,
                sink = logs.sink(),
                job = %job.id()
            );
            if let Some(t) = &req.traceparent {
                crate::trace::set_parent(&span, t);
            }
            let ctx = JobContext {
                job: job.clone(),
                run_id: RunId(req.run_id),
                fire_at: Timestamp::from_millis(req.fire_at),
                attempt: req.attempt,
                trigger: TriggerKind::parse(&req.trigger).unwrap_or_default(),
                token: req.token,
                node_id: this.instance.clone(),
                cancel,
                deadline: req
                    .timeout_ms
                    .map(|ms| Instant::now() + Duration::from_millis(ms)),
                shard: req.shard,
                trace: crate::trace::of(&span),
                upstream: req.upstream.clone(),
                log: crate::capture::RunLogger::to(logs.sink(), key),
                executed_on: Default::default(),
            };
            let exec = Execution {
                ctx,
                handler,
                timeout: req.timeout_ms.map(Duration::from_millis),
            };
            let outcome = tracing::Instrument::instrument(this.executor.execute(exec), span).await;
            this.ended(key, remote_outcome(outcome));
        });
    }

    /// Records a run's end, wakes its waiters and starts the next queued run of its
    /// job.
    fn ended(self: &Arc<Self>, key: RunKey, outcome: RemoteOutcome) {
        self.logs.close(key);
        let mut t = self.table();
        let Some(e) = t.runs.get_mut(&key) else {
            return;
        };
        e.phase = Phase::Done;
        e.outcome = Some(outcome);
        e.ended = Some(Instant::now());
        let _ = e.done.send(true);
        let job_id = e.job_id.clone();
        t.running = t.running.saturating_sub(1);
        t.ended.push_back(key);
        let mut next = None;
        if let Some(q) = t.jobs.get_mut(&job_id) {
            q.retain(|k| *k != key);
            if let Some(&head) = q.front() {
                next = Some(head);
            }
            if q.is_empty() {
                t.jobs.remove(&job_id);
            }
        }
        if let Some(head) = next
            && let Some(e) = t.runs.get_mut(&head)
            && e.phase == Phase::Queued
            && let Some(p) = e.pending.take()
        {
            e.phase = Phase::Running;
            let cancel = e.cancel.clone();
            t.running += 1;
            drop(t);
            let (req, job) = *p;
            self.spawn(req, job, cancel);
        }
    }

    /// Drops ended runs past the retention or past the bound on kept results.
    fn forget_old(&self, t: &mut Table) {
        while let Some(&id) = t.ended.front() {
            let old = t
                .runs
                .get(&id)
                .and_then(|e| e.ended)
                .is_none_or(|at| at.elapsed() > self.limits.retention);
            if !old && t.ended.len() <= self.limits.max_results {
                break;
            }
            t.ended.pop_front();
            t.runs.remove(&id);
            self.logs.forget(id);
        }
    }

    /// A run's state, waiting up to `wait` for it to end. `None`: unknown run or
    /// another token.
    pub(crate) async fn state(&self, key: RunKey, token: u64, wait: Duration) -> Option<RunState> {
        let mut done = {
            let t = self.table();
            let e = t.runs.get(&key).filter(|e| e.token == token)?;
            if e.phase == Phase::Done || wait.is_zero() {
                return Some(state_of(key, e));
            }
            e.done.subscribe()
        };
        let _ = tokio::time::timeout(wait, done.wait_for(|d| *d)).await;
        let t = self.table();
        t.runs
            .get(&key)
            .filter(|e| e.token == token)
            .map(|e| state_of(key, e))
    }

    /// Cancels a queued or running run. `None`: unknown run or another token.
    pub(crate) fn kill(self: &Arc<Self>, key: RunKey, token: u64) -> Option<bool> {
        let mut t = self.table();
        let e = t.runs.get_mut(&key).filter(|e| e.token == token)?;
        match e.phase {
            Phase::Done => Some(false),
            Phase::Running => {
                e.cancel.cancel();
                Some(true)
            }
            Phase::Queued => {
                // Never started: it ends here (counted as running for `ended`, which
                // releases one slot), and the run behind it may start.
                e.pending = None;
                e.cancel.cancel();
                e.phase = Phase::Running;
                t.running += 1;
                drop(t);
                self.ended(key, remote_outcome(Outcome::Cancelled));
                Some(true)
            }
        }
    }

    /// Whether a run with this token is known here.
    pub(crate) fn knows(&self, key: RunKey, token: u64) -> bool {
        self.table()
            .runs
            .get(&key)
            .is_some_and(|e| e.token == token)
    }

    /// Whether the run has ended.
    pub(crate) fn is_done(&self, key: RunKey) -> bool {
        self.table()
            .runs
            .get(&key)
            .is_none_or(|e| e.phase == Phase::Done)
    }
}

fn state_of(key: RunKey, e: &Entry) -> RunState {
    RunState {
        run_id: key.0,
        phase: e.phase.clone(),
        outcome: e.outcome.clone(),
        log: None,
    }
}

/// The wire form of an outcome.
pub(crate) fn remote_outcome(o: Outcome) -> RemoteOutcome {
    let (status, error, retry) = match o {
        Outcome::Succeeded => ("succeeded", None, None),
        Outcome::Failed(e) => {
            let retry = match e.retry() {
                RetryAdvice::Policy => "policy".to_string(),
                RetryAdvice::Never => "never".to_string(),
                RetryAdvice::After(d) => format!("after:{}", d.as_millis()),
            };
            ("failed", Some(e.chain().to_string()), Some(retry))
        }
        Outcome::TimedOut => ("timed_out", None, None),
        Outcome::Cancelled => ("cancelled", None, None),
        Outcome::Panicked(m) => ("panicked", Some(m), None),
    };
    RemoteOutcome {
        status: status.to_string(),
        error,
        retry,
    }
}

impl Refused {
    /// Status code, wire code and message.
    pub(crate) fn answer(&self) -> (u16, &'static str, String) {
        match self {
            Refused::UnknownHandler(h) => (
                422,
                "unknown_handler",
                format!("this instance serves no handler {h:?}"),
            ),
            Refused::Discarded => (
                409,
                "discarded",
                "a run of this job is in progress here (block strategy discard_later)".into(),
            ),
            Refused::Busy => (429, "busy", "no free slot on this instance".into()),
            Refused::Conflict => (
                409,
                "conflict",
                "this run id was admitted with another token".into(),
            ),
            Refused::BadJob(m) => (400, "bad_request", m.clone()),
        }
    }
}
