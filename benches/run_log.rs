//! The run log at scale on PostgreSQL and MariaDB, partitioned by day against one
//! table, in one run.
//!
//! `cargo bench --bench run_log --all-features -- --backend postgres|mysql
//! [--rows 10000000] [--queries 400] [--upgrade-rows 10000000]` (0 rows: that part
//! left out)
//!
//! 1. `--rows` runs spread over seven days (1,000 jobs, one in a hundred failed, a
//!    log line for one run in ten) are written into the store's own day partitions
//!    (today's and the six made ahead: the store's layout, nothing faked) and the
//!    same rows into one table with the indexes the run log had before partitioning
//!    (`flat`), `ANALYZE`d.
//! 2. Queries by job, the SQL of the store's `runs` on each table, alternating,
//!    `--queries` each (median and 99th percentile): a job's newest 50 runs; a job's
//!    runs of one day (on the partitioned log the store bounds the id by the day
//!    too, which one table numbered as before cannot).
//! 3. One day's retention six times, alternating which goes first: the store's
//!    `purge_runs` at a day's start (drops a day's partitions) against the row
//!    purge the store ran before partitioning (`DELETE` of the day's lines and runs)
//!    on `flat`.
//! 4. The upgrade: tables made by every migration before partitioning, holding
//!    `--upgrade-rows` runs (a line for one in ten), upgraded by `migrate`.
//!
//! URLs from `JOBWHEEL_POSTGRES_URL` / `JOBWHEEL_MYSQL_URL` (defaults: the local test
//! servers). Every run uses fresh tables and drops them afterwards.

use jobwheel::{JobStore, Timestamp};
use std::time::{Duration, Instant};

const STEP: i64 = 1 << 33;
const DAY_MS: i64 = 86_400_000;
const DAYS: i64 = 7;

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

fn num(name: &str, default: i64) -> i64 {
    arg(name).and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The two databases' SQL where it differs, over one pool type each.
enum Db {
    Pg(sqlx::PgPool, String),
    Maria(sqlx::MySqlPool, String),
}

impl Db {
    fn pg(&self) -> bool {
        matches!(self, Db::Pg(..))
    }

    /// Table names' prefix as written in SQL.
    fn t(&self) -> String {
        match self {
            Db::Pg(_, p) => format!("public.{p}"),
            Db::Maria(_, p) => p.clone(),
        }
    }

    async fn exec(&self, sql: String) -> u64 {
        let q = sqlx::AssertSqlSafe(sql.clone());
        let r = match self {
            Db::Pg(pool, _) => sqlx::raw_sql(q)
                .execute(pool)
                .await
                .map(|r| r.rows_affected()),
            Db::Maria(pool, _) => sqlx::raw_sql(q)
                .execute(pool)
                .await
                .map(|r| r.rows_affected()),
        };
        r.unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    /// Runs a query and reads its rows (the time is what is measured).
    async fn fetch(&self, sql: &str, job: &str, since: Option<i64>) -> usize {
        macro_rules! run {
            ($pool:expr, $sql:expr) => {{
                let mut q = sqlx::query(sqlx::AssertSqlSafe($sql)).bind(job);
                if let Some(s) = since {
                    q = q.bind(s).bind(s + DAY_MS);
                }
                q.fetch_all($pool).await.unwrap().len()
            }};
        }
        match self {
            Db::Pg(pool, _) => {
                let mut n = 0;
                let numbered: String = sql
                    .split('?')
                    .enumerate()
                    .map(|(i, part)| {
                        if i == 0 {
                            part.to_string()
                        } else {
                            n += 1;
                            format!("${n}{part}")
                        }
                    })
                    .collect();
                run!(pool, numbered)
            }
            Db::Maria(pool, _) => run!(pool, sql.to_string()),
        }
    }

    fn series(&self, from: i64, to: i64) -> String {
        if self.pg() {
            format!("generate_series({from}, {to}) AS s(g)")
        } else {
            format!("(SELECT seq AS g FROM seq_{from}_to_{to}) AS s")
        }
    }

    /// `n` runs of day `day` into `runs`, `lines` (a line for one in ten), in chunks.
    async fn fill(&self, runs: &str, lines: &str, day: i64, n: i64) {
        let trigger = if self.pg() { "trigger" } else { "`trigger`" };
        let chunk = 1_000_000;
        let mut from = 1;
        while from <= n {
            let to = (from + chunk - 1).min(n);
            let gap = DAY_MS / n.max(1);
            self.exec(format!(
                "INSERT INTO {runs} (id, job_id, fire_at, {trigger}, node, attempt, token, status, started_at, ended_at, will_retry)
                 SELECT {base} + g, CONCAT('j', g % 1000), {start} + (g - 1) * {gap}, 'schedule', 'n', 1, g,
                        CASE WHEN g % 100 = 0 THEN 'failed' ELSE 'succeeded' END,
                        {start} + (g - 1) * {gap}, {start} + (g - 1) * {gap} + 500, false
                 FROM {series}",
                base = day * STEP,
                start = day * DAY_MS,
                series = self.series(from, to)
            ))
            .await;
            self.exec(format!(
                "INSERT INTO {lines} (run_id, seq, line) SELECT {base} + g, 0, 'a line of the run''s log'
                 FROM {series} WHERE g % 10 = 0",
                base = day * STEP,
                series = self.series(from, to)
            ))
            .await;
            from = to + 1;
        }
    }

    async fn analyze(&self, table: &str) {
        if self.pg() {
            self.exec(format!("ANALYZE {table}")).await;
        } else {
            self.exec(format!("ANALYZE TABLE {table}")).await;
        }
    }

    async fn size_mb(&self, table: &str) -> f64 {
        let bytes: i64 = match self {
            Db::Pg(pool, _) => sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
                "SELECT CAST(COALESCE(SUM(pg_total_relation_size(c.oid)), pg_total_relation_size('{table}')) AS BIGINT)
                 FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = to_regclass('{table}')"
            )))
            .fetch_one(pool)
            .await
            .unwrap(),
            Db::Maria(pool, p) => {
                let bare = table.trim_start_matches(p.as_str());
                sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
                    "SELECT CAST(SUM(DATA_LENGTH + INDEX_LENGTH) AS SIGNED) FROM information_schema.PARTITIONS
                     WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = '{p}{bare}'"
                )))
                .fetch_one(pool)
                .await
                .unwrap()
            }
        };
        bytes as f64 / 1e6
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn p99(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[(v.len() * 99 / 100).min(v.len() - 1)]
}

/// A store with its own tables.
enum Store {
    Pg(jobwheel::postgres::PgStore),
    Maria(jobwheel::mysql::MySqlStore),
}

impl Store {
    fn log(&self) -> &dyn JobStore {
        match self {
            Store::Pg(s) => s,
            Store::Maria(s) => s,
        }
    }

    async fn migrate(&self) {
        match self {
            Store::Pg(s) => s.migrate().await.unwrap(),
            Store::Maria(s) => s.migrate().await.unwrap(),
        }
    }
}

/// A store with a fresh prefix (migrated when `migrate`), and its SQL.
async fn open(backend: &str, prefix: &str, migrate: bool) -> (Store, Db) {
    let pg_url = std::env::var("JOBWHEEL_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    let my_url = std::env::var("JOBWHEEL_MYSQL_URL")
        .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306/test".into());
    let (store, db) = if backend == "postgres" {
        let s = jobwheel::postgres::PgStore::builder(pg_url)
            .prefix(prefix)
            .build()
            .await
            .unwrap();
        let db = Db::Pg(s.pool().clone(), prefix.into());
        (Store::Pg(s), db)
    } else {
        let s = jobwheel::mysql::MySqlStore::builder(my_url)
            .prefix(prefix)
            .build()
            .await
            .unwrap();
        let db = Db::Maria(s.pool().clone(), prefix.into());
        (Store::Maria(s), db)
    };
    if migrate {
        store.migrate().await;
    }
    (store, db)
}

/// Drops every table and the sequence under the prefix.
async fn drop_all(db: &Db) {
    let t = db.t();
    for table in [
        "runs",
        "run_lines",
        "flat",
        "flat_lines",
        "jobs",
        "nodes",
        "executors",
        "alarms",
        "audit",
        "locks",
        "credentials",
        "releases",
        "migrations",
        "schema",
    ] {
        db.exec(format!("DROP TABLE IF EXISTS {t}{table}")).await;
    }
    db.exec(format!("DROP SEQUENCE IF EXISTS {t}run_ids")).await;
}

async fn scale(backend: &str, rows: i64, queries: usize) {
    let prefix = format!("rl{:06x}_", fastrand::u32(..0xffffff));
    let (store, db) = open(backend, &prefix, true).await;
    let log = store.log();
    let t = db.t();
    let today = log.now().await.unwrap().as_millis() / DAY_MS;
    // The flat table: the indexes the run log had before partitioning.
    if db.pg() {
        db.exec(format!(
            "CREATE TABLE {t}flat (LIKE {t}runs INCLUDING DEFAULTS);
             ALTER TABLE {t}flat ADD PRIMARY KEY (id);
             CREATE INDEX {prefix}flat_job ON {t}flat (job_id, id);
             CREATE INDEX {prefix}flat_running ON {t}flat (node) WHERE status = 'running';
             CREATE INDEX {prefix}flat_unsucceeded ON {t}flat (id) WHERE status NOT IN ('running', 'succeeded');
             CREATE INDEX {prefix}flat_started_brin ON {t}flat USING brin (started_at);
             CREATE INDEX {prefix}flat_ended_brin ON {t}flat USING brin (ended_at);
             CREATE TABLE {t}flat_lines (LIKE {t}run_lines INCLUDING ALL);"
        ))
        .await;
    } else {
        db.exec(format!(
            "CREATE TABLE {t}flat LIKE {t}runs; ALTER TABLE {t}flat REMOVE PARTITIONING;
             CREATE TABLE {t}flat_lines LIKE {t}run_lines; ALTER TABLE {t}flat_lines REMOVE PARTITIONING;"
        ))
        .await;
    }
    let per_day = rows / DAYS;
    let filling = Instant::now();
    for k in 0..DAYS {
        let day = today + k;
        db.fill(&format!("{t}runs"), &format!("{t}run_lines"), day, per_day)
            .await;
        db.fill(&format!("{t}flat"), &format!("{t}flat_lines"), day, per_day)
            .await;
    }
    for table in ["runs", "run_lines", "flat", "flat_lines"] {
        db.analyze(&format!("{t}{table}")).await;
    }
    println!(
        "run_log | {backend} | {} rows over {DAYS} days written twice in {:.0?} | partitioned {:.0} MB + lines {:.0} MB, one table {:.0} MB + lines {:.0} MB",
        per_day * DAYS,
        filling.elapsed(),
        db.size_mb(&format!("{t}runs")).await,
        db.size_mb(&format!("{t}run_lines")).await,
        db.size_mb(&format!("{t}flat")).await,
        db.size_mb(&format!("{t}flat_lines")).await,
    );

    // Queries by job, alternating: the SQL of the store's `runs` on both tables.
    let newest = |table: &str| {
        format!("SELECT * FROM {t}{table} WHERE 1 = 1 AND job_id = ? ORDER BY id DESC LIMIT 50")
    };
    // The store bounds the id by the days asked for where the log is partitioned
    // (its ids carry their day); one table numbered as before cannot.
    let of_day = |table: &str, since: i64| {
        let ids = if table == "runs" {
            let day = since / DAY_MS;
            format!(
                " AND (id >= {} OR id < {}) AND id < {}",
                day * STEP,
                10_000 * STEP,
                (day + 1) * STEP
            )
        } else {
            String::new()
        };
        format!(
            "SELECT * FROM {t}{table} WHERE 1 = 1 AND job_id = ? AND started_at >= ? AND started_at < ?{ids} ORDER BY id DESC LIMIT 1000"
        )
    };
    let mut times: [Vec<Duration>; 4] = Default::default();
    for i in 0..queries {
        let job = format!("j{}", fastrand::u32(..1000));
        let since = (today + fastrand::i64(0..DAYS)) * DAY_MS;
        let tables = if i % 2 == 0 {
            [(0, "runs"), (1, "flat")]
        } else {
            [(1, "flat"), (0, "runs")]
        };
        for (k, table) in tables {
            let s = Instant::now();
            let a = db.fetch(&newest(table), &job, None).await;
            times[k].push(s.elapsed());
            let s = Instant::now();
            let b = db.fetch(&of_day(table, since), &job, Some(since)).await;
            times[2 + k].push(s.elapsed());
            assert!(a == 50 && b > 0, "{table}: {a} {b}");
        }
    }
    let [part_new, flat_new, part_day, flat_day] = times;
    println!(
        "run_log | {backend} | a job's newest 50 runs: partitioned median {:.2?} (p99 {:.2?}), one table {:.2?} (p99 {:.2?}) | a job's runs of one day: partitioned {:.2?} (p99 {:.2?}), one table {:.2?} (p99 {:.2?}) | {queries} each, alternating",
        median(part_new.clone()),
        p99(part_new),
        median(flat_new.clone()),
        p99(flat_new),
        median(part_day.clone()),
        p99(part_day),
        median(flat_day.clone()),
        p99(flat_day),
    );

    // One day's retention, six times, alternating which goes first.
    let (mut part_ret, mut flat_ret) = (Vec::new(), Vec::new());
    for k in 1..DAYS {
        let cutoff = (today + k) * DAY_MS;
        let order = k % 2 == 0;
        for first in [order, !order] {
            let s = Instant::now();
            let n = if first {
                log.purge_runs(Timestamp::from_millis(cutoff))
                    .await
                    .unwrap()
            } else {
                let gone = format!("ended_at IS NOT NULL AND started_at < {cutoff}");
                db.exec(format!(
                    "DELETE FROM {t}flat_lines WHERE run_id IN (SELECT id FROM {t}flat WHERE {gone})"
                ))
                .await;
                db.exec(format!("DELETE FROM {t}flat WHERE {gone}")).await
            };
            assert_eq!(n as i64, per_day, "one day's runs");
            if first {
                part_ret.push(s.elapsed());
            } else {
                flat_ret.push(s.elapsed());
            }
        }
    }
    println!(
        "run_log | {backend} | one day's retention ({per_day} runs): partitioned median {:.1?} {:?}, one table {:.1?} {:?}",
        median(part_ret.clone()),
        part_ret,
        median(flat_ret.clone()),
        flat_ret
    );
    drop_all(&db).await;
}

/// Times `migrate` over tables made by the migrations before partitioning, holding
/// `rows` runs.
async fn upgrade(backend: &str, rows: i64) {
    let prefix = format!("ru{:06x}_", fastrand::u32(..0xffffff));
    let (store, db) = open(backend, &prefix, false).await;
    let t = db.t();
    let dir = format!(
        "{}/src/backends/{backend}/migrations",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| !p.to_string_lossy().contains("day_partitions"))
        .collect();
    files.sort();
    db.exec(format!("CREATE TABLE {t}schema (version BIGINT NOT NULL)"))
        .await;
    for f in &files {
        let sql = std::fs::read_to_string(f)
            .unwrap()
            .replace("{t}", &t)
            .replace("{p}", &prefix);
        db.exec(sql).await;
        let v: i64 = f.file_name().unwrap().to_string_lossy()[..4]
            .parse()
            .unwrap();
        db.exec(format!("INSERT INTO {t}schema (version) VALUES ({v})"))
            .await;
    }
    // Ids as the old table numbered them: day 0, 1..rows.
    db.fill(&format!("{t}runs"), &format!("{t}run_lines"), 0, rows)
        .await;
    db.analyze(&format!("{t}runs")).await;
    let size = db.size_mb(&format!("{t}runs")).await;
    let s = Instant::now();
    store.migrate().await;
    println!(
        "run_log | {backend} | upgrade of one table of {rows} runs ({size:.0} MB) to day partitions: {:.2?}",
        s.elapsed()
    );
    drop_all(&db).await;
}

fn main() {
    let backend = arg("--backend").unwrap_or_else(|| "postgres".into());
    assert!(
        backend == "postgres" || backend == "mysql",
        "--backend postgres or mysql"
    );
    let rows = num("--rows", 1_000_000);
    let queries = num("--queries", 400) as usize;
    let upgrade_rows = num("--upgrade-rows", rows);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        if rows > 0 {
            scale(&backend, rows, queries).await;
        }
        if upgrade_rows > 0 {
            upgrade(&backend, upgrade_rows).await;
        }
    });
}
