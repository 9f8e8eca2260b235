//! The PostgreSQL backend against the unchanged conformance suites and the engine end
//! to end. Needs `JOBWHEEL_POSTGRES_URL` (`./scripts/test` sets it); without it the
//! test is skipped with a message, except under `CI=true`, where that is a failure.
#![cfg(feature = "postgres")]

use crate::support;

use jobwheel::postgres::{PgLocks, PgStore};
use jobwheel::{JobStore, LockProvider, conformance};
use std::sync::Arc;

fn url() -> Option<String> {
    support::server_url("JOBWHEEL_POSTGRES_URL")
}

/// A store with tables of its own (a unique prefix), migrated.
async fn open(url: &str, prefix: &str) -> PgStore {
    let store = PgStore::builder(url)
        .prefix(prefix)
        .build()
        .await
        .unwrap_or_else(|e| {
            panic!("JOBWHEEL_POSTGRES_URL is set but the server is unreachable: {e}")
        });
    store.migrate().await.unwrap();
    store
}

fn prefix(name: &str) -> String {
    format!("t{:08x}_{name}_", fastrand::u32(..))
}

/// Drops the tables of one prefix once a test is done with them.
async fn drop_tables(url: &str, prefix: &str) {
    support::drop_pg_tables(url, prefix).await;
}

#[tokio::test]
async fn postgres_passes_the_conformance_suites() {
    let Some(url) = url() else { return };
    let p = prefix("cf");
    let store = open(&url, &p).await;
    store.migrate().await.expect("migrate is idempotent");
    conformance::store_suite(&store).await;
    let raw = support::raw_rows::PgRows {
        pool: store.pool().clone(),
        prefix: p.clone(),
    };
    conformance::raw_rows_suite(&store, &raw).await;
    support::raw_rows::bad_rows_do_not_stop_the_engine(Arc::new(store.clone()), &raw).await;
    conformance::lock_suite(&PgLocks::new(store.pool().clone(), store.tables()).unwrap()).await;
    drop_tables(&url, &p).await;
}

#[tokio::test]
async fn migrations_run_concurrently_and_names_are_validated() {
    let Some(url) = url() else { return };
    let p = prefix("mig");
    let stores =
        futures::future::join_all((0..4).map(|_| PgStore::builder(&url).prefix(&p).build())).await;
    let results =
        futures::future::join_all(stores.iter().map(|s| s.as_ref().unwrap().migrate())).await;
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    let bad = PgStore::builder(&url)
        .schema("public; DROP")
        .build()
        .await
        .unwrap_err();
    assert_eq!(bad.field(), Some("postgres.schema"));
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
    // The store's own locks name its tables: every lease was kept in a job row.
    let pool = sqlx::PgPool::connect(&url).await.unwrap();
    let (leases,): (i64,) = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT count(*) FROM {p}locks"
    )))
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(leases, 0, "the locks table was written");
    pool.close().await;
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
        support::cluster::Fleet::three_nodes(200),
    )
    .await;
    drop_tables(&url, &p).await;
}

/// Redis locks, then PostgreSQL locks, then Redis locks again on one store, jobs
/// running throughout: tokens from every provider are microseconds of the lock
/// server's clock, so none is fenced out by the tokens the others left in the store.
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
    let redis_locks = || -> Arc<dyn LockProvider> {
        Arc::new(
            jobwheel::redis::RedisLocks::new(redis.connection().unwrap().clone(), &redis_prefix)
                .unwrap(),
        )
    };
    let pg_locks: Arc<dyn LockProvider> = Arc::new(store.locks());
    support::switch::every_job_keeps_firing_across_lock_providers(
        Arc::new(store.clone()),
        vec![
            ("redis", redis_locks()),
            ("postgres", pg_locks),
            ("redis", redis_locks()),
        ],
    )
    .await;
    support::redis_keys::drop_keys(&redis_url, &redis_prefix)
        .await
        .unwrap();
    drop_tables(&url, &p).await;
}

/// In a database whose default collation is an ICU locale (where `x-B` sorts between
/// `x-a` and `x-b`), ids still order bytewise: the id columns are `COLLATE "C"`.
#[tokio::test]
async fn ids_sort_bytewise_in_a_database_with_a_locale_collation() {
    let Some(url) = url() else { return };
    let admin = PgStore::builder(&url).build().await.unwrap();
    let db = format!("jobwheel_icu_{:08x}", fastrand::u32(..));
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "CREATE DATABASE {db} TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C.UTF-8'"
    )))
    .execute(admin.pool())
    .await
    .expect("create a database with an ICU default collation");
    let icu_url = format!("{}/{db}", url.rsplit_once('/').unwrap().0);
    {
        let store = open(&icu_url, "icu_").await;
        let collation: (String,) = sqlx::query_as(
            "SELECT datlocprovider::text || ':' || daticulocale FROM pg_database
             WHERE datname = current_database()",
        )
        .fetch_one(store.pool())
        .await
        .unwrap();
        assert_eq!(
            collation.0, "i:en-US",
            "the database sorts by an ICU locale"
        );
        conformance::ids_sort_bytewise(&store).await;
        store.pool().close().await;
    }
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE {db} WITH (FORCE)"
    )))
    .execute(admin.pool())
    .await
    .unwrap();
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
        &format!("public.{p}"),
        "'\\x00'::bytea",
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
        &format!("public.{p}"),
        "TEXT",
        7..13,
    )
    .await;
    drop_tables(&url, &p).await;
}

/// A change whose audit entry cannot be written is not made: with the audit table
/// refusing every insert, an upsert, a pause, a trigger and a removal through the
/// operations layer each fail, and the job is exactly as it was.
#[tokio::test]
async fn a_change_whose_audit_entry_fails_is_not_made() {
    use jobwheel::ops::{Actor, Ops};
    use jobwheel::{Job, Schedule};
    let Some(url) = url() else { return };
    let p = prefix("auditfail");
    let store = open(&url, &p).await;
    let pool = store.pool().clone();
    let ops = Ops::new(Arc::new(store.clone()));
    let actor = Actor::user("ada");
    let job = Job::builder(
        "audited",
        "noop",
        Schedule::cron("0 0 9 * * ?", "UTC").unwrap(),
    )
    .build()
    .unwrap();
    ops.create(&actor, job.clone()).await.unwrap();
    let before = jobwheel::store::Jobs::get(&store, job.id())
        .await
        .unwrap()
        .unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "ALTER TABLE public.{p}audit ADD CONSTRAINT refuse_all CHECK (false) NOT VALID"
    )))
    .execute(&pool)
    .await
    .unwrap();
    let changed = job
        .to_builder()
        .payload(serde_json::json!({"v": 2}))
        .build()
        .unwrap();
    let id = job.id();
    assert!(ops.upsert(&actor, changed).await.is_err(), "upsert");
    assert!(ops.pause(&actor, id).await.is_err(), "pause");
    assert!(ops.trigger(&actor, id, None).await.is_err(), "trigger");
    assert!(ops.remove(&actor, id).await.is_err(), "remove");
    let after = jobwheel::store::Jobs::get(&store, id)
        .await
        .unwrap()
        .expect("the job is still there");
    assert_eq!(after, before, "nothing changed");
    drop_tables(&url, &p).await;
}

/// A run row's B-tree entries: only the primary key, runs by job and (while running)
/// runs by node; a succeeded run never enters the index of runs by status. On a run
/// log of 20,000 rows, a query for failed runs reads that partial index and answers
/// exactly the failed ones, newest first.
#[tokio::test]
async fn a_run_row_costs_three_index_entries_and_failures_stay_indexed() {
    let Some(url) = url() else { return };
    let p = prefix("runidx");
    let store = open(&url, &p).await;
    let pool = store.pool().clone();
    let mut indexes: Vec<(String, String)> = sqlx::query_as(
        "SELECT indexname::text, indexdef FROM pg_indexes WHERE schemaname = 'public' AND tablename = $1 ORDER BY 1",
    )
    .bind(format!("{p}runs"))
    .fetch_all(&pool)
    .await
    .unwrap();
    indexes
        .iter_mut()
        .for_each(|(n, _)| *n = n.trim_start_matches(&p).to_string());
    let names: Vec<&str> = indexes.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "runs_ended_brin",
            "runs_job",
            "runs_pkey",
            "runs_running",
            "runs_started_brin",
            "runs_unsucceeded"
        ],
        "{indexes:?}"
    );
    for (n, def) in &indexes {
        if n.ends_with("_brin") {
            assert!(def.contains("USING brin"), "{def}");
        }
    }
    // 20,000 runs, one in a hundred failed.
    let t = format!("public.{p}runs");
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "INSERT INTO {t} (id, job_id, fire_at, trigger, node, attempt, token, status, started_at, ended_at, will_retry)
         SELECT g, 'j' || (g % 50), g, 'schedule', 'n', 1, g,
                CASE WHEN g % 100 = 0 THEN 'failed' ELSE 'succeeded' END, g, g + 1, false
         FROM generate_series(1, 20000) AS g"
    )))
    .execute(&pool)
    .await
    .unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!("ANALYZE {t}")))
        .execute(&pool)
        .await
        .unwrap();
    let plan: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "EXPLAIN SELECT * FROM {t} WHERE 1 = 1 AND status = 'failed' ORDER BY id DESC LIMIT 50"
    )))
    .fetch_all(&pool)
    .await
    .unwrap();
    // Each partition's own copy of the partial index (the rows are in the one that
    // holds the ids from before partitioning).
    let partial: Vec<String> = sqlx::query_scalar(
        "SELECT indexname::text FROM pg_indexes WHERE schemaname = 'public' AND tablename LIKE $1
         AND indexdef LIKE '%WHERE%status%<> ALL%'",
    )
    .bind(format!("{p}runs_%"))
    .fetch_all(&pool)
    .await
    .unwrap();
    assert!(partial.len() >= 9, "every partition has it: {partial:?}");
    assert!(
        plan.iter()
            .any(|l| partial.iter().any(|i| l.contains(i.as_str()))),
        "{}",
        plan.join("\n")
    );
    let failed = jobwheel::store::RunLog::runs(
        &store,
        &jobwheel::RunQuery::new()
            .status(jobwheel::RunStatus::Failed)
            .limit(500),
    )
    .await
    .unwrap();
    assert_eq!(failed.len(), 200);
    assert!(
        failed
            .iter()
            .all(|r| r.status == jobwheel::RunStatus::Failed)
    );
    assert!(failed.windows(2).all(|w| w[0].id > w[1].id));
    drop_tables(&url, &p).await;
}

#[tokio::test]
async fn retention_drops_whole_day_partitions() {
    let Some(url) = url() else { return };
    let p = prefix("days");
    let store = open(&url, &p).await;
    let db = crate::day_partitions::pg(store.pool(), &p);
    crate::day_partitions::retention_drops_whole_days(&db, Arc::new(store.clone())).await;
    drop_tables(&url, &p).await;
}

#[tokio::test]
async fn the_upgrade_to_day_partitions_keeps_every_row() {
    let Some(url) = url() else { return };
    let p = prefix("upgrade");
    let store = PgStore::builder(&url).prefix(&p).build().await.unwrap();
    let db = crate::day_partitions::pg(store.pool(), &p);
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/src/backends/postgres/migrations"
    );
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
