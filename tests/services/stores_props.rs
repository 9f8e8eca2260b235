//! Every job the builder accepts reads back unchanged from every store (SQLite in
//! memory, and PostgreSQL, MySQL and Redis when their URLs are set).

use crate::support;
use jobwheel::memory::MemoryStore;
use jobwheel::store::JobsExt as _;
use jobwheel::{Job, JobStore, Timestamp};
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, TestRunner};
use serde_json::json;
use support::strategies::job;

/// Every accepted job reads back unchanged from `store`.
async fn round_trips(store: &dyn JobStore, jobs: &[Job]) {
    for (i, job) in jobs.iter().enumerate() {
        let mut text = serde_json::to_value(job).unwrap();
        text["id"] = json!(format!("props-{}-{i}", fastrand::u32(..)));
        let job: Job = serde_json::from_value(text).unwrap();
        store
            .upsert(&job, job.schedule().first_fire(Timestamp::now()))
            .await
            .unwrap();
        let back = store.get(job.id()).await.unwrap().expect("stored");
        assert_eq!(*back.job, job, "reads back unchanged");
        store.remove(job.id()).await.unwrap();
    }
}

#[tokio::test]
async fn accepted_jobs_read_back_unchanged_from_every_store() {
    let now = Timestamp::now().as_millis();
    let mut runner = TestRunner::new(Config {
        cases: 64,
        failure_persistence: None,
        ..Config::default()
    });
    let strategy = job(now);
    let jobs: Vec<Job> = (0..5000)
        .filter_map(|_| strategy.new_tree(&mut runner).ok()?.current().ok())
        .take(48)
        .collect();
    assert!(
        jobs.len() >= 24,
        "enough accepted jobs to check: {}",
        jobs.len()
    );
    round_trips(&MemoryStore::new(), &jobs).await;
    for var in [
        "",
        "JOBWHEEL_POSTGRES_URL",
        "JOBWHEEL_MYSQL_URL",
        "JOBWHEEL_REDIS_URL",
    ] {
        let url = if var.is_empty() {
            Some("sqlite::memory:".to_string())
        } else {
            support::server_url(var)
        };
        if let Some(url) = url {
            let backend = jobwheel::connect(&url).await.unwrap();
            round_trips(backend.store.as_ref(), &jobs).await;
        }
    }
}
