//! The fire cycle on the memory backend, deterministically on a paused tokio clock:
//! timing, retries, overlap, timeouts, operations and configuration (late fires are
//! in `engine_misfire.rs`).

use crate::support;

use jobwheel::store::Jobs;
use jobwheel::{
    Error, Job, JobContext, JobError, RetryPolicy, RunStatus, Schedule, Scheduler, SchedulerConfig,
    TriggerKind,
};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use support::*;

const S: Duration = Duration::from_secs(1);

#[tokio::test(start_paused = true)]
async fn cron_fires_on_time_across_a_dst_change() {
    let (_store, log, h) = recording_scheduler("2026-03-08T06:50:00Z").await;
    h.scheduler()
        .upsert(
            Job::builder(
                "fixed",
                "h",
                Schedule::cron("0 30 2 * * ?", "America/New_York").unwrap(),
            )
            .build()
            .unwrap(),
        )
        .await
        .unwrap();
    h.scheduler()
        .upsert(
            Job::builder(
                "stepped",
                "h",
                Schedule::cron("0 0/30 * * * ?", "America/New_York").unwrap(),
            )
            .build()
            .unwrap(),
        )
        .await
        .unwrap();
    advance(Duration::from_secs(2 * 3600)).await;
    h.shutdown().await;
    let fires = |job: &str| log.of(job).iter().map(|s| s.fire_at).collect::<Vec<_>>();
    assert_eq!(
        fires("fixed"),
        [at("2026-03-08T07:00:00Z")],
        "02:30 in the gap fires at 03:00 EDT"
    );
    assert_eq!(
        fires("stepped"),
        [
            "2026-03-08T07:00:00Z",
            "2026-03-08T07:30:00Z",
            "2026-03-08T08:00:00Z",
            "2026-03-08T08:30:00Z"
        ]
        .map(at)
    );
    for seen in log.all() {
        let lag = seen.started.duration_since(seen.fire_at);
        assert!(
            lag < Duration::from_millis(5),
            "started {lag:?} after its instant: {seen:?}"
        );
        assert!(seen.started >= seen.fire_at, "never early: {seen:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn retries_follow_the_backoff_formula_then_return_to_the_schedule() {
    let (store, locks, clock) = backend("2026-01-01T00:00:00Z");
    let log = Log::default();
    let s = Scheduler::builder()
        .store(store.clone())
        .locks(locks)
        .handler("h", failing(&log, &clock))
        .config(config("n1"))
        .build()
        .unwrap();
    let h = s.start().await.unwrap();
    let retry = RetryPolicy::new(3, Duration::from_secs(60), Duration::from_secs(3600)).unwrap();
    let job = Job::builder("flaky", "h", Schedule::cron("0 0 * * * ?", "UTC").unwrap())
        .retry(retry)
        .build()
        .unwrap();
    h.scheduler().upsert(job).await.unwrap();
    advance(Duration::from_secs(600)).await;
    h.shutdown().await;
    // Created exactly on the hour: the first fire is now (at or after, never before).
    let t = at("2026-01-01T00:00:00Z");
    let seen = log.of("flaky");
    let starts: Vec<_> = seen.iter().map(|s| s.started).collect();
    assert_eq!(
        starts,
        [t, t + Duration::from_secs(60), t + Duration::from_secs(180)],
        "60 s, then 120 s"
    );
    assert_eq!(
        seen.iter().map(|s| s.attempt).collect::<Vec<_>>(),
        [1, 2, 3]
    );
    let runs = runs_of(&store, "flaky").await;
    assert_eq!(
        runs.iter().map(|r| r.trigger).collect::<Vec<_>>(),
        [
            TriggerKind::Schedule,
            TriggerKind::Retry,
            TriggerKind::Retry
        ]
    );
    assert_eq!(
        runs.iter().map(|r| r.will_retry).collect::<Vec<_>>(),
        [true, true, false]
    );
    assert!(
        runs.iter()
            .all(|r| r.status == RunStatus::Failed && r.error.as_deref() == Some("boom"))
    );
    let rec = store
        .get(&jobwheel::JobId::new("flaky").unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (rec.attempt(), rec.next_fire_at()),
        (0, Some(at("2026-01-01T01:00:00Z"))),
        "exhausted: back to the schedule"
    );
}

#[tokio::test(start_paused = true)]
async fn a_job_never_overlaps_itself() {
    let (store, locks, _clock) = backend("2026-01-01T00:00:00Z");
    let (now, max, count) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
    );
    let (n, m, c) = (now.clone(), max.clone(), count.clone());
    let slow = move |_ctx: JobContext| {
        let (n, m, c) = (n.clone(), m.clone(), c.clone());
        async move {
            let cur = n.fetch_add(1, Ordering::SeqCst) + 1;
            m.fetch_max(cur, Ordering::SeqCst);
            c.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(3500)).await;
            n.fetch_sub(1, Ordering::SeqCst);
            Ok::<(), JobError>(())
        }
    };
    let s = Scheduler::builder()
        .store(store.clone())
        .locks(locks)
        .handler("slow", slow)
        .config(config("n1"))
        .build()
        .unwrap();
    let h = s.start().await.unwrap();
    h.scheduler()
        .upsert(
            Job::builder("tick", "slow", Schedule::every(S).unwrap())
                .build()
                .unwrap(),
        )
        .await
        .unwrap();
    advance(Duration::from_secs(30)).await;
    h.shutdown().await;
    assert_eq!(max.load(Ordering::SeqCst), 1, "two runs of one job at once");
    assert!(
        count.load(Ordering::SeqCst) >= 7,
        "runs kept coming: {}",
        count.load(Ordering::SeqCst)
    );
}

#[tokio::test(start_paused = true)]
async fn timeouts_and_panics_are_failed_runs() {
    let (store, locks, _clock) = backend("2026-01-01T00:00:00Z");
    let s = Scheduler::builder()
        .store(store.clone())
        .locks(locks)
        .handler("sleepy", |_ctx: JobContext| async {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok::<(), JobError>(())
        })
        .handler("panicky", |_ctx: JobContext| async {
            if true {
                panic!("kaboom");
            }
            Ok::<(), JobError>(())
        })
        .config(config("n1"))
        .build()
        .unwrap();
    let h = s.start().await.unwrap();
    let once = Schedule::once(at("2026-01-01T00:00:01Z"));
    h.scheduler()
        .upsert(
            Job::builder("slow", "sleepy", once.clone())
                .timeout(Duration::from_secs(2))
                .retry(RetryPolicy::none())
                .build()
                .unwrap(),
        )
        .await
        .unwrap();
    h.scheduler()
        .upsert(
            Job::builder("bad", "panicky", once)
                .retry(RetryPolicy::none())
                .build()
                .unwrap(),
        )
        .await
        .unwrap();
    advance(Duration::from_secs(10)).await;
    h.shutdown().await;
    let slow = runs_of(&store, "slow").await;
    assert_eq!(slow.len(), 1);
    assert_eq!(slow[0].status, RunStatus::TimedOut);
    assert_eq!(
        slow[0].duration(),
        Some(Duration::from_secs(2)),
        "cancelled at its timeout"
    );
    let bad = runs_of(&store, "bad").await;
    assert_eq!(bad[0].status, RunStatus::Failed);
    assert_eq!(bad[0].error.as_deref(), Some("handler panicked: kaboom"));
}

#[tokio::test(start_paused = true)]
async fn pause_resume_and_trigger_now() {
    let (_store, log, h) = recording_scheduler("2026-01-01T00:00:00Z").await;
    h.scheduler()
        .upsert(
            Job::builder(
                "tick",
                "h",
                Schedule::every(Duration::from_secs(10)).unwrap(),
            )
            .build()
            .unwrap(),
        )
        .await
        .unwrap();
    h.scheduler()
        .upsert(
            Job::builder("later", "h", Schedule::once(at("2026-06-01T00:00:00Z")))
                .build()
                .unwrap(),
        )
        .await
        .unwrap();
    advance(Duration::from_secs(35)).await;
    assert_eq!(log.of("tick").len(), 4, "fires at 0, 10, 20, 30 s");
    h.scheduler().pause("tick").await.unwrap();
    advance(Duration::from_secs(60)).await;
    assert_eq!(log.of("tick").len(), 4, "a paused job does not fire");
    h.scheduler().resume("tick").await.unwrap();
    advance(Duration::from_secs(25)).await;
    let after: Vec<_> = log.of("tick").iter().skip(4).map(|s| s.fire_at).collect();
    assert_eq!(
        after,
        [at("2026-01-01T00:01:40Z"), at("2026-01-01T00:01:50Z")],
        "resumes from its next fire"
    );
    h.scheduler().trigger_now("later").await.unwrap();
    advance(Duration::from_millis(10)).await;
    let later = log.of("later");
    assert_eq!(later.len(), 1, "trigger_now runs at once");
    assert_eq!(later[0].trigger, TriggerKind::Manual);
    let rec = h.scheduler().get("later").await.unwrap().unwrap();
    assert_eq!(
        rec.next_fire_at(),
        Some(at("2026-06-01T00:00:00Z")),
        "a manual run keeps the one-shot's own instant"
    );
    assert!(matches!(
        h.scheduler().pause("nope").await,
        Err(Error::NotFound { .. })
    ));
    h.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn upsert_refuses_bad_input_and_stores_nothing() {
    let (store, locks, _clock) = backend("2026-01-01T00:00:00Z");
    let s = Scheduler::builder()
        .store(store.clone())
        .locks(locks)
        .handler("h", |_ctx: JobContext| async { Ok::<(), JobError>(()) })
        .config(config("n1").max_payload_bytes(32))
        .build()
        .unwrap();
    let every = Schedule::every(S).unwrap();
    let err = s
        .upsert(Job::builder("a", "nobody", every.clone()).build().unwrap())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::UnknownHandler { handler } if handler == "nobody"),
        "{err:?}"
    );
    assert!(err.to_string().contains("\"nobody\""), "{err}");
    let big = Job::builder("b", "h", every)
        .payload(serde_json::json!({"text": "x".repeat(40)}))
        .build()
        .unwrap();
    assert_eq!(
        s.upsert(big).await.unwrap_err().field(),
        Some("job.payload")
    );
    assert_eq!(store.job_count(), 0, "nothing stored");
    assert!(matches!(
        s.remove("bad id").await,
        Err(Error::Invalid {
            field: "job.id",
            ..
        })
    ));
}

#[test]
fn local_executor_config_loads_and_refuses_what_cannot_work() {
    use jobwheel::{LocalExecutor, LocalExecutorConfig, SlowLaneConfig};
    let c: LocalExecutorConfig =
        serde_json::from_str(r#"{"concurrency":8,"slow_lane":{"slow_run":"2s"}}"#).unwrap();
    assert_eq!(c.concurrency, 8);
    assert_eq!(c.slow_lane.slow_run, Duration::from_secs(2));
    assert_eq!(c.slow_lane.concurrency, 16, "defaults fill the rest");
    assert!(
        serde_json::from_str::<LocalExecutorConfig>(r#"{"concurency":8}"#).is_err(),
        "typos are refused"
    );
    let lane = |f: fn(&mut SlowLaneConfig)| {
        let mut c = LocalExecutorConfig::default();
        f(&mut c.slow_lane);
        c
    };
    let cases = [
        (
            LocalExecutorConfig::default().concurrency(0),
            "local_executor.concurrency",
        ),
        (
            LocalExecutorConfig::default().concurrency(usize::MAX),
            "local_executor.concurrency",
        ),
        (
            lane(|l| l.concurrency = usize::MAX),
            "local_executor.slow_lane.concurrency",
        ),
        (
            lane(|l| l.slow_run = Duration::ZERO),
            "local_executor.slow_lane.slow_run",
        ),
        (
            lane(|l| l.window = Duration::ZERO),
            "local_executor.slow_lane.window",
        ),
    ];
    for (c, field) in cases {
        assert_eq!(c.validate().unwrap_err().field(), Some(field));
        assert_eq!(
            LocalExecutor::new(c).unwrap_err().field(),
            Some(field),
            "the constructor refuses it too, never panics"
        );
    }
    assert!(
        LocalExecutor::new(lane(|l| l.concurrency = 0)).is_ok(),
        "an empty slow lane means slow jobs share the fast lane"
    );
    assert_eq!(
        LocalExecutor::with_concurrency(0).unwrap_err().field(),
        Some("local_executor.concurrency")
    );
}

#[test]
fn config_loads_with_humane_durations_and_refuses_bad_values() {
    let c: SchedulerConfig = serde_json::from_str(
        r#"{"poll_interval":"250ms","lease_ttl":"1m 30s","run_retention":"30days"}"#,
    )
    .unwrap();
    assert_eq!(c.poll_interval, Duration::from_millis(250));
    assert_eq!(c.lease_ttl, Duration::from_secs(90));
    assert_eq!(c.run_retention, Some(Duration::from_secs(30 * 86400)));
    assert_eq!(
        c.lookahead,
        Duration::from_secs(5),
        "defaults fill the rest"
    );
    assert!(
        serde_json::from_str::<SchedulerConfig>(r#"{"poll_intervall":"1s"}"#).is_err(),
        "typos are refused"
    );
    let build = |c: SchedulerConfig| {
        Scheduler::builder()
            .store(jobwheel::memory::MemoryStore::new())
            .locks(jobwheel::memory::LocalLocks::new())
            .handler("h", |_c: JobContext| async { Ok::<(), JobError>(()) })
            .config(c)
            .build()
    };
    let cases = [
        (
            SchedulerConfig::default().poll_interval(Duration::ZERO),
            "config.poll_interval",
        ),
        (
            SchedulerConfig::default().lease_ttl(Duration::from_millis(10)),
            "config.lease_ttl",
        ),
        (
            SchedulerConfig::default().dead_after_beats(1),
            "config.dead_after_beats",
        ),
        (
            SchedulerConfig::default().node_id("has space"),
            "config.node_id",
        ),
        (
            SchedulerConfig::default().run_retention(Duration::ZERO),
            "config.run_retention",
        ),
    ];
    for (c, field) in cases {
        assert_eq!(build(c).unwrap_err().field(), Some(field));
    }
    assert_eq!(
        Scheduler::builder().build().unwrap_err().field(),
        Some("handler")
    );
    let no_store = Scheduler::builder()
        .handler("h", |_c: JobContext| async { Ok::<(), JobError>(()) })
        .build();
    assert_eq!(no_store.unwrap_err().field(), Some("scheduler.store"));
}

#[tokio::test(start_paused = true)]
async fn run_retention_purges_old_runs_hourly() {
    let (store, locks, clock) = backend("2026-01-01T00:00:00Z");
    let log = Log::default();
    let s = Scheduler::builder()
        .store(store.clone())
        .locks(locks)
        .handler("h", recording(&log, &clock))
        .config(config("n1").run_retention(Duration::from_secs(3600)))
        .build()
        .unwrap();
    let h = s.start().await.unwrap();
    h.scheduler()
        .upsert(
            Job::builder(
                "tick",
                "h",
                Schedule::every(Duration::from_secs(600)).unwrap(),
            )
            .build()
            .unwrap(),
        )
        .await
        .unwrap();
    // To 2 January 02:01: one day purged whole at 01:00 (an hour's retention
    // reaches back into the 1st), the 2nd not yet.
    advance(Duration::from_secs(26 * 3600 + 60)).await;
    let runs = runs_of(&store, "tick").await;
    let second = at("2026-01-02T00:00:00Z");
    assert!(
        runs.iter().all(|r| r.started_at >= second),
        "the 1st's runs were purged"
    );
    assert_eq!(
        runs.len(),
        13,
        "the 2nd's fires at 00:00, 00:10, …, 02:00 stay"
    );
    // To 3 January 02:01: the 2nd goes whole too.
    advance(Duration::from_secs(24 * 3600)).await;
    h.shutdown().await;
    assert_eq!(
        log.of("tick").len(),
        2 * 144 + 13,
        "a fire every 10 minutes"
    );
    let runs = runs_of(&store, "tick").await;
    assert!(
        runs.iter()
            .all(|r| r.started_at >= at("2026-01-03T00:00:00Z")),
        "{runs:?}"
    );
    assert_eq!(runs.len(), 13, "the 3rd's fires stay");
}

#[tokio::test(start_paused = true)]
async fn errors_say_what_kind_of_thing_went_wrong() {
    let (store, locks, _clock) = backend("2026-01-01T00:00:00Z");
    let s = Scheduler::builder()
        .store(store)
        .locks(locks)
        .handler("h", |_c: JobContext| async { Ok::<(), JobError>(()) })
        .config(config("n1"))
        .build()
        .unwrap();
    let running = s.start().await.unwrap();
    let again = s.start().await.unwrap_err();
    assert!(
        matches!(&again, Error::AlreadyStarted { node } if node == "n1"),
        "{again:?}"
    );
    running.shutdown().await;
    assert!(matches!(
        s.start().await.unwrap_err(),
        Error::AlreadyStarted { .. }
    ));
}

#[tokio::test(start_paused = true)]
async fn a_job_that_never_fires_by_itself_runs_once_per_trigger() {
    let (store, log, h) = recording_scheduler("2026-01-01T00:00:00Z").await;
    let s = h.scheduler();
    s.upsert(
        Job::builder("manual", "h", Schedule::never())
            .build()
            .unwrap(),
    )
    .await
    .unwrap();
    advance(Duration::from_secs(6 * 3600)).await;
    assert!(log.of("manual").is_empty(), "no fire of its own in 6 h");
    let rec = store
        .get(&jobwheel::JobId::new("manual").unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(rec.next_fire_at(), None);

    s.trigger_now("manual").await.unwrap();
    advance(10 * S).await;
    s.trigger_now("manual").await.unwrap();
    advance(10 * S).await;
    // Paused and resumed, it stays without a fire of its own.
    s.pause("manual").await.unwrap();
    s.resume("manual").await.unwrap();
    advance(Duration::from_secs(3600)).await;
    let seen = log.of("manual");
    assert_eq!(seen.len(), 2, "once per trigger: {seen:?}");
    assert!(
        seen.iter()
            .all(|x| x.trigger == TriggerKind::Manual && x.attempt == 1),
        "{seen:?}"
    );
    let rec = store
        .get(&jobwheel::JobId::new("manual").unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(rec.next_fire_at(), None, "idle after its triggers");
    h.shutdown().await;
}
