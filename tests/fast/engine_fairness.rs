//! Fairness on a paused clock: a node with fewer executor slots (4 fast + 16 slow)
//! than jobs due inside
//! its lookahead still runs every job, in fire order, instead of keeping the first
//! jobs' leases from fire to fire.

use crate::support;
use jobwheel::store::JobsExt as _;

use jobwheel::{Clock, Job, Schedule, Scheduler};
use std::collections::HashMap;
use std::time::Duration;
use support::*;

#[tokio::test(start_paused = true)]
async fn more_jobs_than_slots_all_get_their_turn() {
    let (store, locks, clock) = backend("2026-01-01T00:00:00Z");
    let log = Log::default();
    let s = Scheduler::builder()
        .store(store.clone())
        .locks(locks)
        .handler("h", recording(&log, &clock))
        .executor(jobwheel::LocalExecutor::with_concurrency(4).unwrap())
        .config(config("n1"))
        .build()
        .unwrap();
    let h = s.start().await.unwrap();
    for i in 0..40 {
        h.scheduler()
            .upsert(
                Job::builder(
                    format!("j{i}"),
                    "h",
                    Schedule::every(Duration::from_secs(1)).unwrap(),
                )
                .build()
                .unwrap(),
            )
            .await
            .unwrap();
    }
    advance(Duration::from_millis(10_500)).await;
    h.shutdown().await;
    let mut per_job: HashMap<String, usize> = HashMap::new();
    for seen in log.all() {
        *per_job.entry(seen.job).or_default() += 1;
    }
    assert_eq!(per_job.len(), 40, "every job ran: {per_job:?}");
    assert!(
        per_job.values().all(|&n| n >= 9),
        "each job ran about once a second: {per_job:?}"
    );
}

/// A backlog of one-shots larger than the executor drains at the executor's pace: a
/// poll that fills the free slots before the due fires run out continues from where it
/// stopped as soon as slots free up, rather than after the poll interval.
#[tokio::test(start_paused = true)]
async fn a_backlog_drains_without_waiting_for_the_poll_interval() {
    let (store, locks, clock) = backend("2026-01-01T00:00:00Z");
    let log = Log::default();
    let (l, c) = (log.clone(), clock.clone());
    let s = Scheduler::builder()
        .store(store.clone())
        .locks(locks)
        .handler("h", move |ctx: jobwheel::JobContext| {
            l.record(&ctx, &*c);
            async {
                tokio::time::sleep(Duration::from_millis(10)).await;
                Ok::<(), jobwheel::JobError>(())
            }
        })
        .executor(jobwheel::LocalExecutor::with_concurrency(8).unwrap())
        .config(config("n1"))
        .build()
        .unwrap();
    let due = clock.now();
    for i in 0..300 {
        store
            .upsert(
                &Job::builder(format!("o{i:03}"), "h", Schedule::once(due))
                    .build()
                    .unwrap(),
                Some(due),
            )
            .await
            .unwrap();
    }
    let h = s.start().await.unwrap();
    advance(Duration::from_millis(1_500)).await;
    let ran = log.all();
    h.shutdown().await;
    // 300 runs of 10 ms on 8 slots take about 0.4 s; waiting out the 1 s poll interval
    // even once per sweep would not fit in 1.5 s.
    assert_eq!(ran.len(), 300, "every one-shot ran within 1.5 s");
    let last = ran.iter().map(|s| s.started).max().unwrap();
    assert!(
        last.duration_since(due) < Duration::from_millis(900),
        "the last one-shot started {:?} after its fire",
        last.duration_since(due)
    );
}
