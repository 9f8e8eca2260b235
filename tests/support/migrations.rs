//! What every SQL backend's `migrate` promises about its record of applied migrations:
//! a database migrated by the earlier runner is adopted, one migrated by a newer
//! jobwheel is refused with a typed error, an edited migration is named.

use jobwheel::Error;
use jobwheel::store::JobsExt as _;
use std::future::Future;

/// A closure that runs one SQL statement on `pool` and returns the rows it affected
/// (or the driver's error as text), for the checks below.
#[allow(unused_macros)]
macro_rules! exec_on {
    ($pool:expr) => {{
        let pool = $pool.clone();
        move |sql: String| {
            let pool = pool.clone();
            async move {
                sqlx::query(sqlx::AssertSqlSafe(sql))
                    .execute(&pool)
                    .await
                    .map(|r| r.rows_affected())
                    .map_err(|e| e.to_string())
            }
        }
    }};
}
#[allow(unused_imports)]
pub(crate) use exec_on;

/// Runs the checks on tables already migrated. `exec` runs one statement and returns
/// the rows it affected (or the driver's error as text); `t` is the tables' name
/// prefix (with the schema where there is one); `blob` is a one-byte binary literal in
/// the dialect; `known` is the newest migration this code has.
pub async fn records_are_checked<E, EFut, M, MFut>(
    exec: E,
    migrate: M,
    t: &str,
    blob: &str,
    known: i64,
) where
    E: Fn(String) -> EFut,
    EFut: Future<Output = Result<u64, String>>,
    M: Fn() -> MFut,
    MFut: Future<Output = jobwheel::Result<()>>,
{
    // A database whose versions the earlier runner kept in `<prefix>schema`.
    exec(format!("DROP TABLE {t}migrations")).await.unwrap();
    exec(format!("CREATE TABLE {t}schema (version BIGINT NOT NULL)"))
        .await
        .unwrap();
    let versions: Vec<String> = (1..=known).map(|v| format!("({v})")).collect();
    exec(format!(
        "INSERT INTO {t}schema (version) VALUES {}",
        versions.join(", ")
    ))
    .await
    .unwrap();
    migrate()
        .await
        .expect("an earlier runner's database is adopted");
    assert!(
        exec(format!("DELETE FROM {t}schema")).await.is_err(),
        "the earlier runner's table is dropped"
    );
    let recorded = exec(format!(
        "UPDATE {t}migrations SET execution_time = 0 WHERE success"
    ))
    .await
    .unwrap();
    assert_eq!(recorded, known as u64, "every version is recorded");
    migrate()
        .await
        .expect("and the next run finds nothing to do");

    // A version from a newer jobwheel.
    exec(format!(
        "INSERT INTO {t}migrations (version, description, success, checksum, execution_time)
         VALUES (99, 'from a newer jobwheel', TRUE, {blob}, 0)"
    ))
    .await
    .unwrap();
    match migrate().await {
        Err(Error::SchemaTooNew {
            found, known: k, ..
        }) => {
            assert_eq!((found, k), (99, known));
        }
        other => panic!("a newer schema is refused with SchemaTooNew, got {other:?}"),
    }
    exec(format!("DELETE FROM {t}migrations WHERE version = 99"))
        .await
        .unwrap();

    // A migration whose text changed since it ran.
    exec(format!(
        "UPDATE {t}migrations SET checksum = {blob} WHERE version = 1"
    ))
    .await
    .unwrap();
    let err = migrate().await.expect_err("an edited migration is refused");
    assert!(
        err.to_string().contains("migration 1 ") && err.to_string().contains("modified"),
        "the error names the version: {err}"
    );
}

/// A store migrated before fire contexts existed (payload overrides in
/// `jobs.next_payload` and `runs.payload`) keeps them: the migration that makes
/// `next_context` and `context` turns each into the context's `payload`. `versions`
/// are the migrations run again: from that one up to the one that partitioned the
/// run log by day or put running runs in job rows, which stay applied (the end of
/// the range: they convert or extend the tables as they are); `text` the dialect's type for the
/// old columns; `reopen` gives a store on new connections once migrated (as a
/// restarted process has).
pub async fn payload_overrides_become_contexts<E, EFut, M, MFut, R, RFut>(
    exec: E,
    migrate: M,
    store: &dyn jobwheel::JobStore,
    reopen: R,
    t: &str,
    text: &str,
    versions: std::ops::Range<i64>,
) where
    E: Fn(String) -> EFut,
    EFut: Future<Output = Result<u64, String>>,
    M: Fn() -> MFut,
    MFut: Future<Output = jobwheel::Result<()>>,
    R: FnOnce() -> RFut,
    RFut: Future<Output = std::sync::Arc<dyn jobwheel::JobStore>>,
{
    use jobwheel::store::{StartOutcome, StartRun};
    use jobwheel::{FireContext, Job, Schedule, Timestamp, TriggerKind};
    let id = format!("upgrade-{:08x}", fastrand::u32(..));
    let at = Timestamp::from_millis(1_000_000);
    let job = Job::builder(&id, "noop", Schedule::once(at))
        .build()
        .unwrap();
    store.upsert(&job, Some(at)).await.unwrap();
    let payload = serde_json::json!({"report": "<b>é</b>", "n": [1, null]});
    store.trigger(job.id(), at, Some(&payload)).await.unwrap();
    let run = StartRun {
        job_id: job.id().clone(),
        fire_at: at,
        version: 1,
        token: 1,
        node: "n".into(),
        attempt: 1,
        trigger: TriggerKind::Manual,
        covers: None,
        context: FireContext::with_payload(Some(payload.clone())),
    };
    let StartOutcome::Started { run_id, .. } = store.start_runs(&[run]).await.unwrap()[0] else {
        panic!("not started");
    };
    // The run's row is written at its finish; the job stays due with the override.
    let fire = jobwheel::FireState::fresh(
        at,
        TriggerKind::Manual,
        FireContext::with_payload(Some(payload.clone())),
    );
    let done = store
        .finish_runs(&[jobwheel::store::FinishRun {
            run_id,
            job_id: job.id().clone(),
            token: 1,
            takeover: false,
            status: jobwheel::RunStatus::Failed,
            error: None,
            will_retry: true,
            executor: None,
            version: 1,
            next: Some(fire),
            alarms: Vec::new(),
            releases: Vec::new(),
            lease: jobwheel::store::LeaseEnd::Untouched,
        }])
        .await
        .unwrap();
    assert!(matches!(
        done[0],
        jobwheel::store::FinishOutcome::Finished {
            rescheduled: true,
            ..
        }
    ));
    // Back to the schema before contexts, the override written as it was then.
    let json = payload.to_string().replace('\'', "''");
    for (table, old, new) in [
        ("jobs", "next_payload", "next_context"),
        ("runs", "payload", "context"),
    ] {
        exec(format!("ALTER TABLE {t}{table} ADD COLUMN {old} {text}"))
            .await
            .unwrap();
        exec(format!(
            "UPDATE {t}{table} SET {old} = '{json}' WHERE {new} IS NOT NULL"
        ))
        .await
        .unwrap();
        exec(format!("ALTER TABLE {t}{table} DROP COLUMN {new}"))
            .await
            .unwrap();
    }
    // The tables of later versions did not exist then either (their migrations
    // run again below; the queue of releases gains columns in one of them).
    exec(format!("DROP TABLE IF EXISTS {t}releases"))
        .await
        .unwrap();
    exec(format!(
        "DELETE FROM {t}migrations WHERE version >= {} AND version < {}",
        versions.start, versions.end
    ))
    .await
    .unwrap();
    migrate().await.expect("the migration to contexts runs");
    let store = reopen().await;
    let rec = store.get(job.id()).await.unwrap().unwrap();
    assert_eq!(
        rec.next_payload(),
        Some(&payload),
        "the job's override is kept"
    );
    let runs = store
        .runs(&jobwheel::RunQuery::new().job(job.id().clone()))
        .await
        .unwrap();
    assert_eq!(
        runs[0].payload(),
        Some(&payload),
        "the run's override is kept"
    );
    store.remove(job.id()).await.unwrap();
}
