//! The engine under contention and failure, on a paused tokio clock: lease loss,
//! shutdown, several schedulers, alarms, backpressure, the slow lane.

use crate::support;

use jobwheel::memory::LocalLocks;
use jobwheel::store::{AlarmOutbox, Jobs, NodeRegistry, RunLog};
use jobwheel::{
    AlarmError, AlarmEvent, AlarmKind, AlarmPolicy, AlarmStatus, Job, JobAlarm, JobContext,
    JobError, Lease, LockProvider, LockRequest, RetryPolicy, RunQuery, RunStatus, Schedule,
    Scheduler, TriggerKind,
};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::*;

const S: Duration = Duration::from_secs(1);

/// Locks whose renewals start failing on demand.
#[derive(Clone)]
struct RevocableLocks {
    inner: LocalLocks,
    revoked: Arc<AtomicBool>,
    held: Arc<AtomicUsize>,
    max_held: Arc<AtomicUsize>,
}

#[async_trait::async_trait]
impl LockProvider for RevocableLocks {
    fn name(&self) -> &'static str {
        "revocable"
    }
    async fn acquire(
        &self,
        owner: &str,
        r: &[LockRequest],
    ) -> jobwheel::Result<Vec<Option<Lease>>> {
        let got = self.inner.acquire(owner, r).await?;
        let n = got.iter().flatten().count();
        let now = self.held.fetch_add(n, Ordering::SeqCst) + n;
        self.max_held.fetch_max(now, Ordering::SeqCst);
        Ok(got)
    }
    async fn renew(&self, l: &[Lease], ttl: Duration) -> jobwheel::Result<Vec<Option<Lease>>> {
        if self.revoked.load(Ordering::SeqCst) {
            return Ok(vec![None; l.len()]);
        }
        self.inner.renew(l, ttl).await
    }
    async fn release(&self, l: &[Lease]) -> jobwheel::Result<Vec<bool>> {
        let got = self.inner.release(l).await?;
        self.held
            .fetch_sub(got.iter().filter(|b| **b).count(), Ordering::SeqCst);
        Ok(got)
    }
}

fn revocable(clock: &Arc<jobwheel::TokioClock>) -> RevocableLocks {
    RevocableLocks {
        inner: LocalLocks::with_clock(clock.clone()),
        revoked: Arc::default(),
        held: Arc::default(),
        max_held: Arc::default(),
    }
}

#[tokio::test(start_paused = true)]
async fn losing_the_lease_cancels_the_run_and_refuses_its_result() {
    let (store, _locks, clock) = backend("2026-01-01T00:00:00Z");
    let locks = revocable(&clock);
    let s = Scheduler::builder()
        .store(store.clone())
        .locks(locks.clone())
        .handler("long", |_ctx: JobContext| async {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok::<(), JobError>(())
        })
        .config(config("n1").lease_ttl(Duration::from_secs(3)))
        .build()
        .unwrap();
    let h = s.start().await.unwrap();
    h.scheduler()
        .upsert(
            Job::builder("j", "long", Schedule::once(at("2026-01-01T00:00:01Z")))
                .retry(RetryPolicy::none())
                .build()
                .unwrap(),
        )
        .await
        .unwrap();
    advance(Duration::from_secs(5)).await;
    assert_eq!(
        runs_of(&store, "j").await[0].status,
        RunStatus::Running,
        "renewals keep it running"
    );
    locks.revoked.store(true, Ordering::SeqCst);
    advance(Duration::from_secs(3)).await;
    let runs = runs_of(&store, "j").await;
    assert_eq!(runs[0].status, RunStatus::Cancelled);
    assert!(
        runs[0].error.as_deref().unwrap().contains("lease lost"),
        "{:?}",
        runs[0].error
    );
    // Started at 1 s, revoked at 5 s, renewed every second: cancelled within one period.
    let took = runs[0].duration().unwrap();
    assert!(
        (Duration::from_secs(4)..=Duration::from_secs(5)).contains(&took),
        "cancelled after {took:?}"
    );
    assert_eq!(h.scheduler().metrics().leases_lost, 1);
    h.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn shutdown_cancels_after_grace_records_and_releases_everything() {
    let (store, _locks, clock) = backend("2026-01-01T00:00:00Z");
    let locks = revocable(&clock);
    let s = Scheduler::builder()
        .store(store.clone())
        .locks(locks.clone())
        .handler("forever", |_ctx: JobContext| async {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok::<(), JobError>(())
        })
        .handler("quick", |_ctx: JobContext| async { Ok::<(), JobError>(()) })
        .config(config("n1").shutdown_grace(Duration::from_secs(2)))
        .build()
        .unwrap();
    let h = s.start().await.unwrap();
    h.scheduler()
        .upsert(
            Job::builder(
                "stuck",
                "forever",
                Schedule::once(at("2026-01-01T00:00:01Z")),
            )
            .build()
            .unwrap(),
        )
        .await
        .unwrap();
    // Armed but not started when shutdown begins (within the lookahead).
    h.scheduler()
        .upsert(
            Job::builder("soon", "quick", Schedule::once(at("2026-01-01T00:00:05Z")))
                .build()
                .unwrap(),
        )
        .await
        .unwrap();
    advance(Duration::from_secs(2)).await;
    assert_eq!(
        locks.held.load(Ordering::SeqCst),
        2,
        "both fires are claimed"
    );
    let report = h.shutdown().await;
    assert_eq!(report.cancelled, 1);
    assert!(report.drained);
    assert_eq!(locks.held.load(Ordering::SeqCst), 0, "every lease released");
    let stuck = runs_of(&store, "stuck").await;
    assert_eq!(
        stuck[0].status,
        RunStatus::Cancelled,
        "a run cancelled at shutdown is recorded"
    );
    assert!(
        runs_of(&store, "soon").await.is_empty(),
        "an armed fire is given back, not run"
    );
    assert!(
        store
            .get(&jobwheel::JobId::new("soon").unwrap())
            .await
            .unwrap()
            .unwrap()
            .next_fire_at()
            .is_some()
    );
    assert!(
        store.nodes().await.unwrap().items.is_empty(),
        "the node deregistered"
    );
}

/// Counts deliveries per (alarm name, event).
#[derive(Clone)]
struct CountingAlarm {
    name: &'static str,
    seen: Arc<Mutex<HashMap<(String, String), usize>>>,
}

#[async_trait::async_trait]
impl JobAlarm for CountingAlarm {
    fn name(&self) -> &str {
        self.name
    }
    async fn alarm(&self, e: &AlarmEvent) -> Result<(), AlarmError> {
        let key = format!("{}/{}/{:?}", e.job_id, e.fire_at, e.kind);
        *self
            .seen
            .lock()
            .unwrap()
            .entry((self.name.to_string(), key))
            .or_default() += 1;
        Ok(())
    }
}

#[tokio::test(start_paused = true)]
async fn two_schedulers_run_each_fire_once_and_deliver_each_alarm_once_to_every_alarm() {
    let (store, locks, clock) = backend("2026-01-01T00:00:00Z");
    let log = Log::default();
    let seen = Arc::new(Mutex::new(HashMap::new()));
    let mut handles = Vec::new();
    for node in ["n1", "n2"] {
        let s = Scheduler::builder()
            .store(store.clone())
            .locks(locks.clone())
            .handler("ok", recording(&log, &clock))
            .handler("bad", failing(&log, &clock))
            .alarm(CountingAlarm {
                name: "mail",
                seen: seen.clone(),
            })
            .alarm(CountingAlarm {
                name: "hook",
                seen: seen.clone(),
            })
            .config(config(node))
            .build()
            .unwrap();
        handles.push(s.start().await.unwrap());
    }
    for i in 0..40 {
        let job = Job::builder(format!("ok-{i}"), "ok", Schedule::every(S).unwrap())
            .build()
            .unwrap();
        handles[i % 2].scheduler().upsert(job).await.unwrap();
    }
    let policy = AlarmPolicy {
        events: vec![AlarmKind::Failure, AlarmKind::FinalFailure],
        recipients: vec![],
        ..AlarmPolicy::default()
    };
    let bad = Job::builder(
        "bad",
        "bad",
        Schedule::every(Duration::from_secs(5)).unwrap(),
    )
    .retry(RetryPolicy::none())
    .alarm(policy)
    .build()
    .unwrap();
    handles[0].scheduler().upsert(bad).await.unwrap();
    advance(Duration::from_secs(30)).await;
    advance(Duration::from_millis(100)).await;
    let started: u64 = handles
        .iter()
        .map(|h| h.scheduler().metrics().started)
        .sum();
    let refused: u64 = handles
        .iter()
        .map(|h| h.scheduler().metrics().finish_refused)
        .sum();
    for h in handles {
        h.shutdown().await;
    }
    assert_eq!(
        started as usize,
        log.all().len(),
        "the nodes together started every run once"
    );
    assert_eq!(refused, 0);
    let mut per_fire: HashMap<(String, jobwheel::Timestamp), usize> = HashMap::new();
    for s in log.all() {
        *per_fire.entry((s.job.clone(), s.fire_at)).or_default() += 1;
    }
    assert!(per_fire.values().all(|n| *n == 1), "a fire ran twice");
    for i in 0..40 {
        let n = per_fire
            .keys()
            .filter(|(j, _)| *j == format!("ok-{i}"))
            .count();
        assert_eq!(n, 31, "ok-{i} fires at 0..=30 s, each once");
    }
    let events = store
        .alarms(&jobwheel::AlarmQuery::new(10_000))
        .await
        .unwrap();
    assert_eq!(
        events.len(),
        14,
        "7 failed fires (0, 5, …, 30 s) × (failure + final failure)"
    );
    assert!(
        events.iter().all(|e| e.status == AlarmStatus::Sent),
        "{events:?}"
    );
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 28, "each event reached both alarms");
    assert!(
        seen.values().all(|n| *n == 1),
        "an alarm heard an event twice: {seen:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_slow_or_failing_alarm_never_delays_a_fire() {
    struct Stuck;
    #[async_trait::async_trait]
    impl JobAlarm for Stuck {
        fn name(&self) -> &str {
            "stuck"
        }
        async fn alarm(&self, _e: &AlarmEvent) -> Result<(), AlarmError> {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Err(AlarmError::retryable("never answers"))
        }
    }
    let (store, locks, clock) = backend("2026-01-01T00:00:00Z");
    let log = Log::default();
    let s = Scheduler::builder()
        .store(store.clone())
        .locks(locks)
        .handler("ok", recording(&log, &clock))
        .handler("bad", failing(&log, &clock))
        .alarm(Stuck)
        .config(config("n1").alarm_timeout(Duration::from_secs(20)))
        .build()
        .unwrap();
    let h = s.start().await.unwrap();
    let all = AlarmPolicy {
        events: vec![AlarmKind::Failure],
        recipients: vec![],
        ..AlarmPolicy::default()
    };
    h.scheduler()
        .upsert(
            Job::builder("bad", "bad", Schedule::every(S).unwrap())
                .retry(RetryPolicy::none())
                .alarm(all)
                .build()
                .unwrap(),
        )
        .await
        .unwrap();
    h.scheduler()
        .upsert(
            Job::builder("tick", "ok", Schedule::every(S).unwrap())
                .build()
                .unwrap(),
        )
        .await
        .unwrap();
    advance(Duration::from_secs(60)).await;
    h.shutdown().await;
    let ticks = log.of("tick");
    assert!(ticks.len() >= 59, "{}", ticks.len());
    assert!(
        ticks.iter().all(|s| s.started == s.fire_at),
        "a fire started late while alarms hung"
    );
    let failed = store
        .alarms(&jobwheel::AlarmQuery::new(1000).status(Some(AlarmStatus::Failed)))
        .await
        .unwrap();
    assert!(
        !failed.is_empty(),
        "timed-out deliveries are recorded failed"
    );
    assert!(failed.iter().all(|a| {
        a.last_error
            .as_deref()
            .unwrap()
            .contains("stuck: timed out")
    }));
    assert!(
        failed.iter().any(|a| a.next_attempt_at.is_some()),
        "and will be retried"
    );
}

#[tokio::test(start_paused = true)]
async fn backpressure_never_claims_more_than_the_executor_can_run() {
    let (store, _locks, clock) = backend("2026-01-01T00:00:00Z");
    let locks = revocable(&clock);
    let (cur, max) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (c, m) = (cur.clone(), max.clone());
    let exec = jobwheel::LocalExecutor::new(
        jobwheel::LocalExecutorConfig::default()
            .concurrency(4)
            .slow_lane(jobwheel::SlowLaneConfig::default().concurrency(0)),
    )
    .unwrap();
    let s = Scheduler::builder()
        .store(store.clone())
        .locks(locks.clone())
        .executor(exec)
        .handler("work", move |_ctx: JobContext| {
            let (c, m) = (c.clone(), m.clone());
            async move {
                m.fetch_max(c.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
                tokio::time::sleep(S).await;
                c.fetch_sub(1, Ordering::SeqCst);
                Ok::<(), JobError>(())
            }
        })
        .config(config("n1"))
        .build()
        .unwrap();
    let h = s.start().await.unwrap();
    for i in 0..50 {
        h.scheduler()
            .upsert(
                Job::builder(
                    format!("w{i}"),
                    "work",
                    Schedule::once(at("2026-01-01T00:00:00Z")),
                )
                .build()
                .unwrap(),
            )
            .await
            .unwrap();
    }
    advance(Duration::from_secs(40)).await;
    h.shutdown().await;
    assert_eq!(max.load(Ordering::SeqCst), 4, "runs in flight");
    // Four slots, plus a line of one fire (an eighth of the claims, at least one)
    // waiting to take the next slot that frees up.
    assert!(
        locks.max_held.load(Ordering::SeqCst) <= 5,
        "claimed {} fires for 4 slots and a line of 1",
        locks.max_held.load(Ordering::SeqCst)
    );
    let done = store
        .runs(&RunQuery::new().status(RunStatus::Succeeded).limit(1000))
        .await
        .unwrap();
    assert_eq!(done.len(), 50, "every job ran once");
}

#[tokio::test(start_paused = true)]
async fn slow_jobs_move_to_the_slow_lane_and_leave_fast_slots_free() {
    use jobwheel::{
        Execution, Executor, LocalExecutor, LocalExecutorConfig, Outcome, SlowLaneConfig,
    };
    let lanes = SlowLaneConfig::default()
        .concurrency(1)
        .slow_run(Duration::from_millis(100))
        .slow_runs(2)
        .window(Duration::from_secs(60));
    let exec = LocalExecutor::new(
        LocalExecutorConfig::default()
            .concurrency(1)
            .slow_lane(lanes),
    )
    .unwrap();
    let ctx = |id: &str| JobContext {
        job: Arc::new(
            Job::builder(id, "h", Schedule::every(S).unwrap())
                .build()
                .unwrap(),
        ),
        run_id: jobwheel::RunId(1),
        fire_at: at("2026-01-01T00:00:00Z"),
        attempt: 1,
        trigger: TriggerKind::Schedule,
        token: 1,
        node_id: "n".into(),
        cancel: tokio_util::sync::CancellationToken::new(),
        deadline: None,
        shard: None,
        trace: None,
        upstream: Vec::new(),
        log: jobwheel::RunLogger::discard(),
        executed_on: Default::default(),
    };
    let sleeper = |ms: u64| -> Arc<dyn jobwheel::JobHandler> {
        Arc::new(move |_c: JobContext| async move {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            Ok::<(), JobError>(())
        })
    };
    let slow_id = jobwheel::JobId::new("slow").unwrap();
    for _ in 0..3 {
        let out = exec
            .execute(Execution {
                ctx: ctx("slow"),
                handler: sleeper(200),
                timeout: None,
            })
            .await;
        assert_eq!(out, Outcome::Succeeded);
    }
    assert!(
        exec.is_slow(&slow_id),
        "three slow runs (more than 2) in a minute"
    );
    assert_eq!(exec.capacity(), 1, "capacity is the fast lane's free slots");
    let e2 = exec.clone();
    let hog = tokio::spawn(async move {
        e2.execute(Execution {
            ctx: ctx("slow"),
            handler: sleeper(10_000),
            timeout: None,
        })
        .await
    });
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert_eq!(
        exec.capacity(),
        1,
        "the slow run holds the slow lane's slot, not a fast one"
    );
    let started = tokio::time::Instant::now();
    let fast = exec
        .execute(Execution {
            ctx: ctx("fast"),
            handler: sleeper(5),
            timeout: None,
        })
        .await;
    assert_eq!(fast, Outcome::Succeeded);
    assert!(
        started.elapsed() < Duration::from_millis(10),
        "a fast job is not stuck behind a slow one"
    );
    let e3 = exec.clone();
    let spill = tokio::spawn(async move {
        e3.execute(Execution {
            ctx: ctx("slow"),
            handler: sleeper(10_000),
            timeout: None,
        })
        .await
    });
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert_eq!(
        exec.capacity(),
        0,
        "with the slow lane full, a slow run takes a fast slot instead of queueing"
    );
    let cancel = ctx("fast");
    let token = cancel.cancel.clone();
    let e4 = exec.clone();
    let waiting = tokio::spawn(async move {
        e4.execute(Execution {
            ctx: cancel,
            handler: sleeper(1),
            timeout: None,
        })
        .await
    });
    tokio::time::sleep(Duration::from_millis(1)).await;
    token.cancel();
    assert_eq!(
        waiting.await.unwrap(),
        Outcome::Cancelled,
        "a run started beyond the capacity waits for a slot and can be cancelled"
    );
    assert_eq!(spill.await.unwrap(), Outcome::Succeeded);
    assert_eq!(hog.await.unwrap(), Outcome::Succeeded);
    tokio::time::sleep(Duration::from_secs(61)).await;
    assert!(
        !exec.is_slow(&slow_id),
        "back in the fast lane once its slow runs age out"
    );
}
