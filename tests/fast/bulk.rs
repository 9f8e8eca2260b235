//! `Scheduler::upsert_many`: a batch is checked whole before anything is stored,
//! every job of it fires, and a batch that changed something is one audit entry.

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

#[tokio::test(start_paused = true)]
async fn a_batch_that_changes_jobs_is_one_audit_entry() {
    use jobwheel::store::{AuditLog, AuditQuery};
    let (store, locks, clock) = backend("2026-01-01T00:00:00Z");
    let s = Scheduler::builder()
        .store(store.clone())
        .locks(locks)
        .handler("h", |_ctx: JobContext| async { Ok(()) })
        .config(config("n1"))
        .build()
        .unwrap();
    let at = jobwheel::Clock::now(&*clock) + Duration::from_secs(60);
    let job = |i: usize, note: &str| {
        Job::builder(format!("b{i:03}"), "h", Schedule::once(at))
            .payload(serde_json::json!({ "note": note }))
            .build()
            .unwrap()
    };
    let entries = || async {
        store
            .audit(&AuditQuery::new(100))
            .await
            .unwrap()
            .into_iter()
            .map(|r| r.entry)
            .collect::<Vec<_>>()
    };
    s.upsert_many((0..150).map(|i| job(i, "a")).collect())
        .await
        .unwrap();
    let log = entries().await;
    assert_eq!(log.len(), 1, "one entry for the batch: {log:?}");
    let e = &log[0];
    assert_eq!(
        (e.actor.as_str(), e.action(), e.target.as_str()),
        (
            "library",
            Some(jobwheel::AuditAction::JobUpsertMany),
            "150 jobs"
        )
    );
    let after = e.after.as_ref().unwrap();
    assert_eq!(
        (&after["created"], &after["updated"], &after["unchanged"]),
        (
            &serde_json::json!(150),
            &serde_json::json!(0),
            &serde_json::json!(0)
        )
    );
    let ids = after["ids"].as_array().unwrap();
    assert_eq!(
        (ids.len(), &ids[0], &ids[99]),
        (100, &serde_json::json!("b000"), &serde_json::json!("b099"))
    );

    // The same batch again changes nothing: no entry.
    s.upsert_many((0..150).map(|i| job(i, "a")).collect())
        .await
        .unwrap();
    assert_eq!(entries().await.len(), 1);
    // One job changed, one new: counted in a second entry.
    let mut batch: Vec<Job> = (0..150).map(|i| job(i, "a")).collect();
    batch[7] = job(7, "b");
    batch.push(job(150, "a"));
    s.upsert_many(batch).await.unwrap();
    let log = entries().await;
    assert_eq!(log.len(), 2, "{log:?}");
    let after = log
        .iter()
        .find(|e| e.target == "151 jobs")
        .unwrap()
        .after
        .clone()
        .unwrap();
    assert_eq!(
        (&after["created"], &after["updated"], &after["unchanged"]),
        (
            &serde_json::json!(1),
            &serde_json::json!(1),
            &serde_json::json!(149)
        )
    );
}
