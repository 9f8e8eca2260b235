//! The engine against a store that fails: it backs off, keeps firing once the store is
//! back, and never loses a finished run's result.

use crate::support;

use async_trait::async_trait;
use jobwheel::memory::MemoryStore;
use jobwheel::store::*;
use jobwheel::*;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::*;

/// A memory store whose scheduling calls fail while `down` is set, whose next
/// `lose_answers` start calls (`lose_finish_answers` finish calls) are recorded but
/// answered with an error (a connection cut after the commit), and whose next
/// `drop_finishes` finish calls are answered as written but not written (a write a
/// Redis primary acknowledged and lost in a failover). The calls it names in `broken`
/// always fail; `calls` counts the calls it checks, by name.
#[derive(Clone)]
struct FlakyStore {
    inner: MemoryStore,
    down: Arc<AtomicBool>,
    broken: Arc<Mutex<HashSet<&'static str>>>,
    calls: Arc<Mutex<HashMap<&'static str, usize>>>,
    failed: Arc<AtomicUsize>,
    lose_answers: Arc<AtomicUsize>,
    lose_finish_answers: Arc<AtomicUsize>,
    drop_finishes: Arc<AtomicUsize>,
}

impl FlakyStore {
    /// Over `inner`, up, losing and dropping nothing.
    fn new(inner: MemoryStore) -> FlakyStore {
        FlakyStore {
            inner,
            down: Arc::default(),
            broken: Arc::default(),
            calls: Arc::default(),
            failed: Arc::default(),
            lose_answers: Arc::default(),
            lose_finish_answers: Arc::default(),
            drop_finishes: Arc::default(),
        }
    }

    fn check(&self, op: &'static str) -> Result<()> {
        *self.calls.lock().unwrap().entry(op).or_default() += 1;
        if self.down.load(Ordering::SeqCst) || self.broken.lock().unwrap().contains(op) {
            self.failed.fetch_add(1, Ordering::SeqCst);
            return Err(Error::backend("flaky", op, true, "connection refused"));
        }
        Ok(())
    }
}

/// An error for a call already written, while `left` counts down.
fn lose_answer(left: &AtomicUsize, op: &'static str) -> Result<()> {
    match left.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)) {
        Ok(_) => Err(Error::backend(
            "flaky",
            op,
            true,
            "connection reset after the commit",
        )),
        Err(_) => Ok(()),
    }
}

#[async_trait]
impl Jobs for FlakyStore {
    fn name(&self) -> &'static str {
        "flaky"
    }
    async fn now(&self) -> Result<Timestamp> {
        self.check("now")?;
        self.inner.now().await
    }
    async fn apply(&self, change: &JobChange, audit: Option<&AuditEntry>) -> Result<Applied> {
        self.inner.apply(change, audit).await
    }
    async fn get(&self, id: &JobId) -> Result<Option<JobRecord>> {
        self.inner.get(id).await
    }
    async fn list(&self, q: &JobQuery) -> Result<Page<JobRecord>> {
        self.inner.list(q).await
    }
    async fn due(&self, q: &DueQuery) -> Result<Page<DueFire>> {
        self.check("due")?;
        self.inner.due(q).await
    }
    async fn start_runs(&self, runs: &[StartRun]) -> Result<Vec<StartOutcome>> {
        self.check("start_runs")?;
        let out = self.inner.start_runs(runs).await?;
        lose_answer(&self.lose_answers, "start_runs")?;
        Ok(out)
    }
    async fn finish_runs(&self, runs: &[FinishRun]) -> Result<Vec<FinishOutcome>> {
        self.check("finish_runs")?;
        let dropped = self
            .drop_finishes
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
        if dropped.is_ok() {
            let ended_at = self.inner.now().await?;
            return Ok(runs
                .iter()
                .map(|_| FinishOutcome::Finished {
                    ended_at,
                    rescheduled: true,
                })
                .collect());
        }
        let out = self.inner.finish_runs(runs).await?;
        lose_answer(&self.lose_finish_answers, "finish_runs")?;
        Ok(out)
    }
    async fn releases(
        &self,
        job: Option<&jobwheel::JobId>,
        limit: usize,
    ) -> Result<Vec<jobwheel::dependency::QueuedRelease>> {
        self.inner.releases(job, limit).await
    }
    async fn take_releases(&self, limit: usize) -> Result<u64> {
        self.check("take_releases")?;
        self.inner.take_releases(limit).await
    }
    async fn queue_releases(
        &self,
        releases: &[jobwheel::dependency::Release],
        audit: Option<&AuditEntry>,
    ) -> Result<()> {
        self.inner.queue_releases(releases, audit).await
    }
    async fn drop_releases(
        &self,
        job: &jobwheel::JobId,
        fire_at: Timestamp,
        audit: Option<&AuditEntry>,
    ) -> Result<u64> {
        self.inner.drop_releases(job, fire_at, audit).await
    }
    async fn alarm_waiting(
        &self,
        job: &jobwheel::JobId,
        fire_at: Timestamp,
        event: &jobwheel::AlarmEvent,
    ) -> Result<bool> {
        self.check("alarm_waiting")?;
        self.inner.alarm_waiting(job, fire_at, event).await
    }
}

#[async_trait]
impl RunLog for FlakyStore {
    async fn runs(&self, q: &RunQuery) -> Result<Vec<RunRecord>> {
        self.inner.runs(q).await
    }
    async fn purge_runs(&self, before: Timestamp) -> Result<u64> {
        self.check("purge_runs")?;
        self.inner.purge_runs(before).await
    }
    async fn append_lines(&self, chunks: &[jobwheel::LogLines]) -> Result<()> {
        self.check("append_lines")?;
        self.inner.append_lines(chunks).await
    }
    async fn lines(
        &self,
        run: jobwheel::RunId,
        offset: u64,
        limit: usize,
    ) -> Result<Vec<jobwheel::LogLine>> {
        self.inner.lines(run, offset, limit).await
    }
}

#[async_trait]
impl NodeRegistry for FlakyStore {
    async fn heartbeat(&self, node: &NodeInfo) -> Result<Timestamp> {
        self.check("heartbeat")?;
        self.inner.heartbeat(node).await
    }
    async fn nodes(&self) -> Result<Page<NodeRecord>> {
        self.inner.nodes().await
    }
    async fn reap_nodes(&self, silent_for: Duration) -> Result<Vec<String>> {
        self.check("reap_nodes")?;
        self.inner.reap_nodes(silent_for).await
    }
    async fn deregister(&self, node_id: &str) -> Result<bool> {
        self.inner.deregister(node_id).await
    }
    async fn orphaned_runs(&self, limit: usize) -> Result<Vec<RunRecord>> {
        self.check("orphaned_runs")?;
        self.inner.orphaned_runs(limit).await
    }
    async fn executor_beat(&self, instance: &ExecutorInfo) -> Result<Timestamp> {
        self.inner.executor_beat(instance).await
    }
    async fn executors(&self, group: Option<&str>) -> Result<Page<ExecutorRecord>> {
        self.inner.executors(group).await
    }
    async fn reap_executors(&self, silent_for: Duration) -> Result<Vec<(String, String)>> {
        self.inner.reap_executors(silent_for).await
    }
    async fn deregister_executor(&self, group: &str, address: &str) -> Result<bool> {
        self.inner.deregister_executor(group, address).await
    }
}

#[async_trait]
impl AlarmOutbox for FlakyStore {
    async fn claim_alarms(&self, c: &AlarmClaim) -> Result<Page<AlarmRecord>> {
        self.check("claim_alarms")?;
        self.inner.claim_alarms(c).await
    }
    async fn complete_alarm(&self, id: AlarmId, owner: &str, d: &AlarmDelivery) -> Result<bool> {
        self.inner.complete_alarm(id, owner, d).await
    }
    async fn alarms(&self, q: &AlarmQuery) -> Result<Vec<AlarmRecord>> {
        self.inner.alarms(q).await
    }
    async fn purge_alarms(&self, before: Timestamp) -> Result<u64> {
        self.check("purge_alarms")?;
        self.inner.purge_alarms(before).await
    }
    async fn apply_alarm(&self, change: AlarmChange, audit: Option<&AuditEntry>) -> Result<bool> {
        self.inner.apply_alarm(change, audit).await
    }
}

#[async_trait]
impl AuditLog for FlakyStore {
    async fn append_audit(&self, e: &AuditEntry) -> Result<()> {
        self.inner.append_audit(e).await
    }
    async fn audit(&self, q: &AuditQuery) -> Result<Vec<AuditRecord>> {
        self.inner.audit(q).await
    }
    async fn purge_audit(&self, before: Timestamp) -> Result<u64> {
        self.inner.purge_audit(before).await
    }
}

#[async_trait]
impl jobwheel::store::Credentials for FlakyStore {
    async fn add_credential(&self, c: &jobwheel::Credential, a: &AuditEntry) -> Result<bool> {
        self.inner.add_credential(c, a).await
    }
    async fn remove_credential(
        &self,
        k: jobwheel::CredentialKind,
        n: &str,
        a: &AuditEntry,
    ) -> Result<bool> {
        self.inner.remove_credential(k, n, a).await
    }
    async fn credentials(&self) -> Result<Vec<jobwheel::CredentialRecord>> {
        self.inner.credentials().await
    }
}

#[tokio::test(start_paused = true)]
async fn an_outage_during_a_run_delays_its_result_but_never_loses_it() {
    let recorder = metrics_util::debugging::DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _local = metrics::set_default_local_recorder(&recorder);
    let (store, locks, _clock) = backend("2026-01-01T00:00:00Z");
    let flaky = FlakyStore::new(store.clone());
    let down = flaky.down.clone();
    let s = Scheduler::builder()
        .store(flaky.clone())
        .locks(locks)
        .handler("slow", move |_ctx: JobContext| {
            let down = down.clone();
            async move {
                tokio::time::sleep(Duration::from_secs(2)).await;
                // The database goes away while the handler is finishing.
                down.store(true, Ordering::SeqCst);
                Ok::<(), JobError>(())
            }
        })
        .handler("tick", |_ctx: JobContext| async { Ok::<(), JobError>(()) })
        .config(config("n1"))
        .build()
        .unwrap();
    let h = s.start().await.unwrap();
    h.scheduler()
        .upsert(
            Job::builder("report", "slow", Schedule::once(at("2026-01-01T00:00:01Z")))
                .build()
                .unwrap(),
        )
        .await
        .unwrap();
    h.scheduler()
        .upsert(
            Job::builder(
                "tick",
                "tick",
                Schedule::every(Duration::from_secs(1)).unwrap(),
            )
            .build()
            .unwrap(),
        )
        .await
        .unwrap();
    advance(Duration::from_secs(30)).await;
    assert!(
        flaky.failed.load(Ordering::SeqCst) > 10,
        "the engine kept trying"
    );
    assert_eq!(
        runs_of(&store, "report").await[0].status,
        RunStatus::Running,
        "not written while the store is down"
    );
    let ticks_during = runs_of(&store, "tick").await.len();
    flaky.down.store(false, Ordering::SeqCst);
    advance(Duration::from_secs(10)).await;
    let report = runs_of(&store, "report").await;
    assert_eq!(report.len(), 1);
    assert_eq!(
        report[0].status,
        RunStatus::Succeeded,
        "the result was written once the store came back"
    );
    // The poller's next try comes within the backoff's ceiling (3.2 s, jittered
    // below it), its poll within a poll interval (1 s); from then on the job fires
    // every second: at least six runs in the ten seconds after the store is back.
    let ticks_after = runs_of(&store, "tick").await.len();
    assert!(
        ticks_after >= ticks_during + 6,
        "firing resumed: {ticks_during} -> {ticks_after}"
    );
    let errors = h.scheduler().metrics().backend_errors;
    assert!(errors > 0);
    // Exported by operation, summing to the in-process count: the poll's and the
    // finish's failures among them.
    let mut by_op = std::collections::BTreeMap::new();
    for (k, _, _, v) in snapshotter.snapshot().into_vec() {
        if let (true, metrics_util::debugging::DebugValue::Counter(n)) = (
            k.key().name() == jobwheel::engine::instruments::BACKEND_ERRORS,
            v,
        ) {
            let op = k.key().labels().next().unwrap().value().to_string();
            by_op.insert(op, n);
        }
    }
    assert_eq!(by_op.values().sum::<u64>(), errors, "{by_op:?}");
    assert!(by_op["due"] > 0 && by_op["finish_runs"] > 0, "{by_op:?}");
    h.shutdown().await;
}

/// A node on a store that loses the answers of its first `starts` start calls and
/// `finishes` finish calls, running job `tick` every 10 s (`retry`: its policy)
/// with `handler`; returns the store underneath after 25 s, and the node.
async fn lost_answers<H, Fut>(
    starts: usize,
    finishes: usize,
    retry: Option<RetryPolicy>,
    handler: H,
) -> (MemoryStore, FlakyStore, jobwheel::SchedulerHandle)
where
    H: Fn(JobContext) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = std::result::Result<(), JobError>> + Send + 'static,
{
    let (store, locks, _clock) = backend("2026-01-01T00:00:00Z");
    let flaky = FlakyStore {
        lose_answers: Arc::new(AtomicUsize::new(starts)),
        lose_finish_answers: Arc::new(AtomicUsize::new(finishes)),
        ..FlakyStore::new(store.clone())
    };
    let s = Scheduler::builder()
        .store(flaky.clone())
        .locks(locks)
        .handler("tick", handler)
        .config(config("n1"))
        .build()
        .unwrap();
    let h = s.start().await.unwrap();
    let mut job = Job::builder(
        "tick",
        "tick",
        Schedule::every(Duration::from_secs(10)).unwrap(),
    );
    if let Some(r) = retry {
        job = job.retry(r);
    }
    h.scheduler().upsert(job.build().unwrap()).await.unwrap();
    advance(Duration::from_secs(25)).await;
    (store, flaky, h)
}

#[tokio::test(start_paused = true)]
async fn a_start_recorded_but_answered_with_an_error_is_recorded_lost_and_retried() {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let retry = RetryPolicy::new(2, Duration::from_secs(1), Duration::from_secs(1)).unwrap();
    let (store, flaky, h) = lost_answers(1, 0, Some(retry), {
        let seen = seen.clone();
        move |ctx: JobContext| {
            seen.lock().unwrap().push((ctx.fire_at, ctx.attempt));
            async { Ok::<(), JobError>(()) }
        }
    })
    .await;
    assert_eq!(
        flaky.lose_answers.load(Ordering::SeqCst),
        0,
        "the answer was lost"
    );
    let runs = runs_of(&store, "tick").await;
    // The first fire's start was recorded though its node heard an error: the node
    // finds that run, records it lost, and the retry runs the fire.
    let first = runs[0].fire_at;
    assert_eq!(runs[0].status, RunStatus::Lost, "{runs:?}");
    assert!(
        runs[0]
            .error
            .as_deref()
            .is_some_and(|e| e.contains("answer was lost")),
        "{:?}",
        runs[0].error
    );
    assert_eq!(
        (runs[1].fire_at, runs[1].attempt, runs[1].status),
        (first, 2, RunStatus::Succeeded),
        "{runs:?}"
    );
    assert!(
        runs.iter().all(|r| r.status != RunStatus::Running),
        "no run is left running: {runs:?}"
    );
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen[0],
        (first, 2),
        "the lost start never executed: {seen:?}"
    );
    assert!(
        seen.iter().any(|(f, _)| *f > first),
        "the job keeps firing: {seen:?}"
    );
    h.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_finish_recorded_but_answered_with_an_error_counts_as_finished_not_fenced() {
    let (store, flaky, h) = lost_answers(0, 1, None, |_ctx: JobContext| async {
        Ok::<(), JobError>(())
    })
    .await;
    assert_eq!(flaky.lose_finish_answers.load(Ordering::SeqCst), 0);
    let runs = runs_of(&store, "tick").await;
    assert_eq!(runs.len(), 3, "{runs:?}");
    assert!(
        runs.iter().all(|r| r.status == RunStatus::Succeeded),
        "{runs:?}"
    );
    let m = h.scheduler().metrics();
    assert_eq!(
        m.finish_refused, 0,
        "the node's own write is no fence: {m:?}"
    );
    assert_eq!(m.finished, 3, "{m:?}");
    assert_eq!(m.backend_errors, 1, "{m:?}");
    h.shutdown().await;
}

/// A finish the store acknowledged and then lost leaves the run recorded running on
/// a live node that no longer runs it: the node finds it (a run started more than a
/// lease ago, not in hand) and records it lost, the retry runs the fire again, and
/// the job goes on firing. A run that is only long is left alone.
#[tokio::test(start_paused = true)]
async fn a_run_whose_acknowledged_finish_was_lost_is_reclaimed_by_its_live_node() {
    let (store, locks, _clock) = backend("2026-01-01T00:00:00Z");
    let flaky = FlakyStore {
        drop_finishes: Arc::new(AtomicUsize::new(1)),
        ..FlakyStore::new(store.clone())
    };
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let s = Scheduler::builder()
        .store(flaky.clone())
        .locks(locks)
        .handler("tick", {
            let seen = seen.clone();
            move |ctx: JobContext| {
                seen.lock().unwrap().push((ctx.fire_at, ctx.attempt));
                async { Ok::<(), JobError>(()) }
            }
        })
        .handler("long", |_ctx: JobContext| async {
            tokio::time::sleep(Duration::from_secs(150)).await;
            Ok::<(), JobError>(())
        })
        .config(config("n1"))
        .build()
        .unwrap();
    let h = s.start().await.unwrap();
    // The long run starts first (its finish is written: the one dropped finish is
    // the tick's first).
    h.scheduler()
        .upsert(
            Job::builder("long", "long", Schedule::once(at("2026-01-01T00:00:01Z")))
                .build()
                .unwrap(),
        )
        .await
        .unwrap();
    let retry = RetryPolicy::new(2, Duration::from_secs(1), Duration::from_secs(1)).unwrap();
    h.scheduler()
        .upsert(
            Job::builder(
                "tick",
                "tick",
                Schedule::every(Duration::from_secs(10)).unwrap(),
            )
            .retry(retry)
            .build()
            .unwrap(),
        )
        .await
        .unwrap();
    advance(Duration::from_secs(20)).await;
    assert_eq!(
        flaky.drop_finishes.load(Ordering::SeqCst),
        0,
        "a finish was dropped"
    );
    let runs = runs_of(&store, "tick").await;
    assert_eq!(runs.len(), 1, "the job waits on its run: {runs:?}");
    assert_eq!(runs[0].status, RunStatus::Running);
    let first = runs[0].fire_at;
    // The node checks once per dead_after (30 s), for runs started a lease (30 s)
    // ago or more.
    advance(Duration::from_secs(100)).await;
    let runs = runs_of(&store, "tick").await;
    assert_eq!(runs[0].status, RunStatus::Lost, "{runs:?}");
    assert!(
        runs[0]
            .error
            .as_deref()
            .is_some_and(|e| e.contains("which does not run it")),
        "{:?}",
        runs[0].error
    );
    assert_eq!(
        (runs[1].fire_at, runs[1].attempt, runs[1].status),
        (first, 2, RunStatus::Succeeded),
        "the retry ran the fire again: {runs:?}"
    );
    assert!(runs.len() > 4, "the job fires on: {runs:?}");
    assert!(
        runs[1..].iter().all(|r| r.status == RunStatus::Succeeded),
        "{runs:?}"
    );
    let seen = seen.lock().unwrap().clone();
    assert_eq!(&seen[..2], &[(first, 1), (first, 2)], "{seen:?}");
    // The long run (150 s, started 120 s ago) is the node's own: still running.
    let long = runs_of(&store, "long").await;
    assert_eq!(long.len(), 1);
    assert_eq!(long[0].status, RunStatus::Running, "{long:?}");
    advance(Duration::from_secs(40)).await;
    let long = runs_of(&store, "long").await;
    assert_eq!(long[0].status, RunStatus::Succeeded, "{long:?}");
    let m = h.scheduler().metrics();
    assert_eq!(m.lost_recovered, 1, "{m:?}");
    assert_eq!(m.finish_refused, 0, "{m:?}");
    h.shutdown().await;
}

/// Each of a node's services runs on its own: a store that refuses to reap dead
/// nodes (the second service of a pass) leaves the heartbeat, the recovery of
/// orphaned runs, the queued releases, retention and the fires going, and the
/// refusals are counted.
#[tokio::test(start_paused = true)]
async fn a_node_service_that_fails_never_stops_the_others() {
    let (store, locks, _clock) = backend("2026-01-01T00:00:00Z");
    let flaky = FlakyStore::new(store.clone());
    flaky.broken.lock().unwrap().insert("reap_nodes");
    let s = Scheduler::builder()
        .store(flaky.clone())
        .locks(locks)
        .handler("tick", |_ctx: JobContext| async { Ok::<(), JobError>(()) })
        .config(config("n1").run_retention(Some(Duration::from_secs(30 * 86_400))))
        .build()
        .unwrap();
    let h = s.start().await.unwrap();
    let tick = Schedule::every(Duration::from_secs(1)).unwrap();
    h.scheduler()
        .upsert(Job::builder("tick", "tick", tick).build().unwrap())
        .await
        .unwrap();
    // Ten beats of the default 10 s.
    advance(Duration::from_secs(100)).await;
    let calls = flaky.calls.lock().unwrap().clone();
    let n = |op: &str| calls.get(op).copied().unwrap_or(0);
    assert!(n("reap_nodes") >= 10, "reaping is tried again: {calls:?}");
    assert!(n("heartbeat") >= 10, "the node beats every beat: {calls:?}");
    assert!(
        n("orphaned_runs") >= 30,
        "dead nodes' runs are looked for every quarter beat: {calls:?}"
    );
    assert!(
        n("take_releases") >= 30,
        "queued releases are taken every quarter beat: {calls:?}"
    );
    assert_eq!(n("purge_runs"), 1, "run retention ran at start: {calls:?}");
    assert_eq!(
        n("purge_alarms"),
        1,
        "alarm retention ran at start: {calls:?}"
    );
    let runs = runs_of(&store, "tick").await.len();
    assert!(runs >= 90, "the job fired every second: {runs}");
    assert!(
        h.scheduler().metrics().backend_errors >= n("reap_nodes") as u64,
        "every refusal is counted"
    );
    h.shutdown().await;
}
