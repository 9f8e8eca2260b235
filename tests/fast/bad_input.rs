//! Bad input at every edge: each value is refused with a typed error naming the field,
//! or runs through a fire without panicking the engine or wedging the job.

use crate::support;
use jobwheel::store::JobsExt as _;

use jobwheel::limits::{MAX_PAGE, MAX_SPAN};
use jobwheel::{
    Execution, Executor, Job, JobContext, JobError, Outcome, RetryPolicy, RunQuery, RunStatus,
    Schedule, Scheduler, SchedulerConfig, Timestamp,
};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use support::*;

const S: Duration = Duration::from_secs(1);

fn nested(depth: usize) -> Value {
    let mut v = json!(1);
    for _ in 0..depth {
        v = Value::Array(vec![v]);
    }
    v
}

#[test]
fn durations_and_instants_out_of_range_are_refused_naming_the_field() {
    let every = || Schedule::every(S).unwrap();
    let job = |b: jobwheel::JobBuilder| b.build().unwrap_err().field().map(str::to_string);
    assert_eq!(
        job(Job::builder("j", "h", every()).timeout(Duration::MAX)).as_deref(),
        Some("job.timeout")
    );
    assert_eq!(
        job(Job::builder("j", "h", every()).misfire_threshold(Duration::MAX)).as_deref(),
        Some("job.misfire_threshold")
    );
    assert_eq!(
        RetryPolicy::new(3, Duration::MAX, Duration::MAX)
            .unwrap_err()
            .field(),
        Some("retry.base")
    );
    assert_eq!(
        RetryPolicy::new(3, S, Duration::MAX).unwrap_err().field(),
        Some("retry.max_delay")
    );
    let huge = Schedule::interval(Duration::MAX, Timestamp::now()).unwrap();
    assert_eq!(
        job(Job::builder("j", "h", huge)).as_deref(),
        Some("schedule.every")
    );
    let far =
        Schedule::interval(Duration::from_millis(1), Timestamp::from_millis(i64::MIN)).unwrap();
    assert_eq!(
        job(Job::builder("j", "h", far)).as_deref(),
        Some("schedule.anchor")
    );
    let never = Schedule::once(Timestamp::from_millis(i64::MAX));
    assert_eq!(
        job(Job::builder("j", "h", never)).as_deref(),
        Some("schedule.at")
    );
    // A stored or API-supplied job is held to the same ranges.
    let text = r#"{"id":"j","handler":"h","schedule":{"kind":"interval","every":"1s"},"timeout":"500000000000y"}"#;
    let err = serde_json::from_str::<Job>(text).unwrap_err().to_string();
    assert!(err.contains("job.timeout"), "{err}");
}

#[test]
fn config_values_that_cannot_work_are_refused_naming_the_field() {
    let cases: [(SchedulerConfig, &str); 9] = [
        (
            SchedulerConfig::default().lease_ttl(Duration::MAX),
            "config.lease_ttl",
        ),
        (
            SchedulerConfig::default().lookahead(Duration::MAX),
            "config.lookahead",
        ),
        (
            SchedulerConfig::default().heartbeat(Duration::from_secs(u64::MAX / 4)),
            "config.heartbeat",
        ),
        (
            SchedulerConfig::default().write_batch(usize::MAX),
            "config.write_batch",
        ),
        (
            SchedulerConfig::default().claim_batch(usize::MAX),
            "config.claim_batch",
        ),
        (
            SchedulerConfig::default().claim_window(usize::MAX),
            "config.claim_window",
        ),
        (
            SchedulerConfig::default().dead_after_beats(u32::MAX),
            "config.dead_after_beats",
        ),
        (
            SchedulerConfig::default().max_payload_bytes(usize::MAX),
            "config.max_payload_bytes",
        ),
        (
            SchedulerConfig::default().run_retention(Duration::MAX),
            "config.run_retention",
        ),
    ];
    for (c, field) in cases {
        assert_eq!(c.validate().unwrap_err().field(), Some(field));
    }
    let from_file: SchedulerConfig = serde_json::from_str(r#"{"lease_ttl":"500000000000y"}"#)
        .expect("humantime reads it; validate() refuses it");
    assert_eq!(
        from_file.validate().unwrap_err().field(),
        Some("config.lease_ttl")
    );
}

#[test]
fn deep_payloads_are_refused_without_overflowing_the_stack() {
    for depth in [65, 200, 10_000, 200_000] {
        let err = Job::builder("deep", "h", Schedule::every(S).unwrap())
            .payload(nested(depth))
            .build()
            .unwrap_err();
        assert_eq!(err.field(), Some("job.payload"), "depth {depth}");
    }
    Job::builder("deep", "h", Schedule::every(S).unwrap())
        .payload(nested(64))
        .build()
        .expect("64 levels are accepted");
}

#[tokio::test(start_paused = true)]
async fn the_largest_accepted_values_run_a_full_fire_without_panicking() {
    let (store, locks, clock) = backend("2026-01-01T00:00:00Z");
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let s = Scheduler::builder()
        .store(store.clone())
        .locks(locks)
        .handler("h", move |_ctx: JobContext| {
            c.fetch_add(1, Ordering::SeqCst);
            async { Err(JobError::msg("fails")) }
        })
        .config(config("n1"))
        .build()
        .unwrap();
    let h = s.start().await.unwrap();
    let t0 = jobwheel::Clock::now(&*clock);
    let long = Job::builder("long", "h", Schedule::interval(MAX_SPAN, t0).unwrap())
        .timeout(MAX_SPAN)
        .misfire_threshold(MAX_SPAN)
        .retry(RetryPolicy::new(3, MAX_SPAN, MAX_SPAN).unwrap())
        .build()
        .unwrap();
    let once = Job::builder("once", "h", Schedule::once(t0 + S))
        .retry(RetryPolicy::new(2, MAX_SPAN, MAX_SPAN).unwrap())
        .timeout(MAX_SPAN)
        .build()
        .unwrap();
    s.upsert(long).await.unwrap();
    s.upsert(once).await.unwrap();
    advance(5 * S).await;
    assert_eq!(calls.load(Ordering::SeqCst), 2, "both fired once");
    let runs = s.runs(&RunQuery::new().limit(usize::MAX)).await.unwrap();
    assert_eq!(runs.len(), 2);
    assert!(runs.iter().all(|r| r.status == RunStatus::Failed));
    let rec = s.get("once").await.unwrap().unwrap();
    assert!(rec.running.is_none(), "not left running");
    assert_eq!(
        rec.next_fire_at(),
        Some(t0 + S + MAX_SPAN),
        "the retry waits its 100 years"
    );
    assert_eq!(s.metrics().panics, 0);
    let report = h.shutdown().await;
    assert!(report.drained);
}

#[tokio::test(start_paused = true)]
async fn a_cron_expression_that_never_fires_again_is_refused_at_upsert() {
    let (store, locks, _clock) = backend("2026-01-01T00:00:00Z");
    let s = Scheduler::builder()
        .store(store.clone())
        .locks(locks)
        .handler("h", |_ctx: JobContext| async { Ok(()) })
        .config(config("n1"))
        .build()
        .unwrap();
    for expr in [
        "0 0 0 30 2 ?",
        "0 0 0 31 4 ?",
        "0 0 0 29 2 ? 2101",
        "0 0 0 1 1 ? 2020",
    ] {
        let job = Job::builder("never", "h", Schedule::cron(expr, "UTC").unwrap())
            .build()
            .unwrap();
        let err = s.upsert(job).await.unwrap_err();
        assert_eq!(err.field(), Some("job.schedule"), "{expr}");
        assert!(err.to_string().contains("never fires"), "{err}");
    }
    assert!(s.get("never").await.unwrap().is_none(), "nothing stored");
    let leap = Job::builder("leap", "h", Schedule::cron("0 0 0 29 2 ?", "UTC").unwrap())
        .build()
        .unwrap();
    s.upsert(leap).await.expect("Feb 29 fires in leap years");
}

#[tokio::test(start_paused = true)]
async fn a_handler_error_with_nul_bytes_is_recorded() {
    let (store, locks, _clock) = backend("2026-01-01T00:00:00Z");
    let s = Scheduler::builder()
        .store(store.clone())
        .locks(locks)
        .handler("h", |_ctx: JobContext| async {
            Err(JobError::msg("bad\0byte"))
        })
        .config(config("n1"))
        .build()
        .unwrap();
    let h = s.start().await.unwrap();
    s.upsert(
        Job::builder("nul", "h", Schedule::every(S).unwrap())
            .retry(RetryPolicy::none())
            .build()
            .unwrap(),
    )
    .await
    .unwrap();
    advance(3 * S).await;
    let runs = s
        .runs(&RunQuery::new().job(jobwheel::JobId::new("nul").unwrap()))
        .await
        .unwrap();
    assert!(runs.len() >= 2, "the job keeps firing: {runs:?}");
    assert!(runs.iter().all(|r| r.status == RunStatus::Failed));
    assert!(runs[0].error.as_deref().unwrap().starts_with("bad"));
    assert!(h.shutdown().await.drained);
}

/// An executor that panics instead of running the handler.
struct Panicking;

#[jobwheel::async_trait]
impl Executor for Panicking {
    fn capacity(&self) -> usize {
        8
    }
    async fn execute(&self, _e: Execution) -> Outcome {
        panic!("executor bug")
    }
}

#[tokio::test(start_paused = true)]
async fn a_panic_in_the_engines_path_records_the_run_failed_and_frees_the_job() {
    let (store, locks, _clock) = backend("2026-01-01T00:00:00Z");
    let s = Scheduler::builder()
        .store(store.clone())
        .locks(locks)
        .executor(Panicking)
        .handler("h", |_ctx: JobContext| async { Ok(()) })
        .config(config("n1"))
        .build()
        .unwrap();
    let h = s.start().await.unwrap();
    s.upsert(
        Job::builder("p", "h", Schedule::every(S).unwrap())
            .retry(RetryPolicy::none())
            .build()
            .unwrap(),
    )
    .await
    .unwrap();
    advance(Duration::from_millis(3500)).await;
    let runs = s
        .runs(&RunQuery::new().job(jobwheel::JobId::new("p").unwrap()))
        .await
        .unwrap();
    assert!(
        runs.len() >= 3,
        "the job keeps firing after a panic: {runs:?}"
    );
    for r in &runs {
        assert_eq!(r.status, RunStatus::Failed);
        assert!(
            r.error.as_deref().unwrap().contains("executor bug"),
            "{r:?}"
        );
    }
    assert!(s.metrics().panics >= 3);
    let report = h.shutdown().await;
    assert!(report.drained);
    assert_eq!(report.cancelled, 0);
}

#[tokio::test(start_paused = true)]
async fn huge_query_limits_are_lowered_not_refused() {
    let (store, locks, _clock) = backend("2026-01-01T00:00:00Z");
    let s = Scheduler::builder()
        .store(store)
        .locks(locks)
        .handler("h", |_ctx: JobContext| async { Ok(()) })
        .config(config("n1"))
        .build()
        .unwrap();
    s.list_jobs(&jobwheel::JobQuery::new(usize::MAX))
        .await
        .unwrap();
    s.runs(&RunQuery::new().limit(usize::MAX)).await.unwrap();
    s.alarms(&jobwheel::AlarmQuery::new(usize::MAX))
        .await
        .unwrap();
    assert_eq!(
        RunQuery::new().limit(usize::MAX).effective_limit(),
        MAX_PAGE
    );
}

#[test]
fn messages_say_what_is_wrong() {
    let reboot = Schedule::cron("@reboot", "UTC").unwrap_err().to_string();
    assert!(
        reboot.contains("@reboot has no instant to fire at"),
        "{reboot}"
    );
    let unknown = Schedule::cron("@often", "UTC").unwrap_err().to_string();
    assert!(unknown.contains("unknown macro"), "{unknown}");
    let negative = Schedule::cron("-1 * * * * ?", "UTC")
        .unwrap_err()
        .to_string();
    assert!(negative.contains("never negative"), "{negative}");
    assert_eq!(
        Timestamp::from_millis(i64::MIN).to_string(),
        "-9223372036854775808 ms since the epoch"
    );
    assert_eq!(Timestamp::MAX.to_string(), "9999-12-31T23:59:59.999Z");
    let far = serde_json::to_string(&Timestamp::from_millis(i64::MIN)).unwrap();
    assert_eq!(
        serde_json::from_str::<Timestamp>(&far).unwrap(),
        Timestamp::from_millis(i64::MIN),
        "an instant outside the calendar round-trips as milliseconds"
    );
}

/// The one-shot idiom in a cluster: two nodes each declare "run this once, one second
/// from now" with their own `Timestamp::now()`. With `create` it runs once; the second
/// declaration neither re-arms it nor drops a pending retry.
#[tokio::test(start_paused = true)]
async fn a_one_shot_declared_by_two_nodes_with_create_runs_once() {
    let (store, locks, clock) = backend("2026-01-01T00:00:00Z");
    let calls = Arc::new(AtomicUsize::new(0));
    let mut handles = Vec::new();
    let mut nodes = Vec::new();
    for n in ["n1", "n2"] {
        let c = calls.clone();
        let s = Scheduler::builder()
            .store(store.clone())
            .locks(locks.clone())
            .handler("once", move |_ctx: JobContext| {
                c.fetch_add(1, Ordering::SeqCst);
                async { Err(JobError::msg("first attempt fails")) }
            })
            .config(config(n))
            .build()
            .unwrap();
        handles.push(s.start().await.unwrap());
        nodes.push(s);
    }
    let declare = |t: Timestamp| {
        Job::builder("welcome", "once", Schedule::once(t + S))
            .retry(RetryPolicy::new(2, 10 * S, 10 * S).unwrap())
            .build()
            .unwrap()
    };
    let t0 = jobwheel::Clock::now(&*clock);
    assert_eq!(
        nodes[0].create(declare(t0)).await.unwrap(),
        jobwheel::UpsertOutcome::Created
    );
    advance(3 * S).await;
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "ran once; a retry is pending"
    );
    // The second node starts up later and declares the same one-shot.
    let t1 = jobwheel::Clock::now(&*clock);
    assert_eq!(
        nodes[1].create(declare(t1)).await.unwrap(),
        jobwheel::UpsertOutcome::Kept
    );
    advance(20 * S).await;
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "the first attempt and its retry, nothing more"
    );
    let runs = nodes[0]
        .runs(&RunQuery::new().job(jobwheel::JobId::new("welcome").unwrap()))
        .await
        .unwrap();
    assert_eq!(runs.len(), 2);
    assert!(
        runs.iter()
            .any(|r| r.trigger == jobwheel::TriggerKind::Retry)
    );
    for h in handles {
        h.shutdown().await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_due_job_no_node_serves_is_reported_once_it_is_overdue() {
    let (store, locks, clock) = backend("2026-01-01T00:00:00Z");
    let s = Scheduler::builder()
        .store(store.clone())
        .locks(locks)
        .handler("h", |_ctx: JobContext| async { Ok(()) })
        .config(config("n1"))
        .build()
        .unwrap();
    let h = s.start().await.unwrap();
    // Stored by another deployment whose nodes have the handler; none runs now.
    let orphan = Job::builder("orphan", "elsewhere", Schedule::every(S).unwrap())
        .build()
        .unwrap();
    let t0 = jobwheel::Clock::now(&*clock);
    store.upsert(&orphan, Some(t0 + S)).await.unwrap();
    advance(3 * S).await;
    assert_eq!(
        s.metrics().unserved_jobs,
        0,
        "not reported before the misfire threshold (5 s) passes"
    );
    advance(10 * S).await;
    assert_eq!(
        s.metrics().unserved_jobs,
        1,
        "reported once, not once per poll"
    );
    assert!(
        s.runs(&RunQuery::new()).await.unwrap().is_empty(),
        "never run here"
    );
    h.shutdown().await;
}

/// A payload number with more digits than an `f64` holds reads back as the same job
/// after a store round trip (found by the `stored_job` fuzzer).
#[test]
fn a_long_payload_number_survives_a_store_round_trip() {
    let text = r#"{"id":"tuek","handler":"h","schedule":{"kind":"interval","every":"1w"},"payload":{"n":35555555555555555555555555555555555555555555555555555555555555555555555555555555555}}"#;
    let job = jobwheel::Job::from_stored(text).unwrap();
    let again = jobwheel::Job::from_stored(&serde_json::to_string(&job).unwrap()).unwrap();
    assert_eq!(again, job);
}
