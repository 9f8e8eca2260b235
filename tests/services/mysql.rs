//! The MySQL/MariaDB backend against the unchanged conformance suites and the engine end
//! to end. Needs `JOBWHEEL_MYSQL_URL` (`./scripts/test` sets it); without it the
//! test is skipped with a message, except under `CI=true`, where that is a failure.
#![cfg(feature = "mysql")]

use crate::support;

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
    let store = MySqlStore::builder(url)
        .prefix(prefix)
        .build()
        .await
        .unwrap();
    let tables: Vec<String> = support::SQL_TABLES
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
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "DROP SEQUENCE IF EXISTS {prefix}run_ids"
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
    let raw = support::raw_rows::MySqlRows {
        pool: store.pool().clone(),
        prefix: p.clone(),
    };
    conformance::raw_rows_suite(&store, &raw).await;
    support::raw_rows::bad_rows_do_not_stop_the_engine(Arc::new(store.clone()), &raw).await;
    conformance::lock_suite(&store.locks()).await;
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
            let locks = store.locks();
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
                let locks = store.locks();
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

/// MySQL locks, then Redis locks, then MySQL locks again on one store, jobs running
/// throughout: every provider's tokens are microseconds of its server's clock.
#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_job_keeps_firing_when_the_lock_provider_changes() {
    let Some(url) = url() else { return };
    let Some(redis_url) = support::server_url("JOBWHEEL_REDIS_URL") else {
        return;
    };
    let p = prefix("switch");
    let store = open(&url, &p).await;
    let redis_prefix = format!("{p}:");
    let redis = jobwheel::redis::RedisStore::connect_with_prefix(&redis_url, &redis_prefix)
        .await
        .unwrap();
    let sql_locks = || -> Arc<dyn LockProvider> {
        Arc::new(MySqlLocks::new(store.pool().clone(), &p).unwrap())
    };
    support::switch::every_job_keeps_firing_across_lock_providers(
        Arc::new(store.clone()),
        vec![
            ("mysql", sql_locks()),
            (
                "redis",
                Arc::new(
                    jobwheel::redis::RedisLocks::new(
                        redis.connection().unwrap().clone(),
                        &redis_prefix,
                    )
                    .unwrap(),
                ),
            ),
            ("mysql", sql_locks()),
        ],
    )
    .await;
    support::redis_keys::drop_keys(&redis_url, &redis_prefix)
        .await
        .unwrap();
    drop_tables(&url, &p).await;
}

#[tokio::test]
async fn migration_records_are_adopted_and_checked() {
    let Some(url) = url() else { return };
    let p = prefix("records");
    let store = open(&url, &p).await;
    let pool = store.pool().clone();
    // The newest migration this code has: every one of them was applied.
    let known = jobwheel::store::Jobs::schema(&store)
        .await
        .unwrap()
        .unwrap()
        .known;
    support::migrations::records_are_checked(
        support::migrations::exec_on!(pool),
        || store.migrate(),
        &p,
        "X'00'",
        known,
    )
    .await;
    drop_tables(&url, &p).await;
}

#[tokio::test]
async fn payload_overrides_become_contexts_on_upgrade() {
    let Some(url) = url() else { return };
    let p = prefix("contexts");
    let store = open(&url, &p).await;
    let pool = store.pool().clone();
    support::migrations::payload_overrides_become_contexts(
        support::migrations::exec_on!(pool),
        || store.migrate(),
        &store,
        || async {
            std::sync::Arc::new(open(&url, &p).await) as std::sync::Arc<dyn jobwheel::JobStore>
        },
        &p,
        "MEDIUMTEXT",
        6..11,
    )
    .await;
    drop_tables(&url, &p).await;
}

#[tokio::test]
async fn retention_drops_whole_day_partitions() {
    let Some(url) = url() else { return };
    let p = prefix("days");
    let store = open(&url, &p).await;
    let db = crate::day_partitions::maria(store.pool(), &p);
    crate::day_partitions::retention_drops_whole_days(&db, Arc::new(store.clone())).await;
    drop_tables(&url, &p).await;
}

#[tokio::test]
async fn the_upgrade_to_day_partitions_keeps_every_row() {
    let Some(url) = url() else { return };
    let p = prefix("upgrade");
    let store = MySqlStore::builder(&url).prefix(&p).build().await.unwrap();
    let db = crate::day_partitions::maria(store.pool(), &p);
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src/backends/mysql/migrations");
    let handle: Arc<dyn JobStore> = Arc::new(store.clone());
    crate::day_partitions::the_upgrade_keeps_every_row(
        &db,
        dir,
        handle,
        || store.migrate(),
        20_000,
    )
    .await;
    drop_tables(&url, &p).await;
}
