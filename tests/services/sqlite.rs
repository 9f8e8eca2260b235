//! The SQLite backend: the unchanged conformance suites, then the engine end to end
//! with two schedulers on two pools of one database file (as two processes would).
#![cfg(feature = "sqlite")]

use crate::support;

use jobwheel::sqlite::{SqliteLocks, SqliteStore};
use jobwheel::store::Jobs;
use jobwheel::{JobStore, conformance};
use std::sync::Arc;

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
    let raw = support::raw_rows::SqliteRows {
        pool: store.pool().clone(),
        prefix: store.prefix().to_string(),
    };
    conformance::raw_rows_suite(&store, &raw).await;
    support::raw_rows::bad_rows_do_not_stop_the_engine(Arc::new(store.clone()), &raw).await;
    conformance::lock_suite(&SqliteLocks::new(store.pool().clone(), store.prefix()).unwrap()).await;
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
        other
            .list(&jobwheel::JobQuery::new(10))
            .await
            .unwrap()
            .items
            .is_empty(),
        "prefixes keep deployments apart"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_schedulers_on_one_file_run_every_fire_once() {
    let db = TempDb::new("cluster");
    let url = db.url();
    support::cluster::two_schedulers_run_every_fire_once(|| {
        let url = url.clone();
        async move {
            let store = open(&url).await;
            let locks = store.locks();
            (
                Arc::new(store) as Arc<dyn JobStore>,
                Arc::new(locks) as Arc<dyn jobwheel::LockProvider>,
            )
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_schedulers_300_jobs_for_20_s_and_5000_one_shots_run_every_fire_once() {
    let db = TempDb::new("fleet");
    let url = db.url();
    support::cluster::fleet_runs_every_fire_exactly_once(
        || {
            let url = url.clone();
            async move {
                let store = open(&url).await;
                let locks = store.locks();
                (
                    Arc::new(store) as Arc<dyn JobStore>,
                    Arc::new(locks) as Arc<dyn jobwheel::LockProvider>,
                )
            }
        },
        support::cluster::Fleet {
            p99_bound: None,
            ..support::cluster::Fleet::three_nodes(100)
        },
    )
    .await;
}

#[tokio::test]
async fn migration_records_are_adopted_and_checked() {
    let db = TempDb::new("records");
    let store = open(&db.url()).await;
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
        store.prefix(),
        "X'00'",
        known,
    )
    .await;
}

#[tokio::test]
async fn payload_overrides_become_contexts_on_upgrade() {
    let db = TempDb::new("contexts");
    let store = open(&db.url()).await;
    let pool = store.pool().clone();
    support::migrations::payload_overrides_become_contexts(
        support::migrations::exec_on!(pool),
        || store.migrate(),
        &store,
        || async {
            std::sync::Arc::new(open(&db.url()).await) as std::sync::Arc<dyn jobwheel::JobStore>
        },
        store.prefix(),
        "TEXT",
        6..11,
    )
    .await;
}
