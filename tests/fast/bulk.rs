//! `Scheduler::upsert_many`: a batch is checked whole before anything is stored, and
//! every job of it fires.

use crate::support;

use jobwheel::{Job, JobContext, RunQuery, Schedule, Scheduler, UpsertOutcome};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use support::*;

#[tokio::test(start_paused = true)]
async fn a_batch_is_checked_whole_and_every_job_fires() {
    let (store, locks, clock) = backend("2026-01-01T00:00:00Z");
    let ran = Arc::new(AtomicUsize::new(0));
    let r = ran.clone();
    let s = Scheduler::builder()
        .store(store.clone())
        .locks(locks)
        .handler("h", move |_ctx: JobContext| {
            r.fetch_add(1, Ordering::SeqCst);
            async { Ok(()) }
        })
        .config(config("n1"))
        .build()
        .unwrap();
    let h = s.start().await.unwrap();
    let at = jobwheel::Clock::now(&*clock) + Duration::from_secs(1);
    let once = |i: usize| {
        Job::builder(format!("o{i}"), "h", Schedule::once(at))
            .build()
            .unwrap()
    };
    let repeated = vec![once(1), once(2), once(1)];
    let e = s.upsert_many(repeated).await.unwrap_err();
    assert_eq!(e.field(), Some("jobs"), "{e}");
    let unknown = vec![
        once(1),
        Job::builder("x", "nobody", Schedule::once(at))
            .build()
            .unwrap(),
    ];
    assert!(matches!(
        s.upsert_many(unknown).await.unwrap_err(),
        jobwheel::Error::UnknownHandler { .. }
    ));
    assert!(
        s.get("o1").await.unwrap().is_none(),
        "nothing of a refused batch is stored"
    );
    let out = s.upsert_many((0..2000).map(once).collect()).await.unwrap();
    assert!(out.iter().all(|o| *o == UpsertOutcome::Created));
    advance(Duration::from_secs(5)).await;
    assert_eq!(
        ran.load(Ordering::SeqCst),
        2000,
        "every job of the batch fired"
    );
    let runs = s.runs(&RunQuery::new().limit(5000)).await.unwrap();
    assert_eq!(runs.len(), 2000);
    h.shutdown().await;
}
