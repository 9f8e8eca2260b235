//! The SQLite backend: the unchanged conformance suites, then the engine end to end
//! with two schedulers on two pools of one database file (as two processes would).
#![cfg(feature = "sqlite")]

use jobwheel::sqlite::{SqliteLocks, SqliteStore};
use jobwheel::{
    Job, JobContext, JobError, JobStore, RetryPolicy, RunQuery, RunStatus, Schedule, Scheduler,
    SchedulerConfig, Timestamp, conformance,
};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A fresh database file under the system temp dir, removed when dropped.
struct TempDb(std::path::PathBuf);

impl TempDb {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "jobwheel-{name}-{}-{:08x}",
            std::process::id(),
            fastrand::u32(..)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        TempDb(dir)
    }
    fn url(&self) -> String {
        format!("sqlite://{}", self.0.join("jobs.db").display())
    }
}

impl Drop for TempDb {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

async fn open(url: &str) -> SqliteStore {
    let store = SqliteStore::builder(url).build().await.unwrap();
    store.migrate().await.unwrap();
    store
}

#[tokio::test]
async fn sqlite_passes_the_conformance_suites() {
    let db = TempDb::new("conformance");
    let store = open(&db.url()).await;
    store.migrate().await.expect("migrate is idempotent");
    conformance::store_suite(&store).await;
    conformance::lock_suite(&SqliteLocks::new(store.pool().clone(), store.prefix())).await;
}

#[tokio::test]
async fn migrations_run_concurrently_and_prefixes_are_validated() {
    let db = TempDb::new("migrate");
    let stores =
        futures::future::join_all((0..4).map(|_| SqliteStore::builder(db.url()).build())).await;
    let results =
        futures::future::join_all(stores.iter().map(|s| s.as_ref().unwrap().migrate())).await;
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    let bad = SqliteStore::builder(db.url())
        .prefix("x; DROP TABLE")
        .build()
        .await
        .unwrap_err();
    assert_eq!(bad.field(), Some("sqlite.prefix"));
    let other = SqliteStore::builder(db.url())
        .prefix("other_")
        .build()
        .await
        .unwrap();
    other.migrate().await.unwrap();
    assert!(
        other.list(None, 10).await.unwrap().is_empty(),
        "prefixes keep deployments apart"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_schedulers_on_one_file_run_every_fire_once() {
    let db = TempDb::new("cluster");
    let seen: Arc<Mutex<HashMap<(String, i64), u32>>> = Arc::default();
    let mut handles = Vec::new();
    for node in ["a", "b"] {
        let store = open(&db.url()).await;
        let locks = SqliteLocks::new(store.pool().clone(), store.prefix());
        let s = seen.clone();
        let sched = Scheduler::builder()
            .store(store)
            .locks(locks)
            .handler("count", move |ctx: JobContext| {
                *s.lock()
                    .unwrap()
                    .entry((ctx.job.id().to_string(), ctx.fire_at.as_millis()))
                    .or_default() += 1;
                async { Ok::<(), JobError>(()) }
            })
            .handler("fail", |_ctx: JobContext| async {
                Err(JobError::msg("boom"))
            })
            .config(SchedulerConfig {
                node_id: Some(node.into()),
                poll_interval: Duration::from_millis(200),
                lookahead: Duration::from_secs(1),
                ..SchedulerConfig::default()
            })
            .build()
            .unwrap();
        handles.push(sched.start().await.unwrap());
    }
    let now = Timestamp::now();
    for i in 0..20 {
        handles[i % 2]
            .upsert(
                Job::builder(
                    format!("tick-{i}"),
                    "count",
                    Schedule::every(Duration::from_secs(1)).unwrap(),
                )
                .build()
                .unwrap(),
            )
            .await
            .unwrap();
    }
    for i in 0..200 {
        handles[i % 2]
            .upsert(
                Job::builder(format!("once-{i}"), "count", Schedule::once(now))
                    .build()
                    .unwrap(),
            )
            .await
            .unwrap();
    }
    let retry = RetryPolicy::new(2, Duration::from_secs(1), Duration::from_secs(1)).unwrap();
    handles[0]
        .upsert(
            Job::builder("flaky", "fail", Schedule::once(now))
                .retry(retry)
                .build()
                .unwrap(),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(4500)).await;
    let store = handles[0].store().clone();
    let metrics: Vec<_> = handles.iter().map(|h| h.metrics()).collect();
    for h in handles {
        h.shutdown().await;
    }
    let seen = seen.lock().unwrap().clone();
    assert!(
        seen.values().all(|n| *n == 1),
        "a fire ran twice: {:?}",
        seen.iter().filter(|(_, n)| **n > 1).collect::<Vec<_>>()
    );
    let once = seen.keys().filter(|(j, _)| j.starts_with("once-")).count();
    assert_eq!(once, 200, "every one-shot ran");
    for i in 0..20 {
        let n = seen
            .keys()
            .filter(|(j, _)| *j == format!("tick-{i}"))
            .count();
        assert!(n >= 4, "tick-{i} ran {n} times in 4.5 s");
    }
    assert!(metrics.iter().all(|m| m.finish_refused == 0), "{metrics:?}");
    let flaky = store
        .runs(&RunQuery {
            job_id: Some(jobwheel::JobId::new("flaky").unwrap()),
            ..RunQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(flaky.len(), 2, "one attempt and one retry");
    assert!(flaky.iter().all(|r| r.status == RunStatus::Failed));
    assert_eq!(
        store.nodes().await.unwrap().len(),
        0,
        "both nodes deregistered"
    );
}
