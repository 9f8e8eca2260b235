//! Late fires on the memory backend, on a paused tokio clock: each misfire policy,
//! its records, counters and alarms, and fires that come due during retries.

use crate::support;
use jobwheel::store::JobsExt as _;

use jobwheel::store::AlarmOutbox;
use jobwheel::{
    AlarmKind, FireSpan, Job, JobContext, JobError, MisfirePolicy, RetryPolicy, RunStatus,
    Schedule, Scheduler, TriggerKind,
};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use support::*;

struct Misfired {
    seen: Vec<Seen>,
    runs: Vec<jobwheel::RunRecord>,
    metrics: jobwheel::EngineMetrics,
    alarms: Vec<jobwheel::AlarmRecord>,
}

/// `job` stored as due at `due` (the fleet was down), then a scheduler running for
/// `secs` from 2026-01-01T00:00:00Z.
async fn late(job: Job, due: &str, secs: u64) -> Misfired {
    let (store, locks, clock) = backend("2026-01-01T00:00:00Z");
    let id = job.id().to_string();
    store.upsert(&job, Some(at(due))).await.unwrap();
    let (log, h) = start_recording(&store, locks, &clock).await;
    advance(Duration::from_secs(secs)).await;
    let metrics = h.scheduler().metrics();
    h.shutdown().await;
    Misfired {
        seen: log.of(&id),
        runs: runs_of(&store, &id).await,
        metrics,
        alarms: store.alarms(&jobwheel::AlarmQuery::new(100)).await.unwrap(),
    }
}

/// A job every minute, due ten minutes ago.
async fn misfire_case(policy: MisfirePolicy) -> Misfired {
    let job = Job::builder("m", "h", Schedule::every(Duration::from_secs(60)).unwrap())
        .misfire(policy)
        .build()
        .unwrap();
    late(job, "2025-12-31T23:50:00Z", 90).await
}

fn span(fires: u64, first: &str, through: &str) -> Option<FireSpan> {
    Some(FireSpan {
        fires,
        first: at(first),
        through: at(through),
    })
}

#[tokio::test(start_paused = true)]
async fn misfire_fire_once_coalesces_missed_fires() {
    let m = misfire_case(MisfirePolicy::FireOnce).await;
    let fires: Vec<_> = m.seen.iter().map(|s| (s.fire_at, s.trigger)).collect();
    assert_eq!(
        fires,
        [
            (at("2025-12-31T23:50:00Z"), TriggerKind::Misfire),
            (at("2026-01-01T00:01:00Z"), TriggerKind::Schedule)
        ]
    );
    assert_eq!(m.runs.len(), 2);
    assert_eq!(
        m.runs[0].covers,
        span(11, "2025-12-31T23:50:00Z", "2026-01-01T00:00:00Z"),
        "the late run stands for the eleven fires it coalesced"
    );
    assert_eq!(m.runs[1].covers, None);
    assert_eq!(m.metrics.misfired.fire_once, 11);
    assert_eq!(m.metrics.misfired.total(), 11);
    // The default alarm policy hears of a misfire of more than one fire.
    assert_eq!(m.alarms.len(), 1, "{:?}", m.alarms);
    assert_eq!(m.alarms[0].event.kind, AlarmKind::Misfire);
    assert_eq!(m.alarms[0].event.covers, m.runs[0].covers);
}

#[tokio::test(start_paused = true)]
async fn misfire_skip_records_and_moves_on() {
    let m = misfire_case(MisfirePolicy::Skip).await;
    assert_eq!(
        m.seen.iter().map(|s| s.fire_at).collect::<Vec<_>>(),
        [at("2026-01-01T00:01:00Z")],
        "the late fire is not executed"
    );
    assert_eq!(m.runs[0].status, RunStatus::Misfired);
    assert_eq!(m.runs[0].fire_at, at("2025-12-31T23:50:00Z"));
    assert_eq!(
        m.runs[0].covers,
        span(11, "2025-12-31T23:50:00Z", "2026-01-01T00:00:00Z"),
        "one record for the eleven skipped fires"
    );
    assert_eq!(m.runs[1].status, RunStatus::Succeeded);
    assert_eq!(m.metrics.misfired.skip, 11);
    assert_eq!(m.alarms.len(), 1);
}

#[tokio::test(start_paused = true)]
async fn misfire_catch_up_runs_the_last_missed_fires_in_order() {
    let m = misfire_case(MisfirePolicy::CatchUp { max: 3 }).await;
    let fires: Vec<_> = m.seen.iter().map(|s| (s.fire_at, s.trigger)).collect();
    assert_eq!(
        fires,
        [
            (at("2025-12-31T23:58:00Z"), TriggerKind::Misfire),
            (at("2025-12-31T23:59:00Z"), TriggerKind::Misfire),
            (at("2026-01-01T00:00:00Z"), TriggerKind::Schedule),
            (at("2026-01-01T00:01:00Z"), TriggerKind::Schedule),
        ],
        "eleven missed fires, at most three caught up"
    );
    assert_eq!(m.runs[0].status, RunStatus::Misfired);
    assert!(
        m.runs[0]
            .error
            .as_deref()
            .unwrap()
            .contains("8 missed fires skipped"),
        "{:?}",
        m.runs[0].error
    );
    assert_eq!(
        m.runs[0].covers,
        span(8, "2025-12-31T23:50:00Z", "2025-12-31T23:57:00Z")
    );
    assert_eq!(
        m.runs[1].covers,
        span(1, "2025-12-31T23:58:00Z", "2025-12-31T23:58:00Z"),
        "a caught-up run stands for itself"
    );
    // Eight skipped plus two late runs; the third caught-up fire was on time.
    assert_eq!(m.metrics.misfired.catch_up, 10);
    assert_eq!(
        m.alarms.len(),
        1,
        "only the record of eight fires alarms by default: {:?}",
        m.alarms
    );
}

/// A single late fire that still runs is a misfire of one fire: recorded and counted,
/// but below the default alarm threshold.
#[tokio::test(start_paused = true)]
async fn a_single_late_fire_is_counted_but_does_not_alarm_by_default() {
    let job = Job::builder("daily", "h", Schedule::cron("0 0 6 * * ?", "UTC").unwrap())
        .build()
        .unwrap();
    let m = late(job, "2025-12-31T06:00:00Z", 5).await;
    assert_eq!(m.metrics.misfired.fire_once, 1);
    assert_eq!(
        m.runs[0].covers,
        span(1, "2025-12-31T06:00:00Z", "2026-01-01T00:00:00Z")
    );
    assert!(m.alarms.is_empty(), "{:?}", m.alarms);
}

/// Fires that come due while a failed fire's retries back off are not dropped: once
/// the retries end, the schedule resumes after the retried fire, and the late fires
/// go through the misfire policy with a record.
#[tokio::test(start_paused = true)]
async fn fires_during_retries_are_handled_by_the_misfire_policy() {
    let (store, locks, clock) = backend("2026-01-01T00:00:00Z");
    let log = Log::default();
    let (l, c) = (log.clone(), clock.clone());
    let runs = Arc::new(AtomicUsize::new(0));
    let s = Scheduler::builder()
        .store(store.clone())
        .locks(locks)
        .handler("h", move |ctx: JobContext| {
            l.record(&ctx, &*c);
            // The first fire fails twice, then its third attempt succeeds.
            let fail = runs.fetch_add(1, Ordering::SeqCst) < 2;
            async move {
                if fail {
                    Err(JobError::msg("boom"))
                } else {
                    Ok(())
                }
            }
        })
        .config(config("n1"))
        .build()
        .unwrap();
    let h = s.start().await.unwrap();
    let retry = RetryPolicy::new(3, Duration::from_secs(20), Duration::from_secs(3600)).unwrap();
    let job = Job::builder(
        "tens",
        "h",
        Schedule::every(Duration::from_secs(10)).unwrap(),
    )
    .retry(retry)
    .alarm(jobwheel::AlarmPolicy::silent())
    .build()
    .unwrap();
    h.scheduler().upsert(job).await.unwrap();
    advance(Duration::from_secs(75)).await;
    let metrics = h.scheduler().metrics();
    h.shutdown().await;
    let t = at("2026-01-01T00:00:00Z");
    let s = |n: u64| t + Duration::from_secs(n);
    let seen: Vec<_> = log
        .of("tens")
        .iter()
        .map(|x| (x.fire_at, x.attempt, x.trigger))
        .collect();
    assert_eq!(
        seen,
        [
            (s(0), 1, TriggerKind::Schedule),
            (s(20), 2, TriggerKind::Retry),
            (s(60), 3, TriggerKind::Retry),
            // The fires of 10 s … 60 s, coalesced into one late run once the retries end.
            (s(10), 1, TriggerKind::Misfire),
            (s(70), 1, TriggerKind::Schedule),
        ]
    );
    let runs = runs_of(&store, "tens").await;
    assert_eq!(
        runs[3].covers,
        span(6, "2026-01-01T00:00:10Z", "2026-01-01T00:01:00Z")
    );
    assert_eq!(metrics.misfired.fire_once, 6);
}
