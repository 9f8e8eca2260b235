//! Handlers as Rust users write them, on a paused clock: typed payloads, `?` on
//! foreign errors with the whole chain in the run log, `permanent` and `retry_after`.

use crate::support;

use jobwheel::{
    AlarmKind, Job, JobContext, JobError, JobResult, RetryPolicy, RunStatus, Schedule, Scheduler,
    TriggerKind,
};
use serde::Deserialize;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::*;

const BASE: &str = "2026-01-01T00:00:00Z";

#[derive(Debug, Deserialize, PartialEq, Clone)]
struct Report {
    format: String,
    pages: u32,
}

/// A handler taking its payload typed, as an `async fn`.
async fn report(ctx: JobContext, p: Report) -> JobResult {
    SEEN.lock().unwrap().push((ctx.job.id().to_string(), p));
    Ok(())
}

static SEEN: Mutex<Vec<(String, Report)>> = Mutex::new(Vec::new());

/// A failure the way a real dependency reports it: an `anyhow` context over an io error.
fn fetch() -> anyhow::Result<()> {
    let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connection refused");
    Err(anyhow::Error::new(io).context("fetching the upstream report"))
}

fn job(id: &str, handler: &str, retry: RetryPolicy) -> Job {
    Job::builder(
        id,
        handler,
        Schedule::once(at(BASE) + Duration::from_secs(1)),
    )
    .retry(retry)
    .build()
    .unwrap()
}

async fn scheduler_with(
    name: &'static str,
    h: impl jobwheel::JobHandler,
) -> (jobwheel::memory::MemoryStore, jobwheel::SchedulerHandle) {
    let (store, locks, _clock) = backend(BASE);
    let s = Scheduler::builder()
        .store(store.clone())
        .locks(locks)
        .handler(name, h)
        .handler("report", report)
        .config(config("n1"))
        .build()
        .unwrap();
    (store, s.start().await.unwrap())
}

#[tokio::test(start_paused = true)]
async fn typed_payloads_decode_and_a_mismatch_fails_once_without_retry() {
    let (store, h) = scheduler_with("unused", |_c: JobContext| async { Ok(()) }).await;
    let retry = RetryPolicy::new(5, Duration::from_secs(1), Duration::from_secs(10)).unwrap();
    let good = Job::builder("good", "report", Schedule::once(at(BASE)))
        .payload(serde_json::json!({ "format": "pdf", "pages": 3 }))
        .build()
        .unwrap();
    let bad = Job::builder("bad", "report", Schedule::once(at(BASE)))
        .payload(serde_json::json!({ "format": "pdf", "pages": "many" }))
        .retry(retry)
        .build()
        .unwrap();
    h.scheduler().upsert(good).await.unwrap();
    h.scheduler().upsert(bad).await.unwrap();
    advance(Duration::from_secs(60)).await;
    h.shutdown().await;
    let seen = SEEN.lock().unwrap().clone();
    assert_eq!(
        seen,
        [(
            "good".to_string(),
            Report {
                format: "pdf".into(),
                pages: 3
            }
        )]
    );
    let runs = runs_of(&store, "bad").await;
    assert_eq!(
        runs.len(),
        1,
        "a payload that does not decode is not retried"
    );
    assert_eq!(runs[0].status, RunStatus::Failed);
    let error = runs[0].error.as_deref().unwrap();
    assert!(
        error.contains("handlers::Report") && error.contains("pages"),
        "the error names the type and the field: {error}"
    );
}

#[tokio::test(start_paused = true)]
async fn the_run_log_keeps_the_whole_error_chain_of_a_foreign_error() {
    let (store, h) = scheduler_with("fetch", |_c: JobContext| async {
        fetch()?;
        Ok(())
    })
    .await;
    h.scheduler()
        .upsert(job("f", "fetch", RetryPolicy::none()))
        .await
        .unwrap();
    advance(Duration::from_secs(5)).await;
    h.shutdown().await;
    let runs = runs_of(&store, "f").await;
    assert_eq!(
        runs[0].error.as_deref(),
        Some("fetching the upstream report: connection refused")
    );
}

#[tokio::test(start_paused = true)]
async fn permanent_skips_the_retries_and_raises_the_final_failure() {
    let (store, h) = scheduler_with("perm", |_c: JobContext| async {
        Err(JobError::msg("account closed").permanent())
    })
    .await;
    let retry = RetryPolicy::new(5, Duration::from_secs(1), Duration::from_secs(10)).unwrap();
    h.scheduler().upsert(job("p", "perm", retry)).await.unwrap();
    advance(Duration::from_secs(120)).await;
    let alarms = h
        .scheduler()
        .alarms(&jobwheel::AlarmQuery::new(100))
        .await
        .unwrap();
    h.shutdown().await;
    let runs = runs_of(&store, "p").await;
    assert_eq!(
        runs.iter()
            .map(|r| (r.attempt, r.status))
            .collect::<Vec<_>>(),
        [(1, RunStatus::Failed)],
        "one attempt of five"
    );
    let kinds: Vec<AlarmKind> = alarms.iter().map(|a| a.event.kind).collect();
    assert!(kinds.contains(&AlarmKind::FinalFailure), "{kinds:?}");
    assert!(alarms.iter().all(|a| !a.event.will_retry));
}

#[tokio::test(start_paused = true)]
async fn retry_after_replaces_the_backoff_once() {
    let (l, c) = (
        Log::default(),
        Arc::new(jobwheel::TokioClock::starting_at(at(BASE))),
    );
    let (log, clock) = (l.clone(), c.clone());
    let (store, h) = scheduler_with("later", move |ctx: JobContext| {
        log.record(&ctx, &*clock);
        let attempt = ctx.attempt;
        async move {
            match attempt {
                1 => Err(JobError::msg("rate limited").retry_after(Duration::from_secs(600))),
                _ => Err(JobError::msg("still failing")),
            }
        }
    })
    .await;
    // The policy's backoff: 5 s, then 10 s.
    let retry = RetryPolicy::new(3, Duration::from_secs(5), Duration::from_secs(3600)).unwrap();
    let job = Job::builder(
        "r",
        "later",
        Schedule::once(at(BASE) + Duration::from_secs(1)),
    )
    .retry(retry)
    .build()
    .unwrap();
    h.scheduler().upsert(job).await.unwrap();
    advance(Duration::from_secs(900)).await;
    h.shutdown().await;
    let t = at(BASE);
    let started: Vec<(u32, TriggerKind, i64)> = l
        .of("r")
        .iter()
        .map(|s| (s.attempt, s.trigger, s.started.as_millis() - t.as_millis()))
        .collect();
    assert_eq!(
        started.iter().map(|s| (s.0, s.1)).collect::<Vec<_>>(),
        [
            (1, TriggerKind::Schedule),
            (2, TriggerKind::Retry),
            (3, TriggerKind::Retry)
        ]
    );
    let gap = |i: usize| Duration::from_millis((started[i].2 - started[i - 1].2) as u64);
    let near =
        |d: Duration, want: u64| d.abs_diff(Duration::from_secs(want)) < Duration::from_millis(50);
    assert!(
        near(gap(1), 600),
        "retry_after(600 s) replaced the 5 s backoff: {:?}",
        gap(1)
    );
    assert!(
        near(gap(2), 10),
        "the next retry follows the policy again: {:?}",
        gap(2)
    );
    let runs = runs_of(&store, "r").await;
    assert_eq!(runs.len(), 3);
}

/// On a `current_thread` runtime, a handler that blocks its thread inside
/// [`jobwheel::handler::blocking`] leaves the scheduler's timers running: another
/// job keeps firing while it is blocked.
#[tokio::test]
async fn a_blocking_handler_does_not_stall_other_jobs() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex, mpsc};
    let (release, wait) = mpsc::channel::<()>();
    let wait = Mutex::new(wait);
    let ticks = Arc::new(AtomicUsize::new(0));
    let t = ticks.clone();
    let s = jobwheel::Scheduler::builder()
        .backend(jobwheel::connect("memory:").await.unwrap())
        .handler(
            "block",
            jobwheel::handler::blocking(move |_ctx| {
                // Blocks this thread until the test releases it (bounded).
                let _ = wait
                    .lock()
                    .unwrap()
                    .recv_timeout(std::time::Duration::from_secs(30));
                Ok(())
            }),
        )
        .handler("tick", move |_ctx: jobwheel::JobContext| {
            t.fetch_add(1, Ordering::SeqCst);
            async { Ok(()) }
        })
        .build()
        .unwrap();
    let h = s.start().await.unwrap();
    let now = jobwheel::Timestamp::now();
    s.upsert(
        jobwheel::Job::builder("blocker", "block", jobwheel::Schedule::once(now))
            .build()
            .unwrap(),
    )
    .await
    .unwrap();
    s.upsert(
        jobwheel::Job::builder(
            "ticker",
            "tick",
            jobwheel::Schedule::every(std::time::Duration::from_millis(50)).unwrap(),
        )
        .build()
        .unwrap(),
    )
    .await
    .unwrap();
    let ticked = tokio::time::timeout(std::time::Duration::from_secs(20), async {
        while ticks.load(Ordering::SeqCst) < 5 {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(
        ticked.is_ok(),
        "the ticker fired while the blocking handler held its thread"
    );
    release.send(()).unwrap();
    let done = tokio::time::timeout(std::time::Duration::from_secs(20), async {
        loop {
            let runs = s
                .runs(&jobwheel::RunQuery::new().job(jobwheel::JobId::new("blocker").unwrap()))
                .await
                .unwrap();
            if runs
                .first()
                .is_some_and(|r| r.status == jobwheel::RunStatus::Succeeded)
            {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(done.is_ok(), "the blocking run finished and was recorded");
    h.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_trigger_with_a_payload_runs_that_fire_and_its_retries_with_it() {
    type Seen = Arc<Mutex<Vec<(TriggerKind, u32, serde_json::Value)>>>;
    let seen: Seen = Arc::default();
    let log = seen.clone();
    let pick = move |ctx: JobContext| {
        let payload = ctx.payload().clone();
        log.lock()
            .unwrap()
            .push((ctx.trigger, ctx.attempt, payload.clone()));
        async move {
            if payload["fail_first"] == true && ctx.attempt == 1 {
                return Err(JobError::msg("first attempt fails"));
            }
            Ok(())
        }
    };
    let (store, h) = scheduler_with("pick", pick).await;
    let own = serde_json::json!({ "own": true });
    let hourly = Job::builder(
        "hourly",
        "pick",
        Schedule::every(Duration::from_secs(3600)).unwrap(),
    )
    .payload(own.clone())
    .retry(RetryPolicy::new(3, Duration::from_secs(1), Duration::from_secs(10)).unwrap())
    .build()
    .unwrap();
    h.scheduler().upsert(hourly).await.unwrap();
    advance(Duration::from_secs(10)).await;
    let over = serde_json::json!({ "fail_first": true, "date": "2026-01-01" });
    h.scheduler()
        .trigger_now_with("hourly", over.clone())
        .await
        .unwrap();
    advance(Duration::from_secs(10)).await;
    let rec = h.scheduler().get("hourly").await.unwrap().unwrap();
    assert_eq!(
        rec.next_payload(),
        None,
        "the fire is done: the override is gone"
    );
    assert_eq!(rec.job.payload(), &own, "the definition never changed");
    advance(Duration::from_secs(3600)).await;

    // Refused before anything is written.
    let huge = serde_json::json!({ "blob": "x".repeat(70 * 1024) });
    match h.scheduler().trigger_now_with("hourly", huge).await {
        Err(jobwheel::Error::Invalid { field, .. }) => assert_eq!(field, "payload"),
        other => panic!("an oversized override is refused naming payload: {other:?}"),
    }
    let rec = h.scheduler().get("hourly").await.unwrap().unwrap();
    assert_eq!(
        (rec.next_trigger(), rec.next_payload()),
        (TriggerKind::Schedule, None)
    );
    assert!(matches!(
        h.scheduler().trigger_now_with("nope", own.clone()).await,
        Err(jobwheel::Error::NotFound { .. })
    ));
    h.shutdown().await;

    assert_eq!(
        *seen.lock().unwrap(),
        [
            (TriggerKind::Schedule, 1, own.clone()),
            (TriggerKind::Manual, 1, over.clone()),
            (TriggerKind::Retry, 2, over.clone()),
            (TriggerKind::Schedule, 1, own.clone()),
        ],
        "the manual fire and its retry run the override, the schedule its own payload"
    );
    let runs = runs_of(&store, "hourly").await;
    assert_eq!(
        runs.iter()
            .map(|r| r.payload().cloned())
            .collect::<Vec<_>>(),
        [None, Some(over.clone()), Some(over), None],
        "the run log records the override with the runs it was given to"
    );
}
