//! The randomized scheduling simulation: one seed drives a workload (recurring jobs,
//! one-shot streams and bursts, slow and failing handlers, pauses and removals, 1-3
//! nodes), [`run`] plays it on tokio's paused clock against the memory store, and
//! [`check`] compares what ran with what the schedules say should have, without
//! using the engine's own scheduling code.

pub mod check;
pub mod deps;
pub mod workload;

use jobwheel::memory::{LocalLocks, MemoryStore, StoreLatency};
use jobwheel::{
    Clock, EngineMetrics, Job, JobContext, JobError, LocalExecutor, LocalExecutorConfig, RunQuery,
    RunRecord, Scheduler, SchedulerConfig, SlowLaneConfig, Timestamp, TokioClock, TriggerKind,
};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use workload::{Op, Workload};

/// One handler execution, as the handler saw it.
#[derive(Debug, Clone)]
pub struct Exec {
    /// The run record it executed.
    pub run: jobwheel::RunId,
    pub job: String,
    pub fire_at: Timestamp,
    pub attempt: u32,
    pub trigger: TriggerKind,
    pub node: String,
    pub start: Timestamp,
    /// When the handler returned or was dropped.
    pub end: Timestamp,
}

/// What a played workload left behind.
#[derive(Debug)]
pub struct Played {
    pub execs: Vec<Exec>,
    pub runs: Vec<RunRecord>,
    pub metrics: Vec<EngineMetrics>,
    /// Runs still `running` after every node shut down.
    pub stuck: usize,
    /// When each operation returned, as an offset from the workload's base, by job
    /// id and planned offset: it took effect between the two (later than planned
    /// when the store is slow).
    pub applied: HashMap<(String, Duration), Duration>,
}

impl Played {
    /// The window in which the operation planned at `at` on job `id` took effect:
    /// from `at` to when it returned; `at` itself for a boundary no operation made
    /// (the nodes' stop).
    pub fn window(&self, id: &str, at: Duration) -> (Duration, Duration) {
        let returned = self.applied.get(&(id.to_string(), at)).copied();
        (at, returned.unwrap_or(at))
    }
}

/// A deterministic hash for "does this attempt fail" (not HashMap's random one).
fn fnv(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for b in *p {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// Whether attempt `attempt` of the fire at `fire_at` of `job` fails, at `fail_pct`
/// percent.
pub fn fails(job: &str, fire_at: Timestamp, attempt: u32, fail_pct: u64) -> bool {
    let h = fnv(&[
        job.as_bytes(),
        &fire_at.as_millis().to_le_bytes(),
        &attempt.to_le_bytes(),
    ]);
    h % 100 < fail_pct
}

/// Records `end` when the handler's future finishes or is dropped.
struct EndGuard {
    execs: Arc<Mutex<Vec<Exec>>>,
    index: usize,
    clock: Arc<TokioClock>,
}

impl Drop for EndGuard {
    fn drop(&mut self) {
        self.execs.lock().unwrap()[self.index].end = self.clock.now();
    }
}

/// The configuration every simulated node shares: the defaults, a fixed node id.
pub fn node_config(node: &str) -> SchedulerConfig {
    SchedulerConfig::default()
        .node_id(node)
        .shutdown_grace(Duration::from_secs(60))
}

/// The store and the locks every node of a play shares: the store's own locks
/// (each job's lease in its row) with `row_leases`, a lock provider of their own
/// otherwise; one delay model for both, as one database serves both.
pub fn backend(
    clock: &Arc<TokioClock>,
    latency: Option<workload::Latency>,
    lost_per_mille: u32,
    seed: u64,
    row_leases: bool,
) -> (MemoryStore, LocalLocks) {
    let mut store = MemoryStore::with_clock(clock.clone());
    let mut locks = LocalLocks::with_clock(clock.clone());
    if let Some(l) = latency {
        let model = StoreLatency::new(l.per_call, l.per_item, l.connections)
            .losing_answers(lost_per_mille, seed);
        store = store.with_latency(model.clone());
        locks = locks.with_latency(model);
    }
    if row_leases {
        // On the store's clock and delay model.
        locks = store.locks();
    }
    (store, locks)
}

/// Plays `w` and collects what ran.
pub async fn run(w: &Workload) -> Played {
    let clock = Arc::new(TokioClock::starting_at(w.base));
    let (store, locks) = backend(&clock, w.latency, w.lost_per_mille, w.seed, w.row_leases);
    let execs: Arc<Mutex<Vec<Exec>>> = Arc::default();
    let mut handles = Vec::new();
    for (n, &slots) in w.nodes.iter().enumerate() {
        let (execs, clock) = (execs.clone(), clock.clone());
        let node = format!("n{n}");
        let handler = move |ctx: JobContext| {
            let ms = ctx.payload()["ms"].as_u64().unwrap_or(0);
            let fail_pct = ctx.payload()["fail_pct"].as_u64().unwrap_or(0);
            let now = clock.now();
            let index = {
                let mut e = execs.lock().unwrap();
                e.push(Exec {
                    run: ctx.run_id,
                    job: ctx.job.id().to_string(),
                    fire_at: ctx.fire_at,
                    attempt: ctx.attempt,
                    trigger: ctx.trigger,
                    node: ctx.node_id.to_string(),
                    start: now,
                    end: now,
                });
                e.len() - 1
            };
            let guard = EndGuard {
                execs: execs.clone(),
                index,
                clock: clock.clone(),
            };
            let fail = fails(ctx.job.id().as_str(), ctx.fire_at, ctx.attempt, fail_pct);
            async move {
                let _guard = guard;
                tokio::time::sleep(Duration::from_millis(ms)).await;
                if fail {
                    Err(JobError::msg("simulated failure"))
                } else {
                    Ok(())
                }
            }
        };
        // One lane, so "a slot is free" means exactly `slots` minus the runs in flight.
        let executor = LocalExecutor::new(
            LocalExecutorConfig::default().concurrency(slots).slow_lane(
                SlowLaneConfig::default()
                    .concurrency(0)
                    .slow_run(Duration::from_secs(24 * 3600)),
            ),
        )
        .unwrap();
        let s = Scheduler::builder()
            .store(store.clone())
            .locks(locks.clone())
            .executor(executor)
            .handler("h", handler)
            .config(node_config(&node))
            .build()
            .unwrap();
        handles.push(s.start().await.unwrap());
    }
    let mut applied = HashMap::new();
    let since_base = || clock.now().duration_since(w.base);
    // Offsets count from the base (the nodes' start took store calls, which take
    // time with a delay model), so the nodes stop when the checker says they do.
    let start = tokio::time::Instant::now() - since_base();
    for (at, op) in &w.ops {
        tokio::time::sleep_until(start + *at).await;
        let h = &handles[op.node() % handles.len()];
        let id = match op {
            Op::Upsert { job, .. } => {
                h.scheduler().upsert(Job::clone(job)).await.unwrap();
                job.id().to_string()
            }
            Op::Pause { id, .. } => {
                h.scheduler().pause(id).await.unwrap();
                id.clone()
            }
            Op::Resume { id, .. } => {
                h.scheduler().resume(id).await.unwrap();
                id.clone()
            }
            Op::Remove { id, .. } => {
                h.scheduler().remove(id).await.unwrap();
                id.clone()
            }
        };
        applied.insert((id, *at), since_base());
    }
    tokio::time::sleep_until(start + w.length + w.tail).await;
    let schedulers: Vec<Scheduler> = handles.iter().map(|h| h.scheduler().clone()).collect();
    // All at once, so no node keeps firing while another waits for its handlers.
    futures::future::join_all(handles.into_iter().map(|h| h.shutdown())).await;
    // After the shutdown, so a finish still in flight at the end (a slow store's) is
    // counted as the run log records it.
    let metrics = schedulers.iter().map(|s| s.metrics()).collect();
    let runs = jobwheel::store::RunLog::runs(&store, &RunQuery::new().limit(usize::MAX))
        .await
        .unwrap();
    let stuck = runs
        .iter()
        .filter(|r| r.status == jobwheel::RunStatus::Running)
        .count();
    let execs = execs.lock().unwrap().clone();
    Played {
        execs,
        runs,
        metrics,
        stuck,
        applied,
    }
}
