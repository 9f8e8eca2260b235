//! The MySQL/MariaDB backend against the unchanged conformance suites and the engine end
//! to end. Needs `JOBWHEEL_MYSQL_URL` (`./scripts/test` sets it); without it the
//! test is skipped with a message, except under `CI=true`, where that is a failure.
#![cfg(feature = "mysql")]

mod support;

use jobwheel::mysql::{MySqlLocks, MySqlStore};
use jobwheel::{JobStore, LockProvider, conformance};
use std::sync::Arc;

fn url() -> Option<String> {
    support::server_url("JOBWHEEL_MYSQL_URL")
}

/// A store with tables of its own (a unique prefix), migrated.
async fn open(url: &str, prefix: &str) -> MySqlStore {
    let store = MySqlStore::builder(url)
        .prefix(prefix)
        .build()
        .await
        .unwrap_or_else(|e| panic!("JOBWHEEL_MYSQL_URL is set but the server is unreachable: {e}"));
    store.migrate().await.unwrap();
    store
}

fn prefix(name: &str) -> String {
    format!("t{:08x}_{name}_", fastrand::u32(..))
}

/// Drops the tables of one prefix once a test is done with them.
async fn drop_tables(url: &str, prefix: &str) {
    let store = open(url, prefix).await;
    let tables: Vec<String> = ["jobs", "runs", "nodes", "alarms", "locks", "schema"]
        .iter()
        .map(|t| format!("{prefix}{t}"))
        .collect();
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "DROP TABLE IF EXISTS {}",
        tables.join(", ")
    )))
    .execute(store.pool())
    .await
    .unwrap();
}

#[tokio::test]
async fn mysql_passes_the_conformance_suites() {
    let Some(url) = url() else { return };
    let p = prefix("cf");
    let store = open(&url, &p).await;
    store.migrate().await.expect("migrate is idempotent");
    conformance::store_suite(&store).await;
    conformance::lock_suite(&MySqlLocks::new(store.pool().clone(), store.prefix()).unwrap()).await;
    drop_tables(&url, &p).await;
}

#[tokio::test]
async fn migrations_run_concurrently_and_names_are_validated() {
    let Some(url) = url() else { return };
    let p = prefix("mig");
    let stores =
        futures::future::join_all((0..4).map(|_| MySqlStore::builder(&url).prefix(&p).build()))
            .await;
    let results =
        futures::future::join_all(stores.iter().map(|s| s.as_ref().unwrap().migrate())).await;
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    let bad = MySqlStore::builder(&url)
        .prefix("x; DROP")
        .build()
        .await
        .unwrap_err();
    assert_eq!(bad.field(), Some("mysql.prefix"));
    drop_tables(&url, &p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_schedulers_on_one_database_run_every_fire_once() {
    let Some(url) = url() else { return };
    let p = prefix("cluster");
    support::cluster::two_schedulers_run_every_fire_once(|| {
        let (url, p) = (url.clone(), p.clone());
        async move {
            let store = open(&url, &p).await;
            let locks = MySqlLocks::new(store.pool().clone(), store.prefix()).unwrap();
            (
                Arc::new(store) as Arc<dyn JobStore>,
                Arc::new(locks) as Arc<dyn LockProvider>,
            )
        }
    })
    .await;
    drop_tables(&url, &p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_schedulers_300_jobs_for_20_s_and_5000_one_shots_run_every_fire_once() {
    let Some(url) = url() else { return };
    let p = prefix("fleet");
    support::cluster::fleet_runs_every_fire_exactly_once(
        || {
            let (url, p) = (url.clone(), p.clone());
            async move {
                let store = open(&url, &p).await;
                let locks = MySqlLocks::new(store.pool().clone(), store.prefix()).unwrap();
                (
                    Arc::new(store) as Arc<dyn JobStore>,
                    Arc::new(locks) as Arc<dyn LockProvider>,
                )
            }
        },
        support::cluster::Fleet {
            p99_bound: None,
            ..support::cluster::Fleet::three_nodes(100)
        },
    )
    .await;
    drop_tables(&url, &p).await;
}
