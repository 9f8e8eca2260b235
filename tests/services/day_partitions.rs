//! The run log partitioned by day on PostgreSQL and MariaDB: retention drops whole
//! days (asserted from the catalog) and keeps the other days intact, a lookup by id
//! reads one partition, partitions are made ahead by any number of nodes at once,
//! and the upgrade from the single tables keeps every row.

use crate::support;
use futures::future::BoxFuture;
use jobwheel::store::JobsExt as _;
use jobwheel::store::StartOutcome;
use jobwheel::{Job, JobStore, RunQuery, Schedule, Timestamp};
use std::sync::Arc;
use std::time::Instant;

const STEP: i64 = 1 << 33;
const DAY_MS: i64 = 86_400_000;

/// One database reached through plain SQL, and what differs between the two.
pub(crate) struct Db {
    pg: bool,
    /// Table names' prefix as written in SQL (`public.p_` or `p_`).
    t: String,
    /// The bare prefix.
    p: String,
    exec: Box<dyn Fn(String) -> BoxFuture<'static, u64> + Send + Sync>,
    ints: Box<dyn Fn(String) -> BoxFuture<'static, Vec<i64>> + Send + Sync>,
    texts: Box<dyn Fn(String) -> BoxFuture<'static, Vec<String>> + Send + Sync>,
    /// The partitions a query reads, from its plan.
    plan: Box<dyn Fn(String) -> BoxFuture<'static, String> + Send + Sync>,
}

macro_rules! db_on {
    ($pool:expr, $pg:expr, $t:expr, $p:expr) => {{
        let (a, b, c, d) = ($pool.clone(), $pool.clone(), $pool.clone(), $pool.clone());
        Db {
            pg: $pg,
            t: $t,
            p: $p,
            exec: Box::new(move |sql: String| {
                let pool = a.clone();
                Box::pin(async move {
                    sqlx::raw_sql(sqlx::AssertSqlSafe(sql.clone()))
                        .execute(&pool)
                        .await
                        .unwrap_or_else(|e| panic!("{sql}: {e}"))
                        .rows_affected()
                })
            }),
            ints: Box::new(move |sql: String| {
                let pool = b.clone();
                Box::pin(async move {
                    sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(sql.clone()))
                        .fetch_all(&pool)
                        .await
                        .unwrap_or_else(|e| panic!("{sql}: {e}"))
                })
            }),
            texts: Box::new(move |sql: String| {
                let pool = c.clone();
                Box::pin(async move {
                    sqlx::query_scalar::<_, String>(sqlx::AssertSqlSafe(sql.clone()))
                        .fetch_all(&pool)
                        .await
                        .unwrap_or_else(|e| panic!("{sql}: {e}"))
                })
            }),
            plan: Box::new(move |sql: String| {
                let pool = d.clone();
                Box::pin(async move {
                    use sqlx::Row;
                    let (explain, column) = if $pg {
                        ("EXPLAIN", 0)
                    } else {
                        ("EXPLAIN PARTITIONS", 3)
                    };
                    let rows = sqlx::query(sqlx::AssertSqlSafe(format!("{explain} {sql}")))
                        .fetch_all(&pool)
                        .await
                        .unwrap_or_else(|e| panic!("{sql}: {e}"));
                    rows.iter()
                        .filter_map(|r| r.try_get::<Option<String>, _>(column).ok().flatten())
                        .collect::<Vec<_>>()
                        .join("\n")
                })
            }),
        }
    }};
}

/// PostgreSQL's catalog and SQL, tables `public.<p>…`.
#[cfg(feature = "postgres")]
pub(crate) fn pg(pool: &sqlx::PgPool, p: &str) -> Db {
    db_on!(pool, true, format!("public.{p}"), p.to_string())
}

/// MariaDB's catalog and SQL, tables `<p>…`.
#[cfg(feature = "mysql")]
pub(crate) fn maria(pool: &sqlx::MySqlPool, p: &str) -> Db {
    db_on!(pool, false, p.to_string(), p.to_string())
}

impl Db {
    async fn int(&self, sql: String) -> i64 {
        (self.ints)(sql).await.first().copied().unwrap_or(0)
    }

    /// A table's partitions by tag (`legacy`, `dYYYYMMDD`), sorted, from the catalog.
    async fn parts(&self, table: &str) -> Vec<String> {
        let (t, p) = (&self.t, &self.p);
        let mut tags = if self.pg {
            (self.texts)(format!(
                "SELECT c.relname::text FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
                 WHERE i.inhparent = to_regclass('{t}{table}')"
            ))
            .await
            .into_iter()
            .map(|n| n.trim_start_matches(&format!("{p}{table}_")).to_string())
            .collect::<Vec<_>>()
        } else {
            (self.texts)(format!(
                "SELECT CAST(PARTITION_NAME AS CHAR) FROM information_schema.PARTITIONS
                 WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = '{p}{table}' AND PARTITION_NAME <> 'pmax'"
            ))
            .await
        };
        tags.sort();
        tags
    }

    fn part(&self, table: &str, tag: &str) -> String {
        if self.pg {
            format!("{}{table}_{tag}", self.t)
        } else {
            format!("{}{table} PARTITION ({tag})", self.t)
        }
    }

    async fn count(&self, table: &str, tag: &str) -> i64 {
        self.int(format!("SELECT COUNT(*) FROM {}", self.part(table, tag)))
            .await
    }

    fn series(&self, n: i64) -> String {
        if self.pg {
            format!("generate_series(1, {n}) AS s(g)")
        } else {
            format!("(SELECT seq AS g FROM seq_1_to_{n}) AS s")
        }
    }

    /// `n` finished runs of job `job` with ids from `first + 1`, started a second
    /// apart from `start` (ms), and two log lines for each of the first `with_lines`.
    async fn runs(&self, job: &str, first: i64, start: i64, n: i64, with_lines: i64) {
        let trigger = if self.pg { "trigger" } else { "`trigger`" };
        (self.exec)(format!(
            "INSERT INTO {t}runs (id, job_id, fire_at, {trigger}, node, attempt, token, status, started_at, ended_at, will_retry)
             SELECT {first} + g, '{job}', {start} + g * 1000, 'schedule', 'n', 1, g, 'succeeded',
                    {start} + g * 1000, {start} + g * 1000 + 500, false FROM {series}",
            t = self.t,
            series = self.series(n)
        ))
        .await;
        for seq in 0..2 {
            (self.exec)(format!(
                "INSERT INTO {t}run_lines (run_id, seq, line) SELECT {first} + g, {seq}, 'line' FROM {series}",
                t = self.t,
                series = self.series(with_lines)
            ))
            .await;
        }
    }

    /// Lays the tables out as on a store partitioned five days ago: the ids from
    /// before then in `legacy`, a partition for each day since.
    async fn partitioned_days_ago(&self, today: i64, days: i64) {
        let first = today - days;
        for table in ["runs", "run_lines"] {
            let t = format!("{}{table}", self.t);
            if self.pg {
                (self.exec)(format!(
                    "ALTER TABLE {t} DETACH PARTITION {t}_legacy; DROP TABLE {t}_legacy;
                     CREATE TABLE {t}_legacy PARTITION OF {t} FOR VALUES FROM (MINVALUE) TO ({})",
                    first * STEP
                ))
                .await;
                for d in first..today {
                    (self.exec)(format!(
                        "CREATE TABLE {t}_{} PARTITION OF {t} FOR VALUES FROM ({}) TO ({})",
                        tag(d),
                        d * STEP,
                        (d + 1) * STEP
                    ))
                    .await;
                }
            } else {
                let days: Vec<String> = (first..today)
                    .map(|d| format!("PARTITION {} VALUES LESS THAN ({})", tag(d), (d + 1) * STEP))
                    .collect();
                (self.exec)(format!(
                    "ALTER TABLE {t} REORGANIZE PARTITION legacy INTO
                     (PARTITION legacy VALUES LESS THAN ({}), {})",
                    first * STEP,
                    days.join(", ")
                ))
                .await;
            }
        }
    }
}

/// The partition tag of a day (days since 1970-01-01).
fn tag(day: i64) -> String {
    let d = chrono::NaiveDate::default() + chrono::Days::new(day as u64);
    format!("d{}", d.format("%Y%m%d"))
}

/// Starts one run of a new job through the store; its id.
async fn start_one(store: &dyn JobStore, id: &str) -> i64 {
    let at = Timestamp::from_millis(1_000_000);
    let job = Job::builder(id, "noop", Schedule::once(at))
        .build()
        .unwrap();
    store.upsert(&job, Some(at)).await.unwrap();
    let run = support::first_start(id, at);
    match store.start_runs(&[run]).await.unwrap()[0] {
        StartOutcome::Started { run_id, .. } => run_id.0,
        ref other => panic!("not started: {other:?}"),
    }
}

/// Records the end of the run `run_id` of job `id` that [`start_one`] started.
async fn finish_one(store: &dyn JobStore, id: &str, run_id: i64) {
    let done = store
        .finish_runs(&[jobwheel::store::FinishRun {
            run_id: jobwheel::RunId(run_id),
            job_id: jobwheel::JobId::new(id).unwrap(),
            token: 1,
            takeover: false,
            status: jobwheel::RunStatus::Succeeded,
            error: None,
            will_retry: false,
            executor: None,
            version: 1,
            next: None,
            alarms: Vec::new(),
            releases: Vec::new(),
            lease: jobwheel::store::LeaseEnd::Untouched,
        }])
        .await
        .unwrap();
    assert!(
        matches!(done[0], jobwheel::store::FinishOutcome::Finished { .. }),
        "{done:?}"
    );
}

/// Retention on a store partitioned five days ago, at the start of yesterday: the
/// days whose runs have all ended and the legacy partition are dropped whole (run
/// and line tables, seen in the catalog), a day with a run still running keeps it
/// (its finished runs deleted one by one) whether the running run is a run row or
/// kept in its job's row, yesterday and today stay intact.
pub(crate) async fn retention_drops_whole_days(db: &Db, store: Arc<dyn JobStore>) {
    let now = store.now().await.unwrap().as_millis();
    let today = now / DAY_MS;
    let ahead: Vec<String> = (today..=today + 7).map(tag).collect();
    let mut expect = ahead.clone();
    expect.push("legacy".into());
    expect.sort();
    assert_eq!(
        db.parts("runs").await,
        expect,
        "today, seven days ahead, legacy"
    );
    assert_eq!(db.parts("run_lines").await, expect);

    if db.pg {
        // A finish on a day with no partition (today's dropped: maintenance has not
        // made it) makes the missing day and is recorded: the run's row is written
        // at its finish, into its start day's partition.
        (db.exec)(format!(
            "DROP TABLE {t}runs_{d}; DROP TABLE {t}run_lines_{d}",
            t = db.t,
            d = tag(today)
        ))
        .await;
        assert!(!db.parts("runs").await.contains(&tag(today)));
        let healed_job = format!("{}healed", db.p);
        let healed = start_one(&*store, &healed_job).await;
        assert_eq!(healed / STEP, today);
        finish_one(&*store, &healed_job, healed).await;
        assert_eq!(
            db.parts("runs").await,
            expect,
            "today's partition made again"
        );
        assert_eq!(db.parts("run_lines").await, expect);
    }

    db.partitioned_days_ago(today, 5).await;
    db.runs("old", 0, 1_000, 50, 10).await;
    for k in 1..=5 {
        let day = today - k;
        db.runs(&format!("j{k}"), day * STEP, day * DAY_MS, 100, 10)
            .await;
    }
    let busy = (today - 4) * STEP + 1_000;
    let trigger = if db.pg { "trigger" } else { "`trigger`" };
    (db.exec)(format!(
        "INSERT INTO {t}runs (id, job_id, fire_at, {trigger}, node, attempt, token, status, started_at, will_retry)
         VALUES ({busy}, 'busy', 1, 'schedule', 'n', 1, 1, 'running', {}, false)",
        (today - 4) * DAY_MS + 5_000,
        t = db.t
    ))
    .await;
    // A run kept running in its job's row with an id of three days ago (a run that
    // has been going since) keeps that day too.
    let long_job = format!("{}long", db.p);
    let long = start_one(&*store, &long_job).await;
    let long_id = (today - 3) * STEP + 2_000;
    (db.exec)(format!(
        "UPDATE {t}jobs SET running_run = {long_id}, run_started_at = {} WHERE id = '{long_job}' AND running_run = {long}",
        (today - 3) * DAY_MS + 7_000,
        t = db.t
    ))
    .await;
    let fresh_job = format!("{}fresh", db.p);
    let fresh = start_one(&*store, &fresh_job).await;
    assert_eq!(fresh / STEP, today, "a new run's id carries its day");
    finish_one(&*store, &fresh_job, fresh).await;

    // Queries by start time read the runs of those days and of the legacy partition.
    let by_time = |job: &str, since: i64, until: Option<i64>| {
        let mut q = RunQuery::new()
            .job(jobwheel::JobId::new(job).unwrap())
            .since(Timestamp::from_millis(since))
            .limit(500);
        if let Some(u) = until {
            q = q.until(Timestamp::from_millis(u));
        }
        let store = store.clone();
        async move { store.runs(&q).await.unwrap() }
    };
    assert_eq!(
        by_time("old", 0, None).await.len(),
        50,
        "legacy runs by time"
    );
    let mid = (today - 2) * DAY_MS + 50_000;
    let window = by_time("j2", mid, Some((today - 1) * DAY_MS)).await;
    assert_eq!(window.len(), 51, "j2's runs from second 50 of its day");
    assert!(window.iter().all(|r| r.started_at.as_millis() >= mid));
    assert!(by_time("j2", (today - 1) * DAY_MS, None).await.is_empty());

    let cutoff = Timestamp::from_millis((today - 1) * DAY_MS);
    let started = Instant::now();
    let n = store.purge_runs(cutoff).await.unwrap();
    let took = started.elapsed();
    assert_eq!(
        n,
        50 + 2 * 100 + 2 * 100,
        "legacy, two whole days, two days' finished runs"
    );
    let mut kept = vec![tag(today - 4), tag(today - 3), tag(today - 1)];
    kept.extend(ahead.iter().cloned());
    kept.sort();
    assert_eq!(
        db.parts("runs").await,
        kept,
        "dropped whole: legacy and two days"
    );
    assert_eq!(
        db.parts("run_lines").await,
        kept,
        "their lines went with them"
    );
    assert_eq!(
        db.count("runs", &tag(today - 4)).await,
        1,
        "the running run stays"
    );
    assert_eq!(db.count("run_lines", &tag(today - 4)).await, 0);
    assert_eq!(
        db.count("runs", &tag(today - 3)).await,
        0,
        "the day of a run in its job's row keeps its partition, not its finished runs"
    );
    assert_eq!(
        db.count("runs", &tag(today - 1)).await,
        100,
        "yesterday intact"
    );
    assert_eq!(db.count("run_lines", &tag(today - 1)).await, 20);
    // The fresh run, and on PostgreSQL the one that made today's partition again.
    let today_runs = if db.pg { 2 } else { 1 };
    assert_eq!(
        db.count("runs", &tag(today)).await,
        today_runs,
        "today intact"
    );
    println!(
        "{} retention: {n} runs in {took:?} (four days' partitions)",
        if db.pg { "postgres" } else { "mariadb" }
    );

    // Again with the same cutoff: nothing more to do; many nodes at once.
    let again = futures::future::join_all((0..3).map(|_| store.purge_runs(cutoff))).await;
    for r in again {
        assert_eq!(r.unwrap(), 0);
    }
    finish_one(&*store, &long_job, long_id).await;
    assert_eq!(
        db.count("runs", &tag(today - 3)).await,
        1,
        "the long run's row is written into its day at its finish"
    );

    // Queries by job read the kept days, newest first; a lookup by id reads one
    // partition.
    let runs = store
        .runs(
            &RunQuery::new()
                .job(jobwheel::JobId::new("j1").unwrap())
                .limit(500),
        )
        .await
        .unwrap();
    assert_eq!(runs.len(), 100);
    assert!(runs.windows(2).all(|w| w[0].id > w[1].id));
    assert!(runs.iter().all(|r| r.id.0 / STEP == today - 1));
    let probe = (today - 1) * STEP + 7;
    let plan = (db.plan)(format!("SELECT * FROM {}runs WHERE id = {probe}", db.t)).await;
    let read: Vec<&String> = kept
        .iter()
        .filter(|tag| plan.contains(tag.as_str()))
        .collect();
    assert_eq!(read, [&tag(today - 1)], "one partition read: {plan}");
    // The store's query by start time bounds the id too (yesterday's runs from its
    // second 50): one partition read.
    let since = (today - 1) * DAY_MS + 50_000;
    let plan = (db.plan)(format!(
        "SELECT * FROM {}runs WHERE job_id = 'j1' AND started_at >= {since} AND started_at < {until}
         AND (id >= {lo} OR id < {legacy}) AND id < {hi} ORDER BY id DESC LIMIT 50",
        db.t,
        until = today * DAY_MS,
        lo = (today - 1) * STEP,
        legacy = 10_000 * STEP,
        hi = today * STEP,
    ))
    .await;
    let read: Vec<&String> = kept
        .iter()
        .filter(|tag| plan.contains(tag.as_str()))
        .collect();
    // On MariaDB a partition holds every id below its bound, so the oldest one also
    // answers for the ids of the (dropped) legacy partition, and is read too.
    let yesterday = tag(today - 1);
    let mut expect = vec![&yesterday];
    if !db.pg {
        expect.insert(0, &kept[0]);
    }
    assert_eq!(read, expect, "a day's query reads its partition: {plan}");

    // A missing day ahead is made again by whichever node gets there; many at once.
    let last = tag(today + 7);
    if db.pg {
        (db.exec)(format!(
            "DROP TABLE {t}runs_{last}; DROP TABLE {t}run_lines_{last}",
            t = db.t
        ))
        .await;
    } else {
        (db.exec)(format!(
            "ALTER TABLE {t}runs DROP PARTITION {last}; ALTER TABLE {t}run_lines DROP PARTITION {last}",
            t = db.t
        ))
        .await;
    }
    assert!(!db.parts("runs").await.contains(&last));
    let racing = futures::future::join_all((0..4).map(|_| store.prepare_log())).await;
    for r in racing {
        r.unwrap();
    }
    assert_eq!(db.parts("runs").await, kept);
    assert_eq!(db.parts("run_lines").await, kept);
}

/// Tables migrated by every version before partitioning (the migration files
/// applied as they are), holding `rows` runs and two lines for each of the first
/// thousand, upgraded by `migrate`: every row is still there, in `legacy`, and new
/// runs get ids of their day.
pub(crate) async fn the_upgrade_keeps_every_row<M, MFut>(
    db: &Db,
    dir: &str,
    store: Arc<dyn JobStore>,
    migrate: M,
    rows: i64,
) where
    M: FnOnce() -> MFut,
    MFut: std::future::Future<Output = jobwheel::Result<()>>,
{
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| !p.to_string_lossy().contains("day_partitions"))
        .collect();
    files.sort();
    let mut versions = Vec::new();
    for f in &files {
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        versions.push(name[..4].parse::<i64>().unwrap());
        let sql = std::fs::read_to_string(f)
            .unwrap()
            .replace("{t}", &db.t)
            .replace("{p}", &db.p);
        (db.exec)(sql).await;
    }
    // As the runner before the migrator recorded them (adopted by `migrate`).
    (db.exec)(format!(
        "CREATE TABLE {}schema (version BIGINT NOT NULL)",
        db.t
    ))
    .await;
    for v in &versions {
        (db.exec)(format!("INSERT INTO {}schema (version) VALUES ({v})", db.t)).await;
    }
    db.runs("kept", 0, 1_000, rows, 1_000).await;
    let sum = |t: &str, c: &str| {
        let cast = if db.pg { "BIGINT" } else { "SIGNED" };
        format!(
            "SELECT CAST(COALESCE(SUM({c}), 0) AS {cast}) FROM {}{t}",
            db.t
        )
    };
    let before = (
        db.int(format!("SELECT COUNT(*) FROM {}runs", db.t)).await,
        db.int(sum("runs", "id + started_at + ended_at")).await,
        db.int(sum("run_lines", "run_id + seq")).await,
    );
    assert_eq!(before.0, rows);
    let started = Instant::now();
    migrate().await.expect("the upgrade runs");
    let took = started.elapsed();
    let after = (
        db.int(format!("SELECT COUNT(*) FROM {}runs", db.t)).await,
        db.int(sum("runs", "id + started_at + ended_at")).await,
        db.int(sum("run_lines", "run_id + seq")).await,
    );
    assert_eq!(after, before, "every run and line kept");
    assert_eq!(
        db.count("runs", "legacy").await,
        rows,
        "in the legacy partition"
    );
    assert_eq!(db.count("run_lines", "legacy").await, 2_000);
    let today = store.now().await.unwrap().as_millis() / DAY_MS;
    assert!(db.parts("runs").await.contains(&tag(today)));
    let fresh = start_one(&*store, "kept").await;
    assert_eq!(fresh / STEP, today);
    let runs = store
        .runs(
            &RunQuery::new()
                .job(jobwheel::JobId::new("kept").unwrap())
                .limit(3),
        )
        .await
        .unwrap();
    let ids: Vec<i64> = runs.iter().map(|r| r.id.0).collect();
    assert_eq!(
        ids,
        [fresh, rows, rows - 1],
        "the new run first, then the old ones"
    );
    println!(
        "{} upgrade of {rows} runs: {took:?}",
        if db.pg { "postgres" } else { "mariadb" }
    );
}
