//! Fairness on a paused clock: a node with fewer executor slots (4 fast + 16 slow)
//! than jobs due inside
//! its lookahead still runs every job, in fire order, instead of keeping the first
//! jobs' leases from fire to fire.

mod support;

use jobwheel::{Job, Schedule, Scheduler, SchedulerConfig};
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
        .config(SchedulerConfig {
            concurrency: 4,
            ..config("n1")
        })
        .build()
        .unwrap();
    let h = s.start().await.unwrap();
    for i in 0..40 {
        h.upsert(
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
