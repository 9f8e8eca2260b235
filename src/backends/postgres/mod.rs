//! The PostgreSQL backend: [`PgStore`] and [`PgLocks`] (feature `postgres`).
//!
//! Starts and finishes are **one statement per batch**: they take arrays (`UNNEST`)
//! and do their checks and writes in data-modifying CTEs, so a batch costs one round
//! trip whatever its size. Leases are the SQL store's (one transaction per batch). The
//! store's clock is the server's `clock_timestamp()`; instants are `BIGINT` epoch
//! milliseconds, so no session time zone is involved. Alarm claims use `FOR UPDATE
//! SKIP LOCKED`.
//!
//! Job ids compare bytewise (the id columns use the `"C"` collation), as on every
//! backend. Everything but the one-statement start and finish is the shared SQL store's
//! (`backends/sql/`); this module is the dialect.
//!
//! ```no_run
//! # async fn t() -> jobwheel::Result<()> {
//! let store = jobwheel::postgres::PgStore::builder("postgres://app@db/app").build().await?;
//! store.migrate().await?;
//! let locks = store.locks();
//! # Ok(()) }
//! ```

mod batch;
mod leases;
mod locks;

use crate::backends::sql::migrate::Embedded;
use crate::backends::sql::partitions::{self, DayParts, Part};
use crate::backends::sql::{Dialect, Sql, check_ident, sql_handles, value_rows};
use crate::error::{Error, Result};
use crate::record::{DueKey, FinishOutcome, FinishRun, StartOutcome, StartRun};
use sqlx::postgres::{PgPool, PgPoolOptions, PgRow};
use sqlx::{Postgres, Transaction};

const NAME: &str = "postgres";
/// The migrations (`{t}` is `<schema>.<prefix>`, `{p}` the prefix, for index names).
const MIGRATIONS: &[Embedded] = &[
    (
        1,
        "jobs, runs, nodes, alarms, locks",
        include_str!("migrations/0001_init.sql"),
    ),
    (
        2,
        "misfire spans and resume points",
        include_str!("migrations/0002_misfire_spans.sql"),
    ),
    (
        3,
        "bytewise job ids",
        include_str!("migrations/0003_bytewise_ids.sql"),
    ),
    (
        4,
        "executor instances",
        include_str!("migrations/0004_executors.sql"),
    ),
    (5, "audit log", include_str!("migrations/0005_audit.sql")),
    (
        6,
        "payload overrides",
        include_str!("migrations/0006_fire_payload.sql"),
    ),
    (
        7,
        "fire contexts",
        include_str!("migrations/0007_fire_context.sql"),
    ),
    (
        8,
        "runtime accounts and tokens",
        include_str!("migrations/0008_credentials.sql"),
    ),
    (
        9,
        "local runs' log lines",
        include_str!("migrations/0009_run_lines.sql"),
    ),
    (
        10,
        "fewer index entries per run",
        include_str!("migrations/0010_run_indexes.sql"),
    ),
    (
        11,
        "releases queued per job",
        include_str!("migrations/0011_releases.sql"),
    ),
    (
        12,
        "marks on queued releases (alarmed, taken)",
        include_str!("migrations/0012_release_marks.sql"),
    ),
    (
        13,
        "the run log partitioned by day",
        include_str!("migrations/0013_day_partitions.sql"),
    ),
    (
        14,
        "a fire in its job's row (lease, running run)",
        include_str!("migrations/0014_fire_in_job_row.sql"),
    ),
    (
        15,
        "the executor instance in a run's record",
        include_str!("migrations/0015_run_executor.sql"),
    ),
];
/// The store's clock in SQL: epoch milliseconds.
/// Rounded down, so a reading is never ahead of the clock (a fire never starts early).
pub(crate) const NOW_MS: &str = "floor(extract(epoch from clock_timestamp()) * 1000)::bigint";

/// Maps a driver error; I/O, pool, serialization and deadlock errors are temporary.
pub(crate) fn db_err(operation: &'static str) -> impl Fn(sqlx::Error) -> Error {
    move |e| {
        let temporary = match &e {
            sqlx::Error::Io(_)
            | sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::Tls(_) => true,
            sqlx::Error::Database(d) => d.code().is_some_and(|c| {
                c.starts_with("08") || c.starts_with("57P") || c == "40001" || c == "40P01"
            }),
            _ => false,
        };
        Error::backend(NAME, operation, temporary, e)
    }
}

/// The rows of a batch statement that answers, for each of `n` requests, a row of
/// what it wrote (column `written`: the request's place, 1-based) or a row of the
/// state before it (column `ord`), by the request's place: the written row where
/// there is one. The statement returns the two kinds of rows side by side (`UNION
/// ALL`) rather than joining them: a join of two data-modifying CTEs has no row
/// estimate and is planned as a nested loop, quadratic in the batch.
fn by_place<'r>(rows: &'r [PgRow], n: usize, op: &'static str) -> Result<Vec<&'r PgRow>> {
    use sqlx::Row;
    let place = |row: &PgRow, c: &str| {
        row.try_get::<Option<i64>, _>(c)
            .ok()
            .flatten()
            .and_then(|p| usize::try_from(p - 1).ok())
            .filter(|p| *p < n)
    };
    let mut out: Vec<Option<&PgRow>> = vec![None; n];
    for row in rows {
        if let Some(p) = place(row, "written") {
            out[p] = Some(row);
        }
    }
    for row in rows {
        if let Some(p) = place(row, "ord") {
            out[p].get_or_insert(row);
        }
    }
    out.into_iter()
        .map(|r| r.ok_or_else(|| Error::backend(NAME, op, false, "a request has no row")))
        .collect()
}

/// Rewrites `?` placeholders as PostgreSQL's `$1`, `$2`, …
fn numbered(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 16);
    let mut n = 0;
    for c in sql.chars() {
        if c == '?' {
            n += 1;
            out.push('$');
            out.push_str(&n.to_string());
        } else {
            out.push(c);
        }
    }
    out
}

/// How the shared SQL store runs on PostgreSQL.
#[derive(Debug, Clone)]
pub(crate) struct PgDialect {
    pool: PgPool,
    tables: Tables,
    /// Set while a refresh of the job table's statistics runs in the background.
    analyzing: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl PgDialect {
    /// The next value of the run ids' sequence, in SQL.
    fn next_run_id(&self) -> String {
        format!("nextval('{}')", self.t("run_ids"))
    }

    /// `tables` were checked when they were made.
    fn new(pool: PgPool, tables: &Tables) -> Result<Self> {
        Ok(PgDialect {
            pool,
            tables: tables.clone(),
            analyzing: Default::default(),
        })
    }
}

impl Dialect for PgDialect {
    type Row = PgRow;
    type Tx = Transaction<'static, Postgres>;

    const NAME: &'static str = NAME;
    const TRIGGER: &'static str = "trigger";
    const FALSE: &'static str = "false";
    const NULL_INT: &'static str = "CAST(NULL AS BIGINT)";
    const NULL_TEXT: &'static str = "CAST(NULL AS TEXT)";
    const DIV: &'static str = "/";
    const NOW_MS: &'static str = NOW_MS;
    const NOW_US: &'static str = "floor(extract(epoch from clock_timestamp()) * 1000000)::bigint";
    const LOCK_KEY: &'static str = "key";
    const DUE: &'static str = "enabled AND running_run IS NULL AND next_fire_at IS NOT NULL";
    const FOR_UPDATE: &'static str = " FOR UPDATE";
    const SKIP_LOCKED: &'static str = " FOR UPDATE SKIP LOCKED";
    const INSERT_IGNORE: &'static str = "INSERT INTO";
    const ON_CONFLICT_IGNORE: &'static str = " ON CONFLICT DO NOTHING";
    // Bulk upserts in 4 transactions at once (measured in docs/book/src/benchmarks.md).
    const BULK_WRITERS: usize = 4;
    const INSERTS_ABSENT: bool = true;
    const MIGRATIONS: &'static [Embedded] = MIGRATIONS;
    // One session holds an advisory lock for the whole run, so nodes migrating at once
    // never race on `CREATE … IF NOT EXISTS` (which PostgreSQL does not make safe
    // against itself).
    const MIGRATE_LOCK: Option<&'static str> =
        Some("SELECT CAST(1 AS BIGINT) AS got FROM pg_advisory_lock(hashtext(?)) AS l");

    fn t(&self, name: &str) -> String {
        self.tables.t(name)
    }

    fn home(&self) -> String {
        let o = self.pool.connect_options();
        format!(
            "postgres {}:{}/{} {}",
            o.get_host(),
            o.get_port(),
            o.get_database().unwrap_or_default(),
            self.t("")
        )
    }

    fn prefix(&self) -> &str {
        &self.tables.prefix
    }

    fn migrate_prelude(&self) -> Option<String> {
        Some(format!(
            "CREATE SCHEMA IF NOT EXISTS {}",
            self.tables.schema
        ))
    }

    fn err(&self, op: &'static str, e: sqlx::Error) -> Error {
        db_err(op)(e)
    }

    fn keyset(&self, q: &mut Sql, key: &DueKey) {
        // A row comparison walks the partial due index from the key on.
        q.push(
            " AND (next_fire_at, id) > (?, ?)",
            [key.fire_at.as_millis().into(), key.job_id.as_str().into()],
        );
    }

    fn values(&self, cols: &[&str], rows: usize) -> String {
        format!(
            "(VALUES {}) AS v({})",
            value_rows(cols.len(), rows),
            cols.join(", ")
        )
    }

    fn update_from(&self, target: &str, key: &str, set: &str, values: &str) -> String {
        format!("UPDATE {target} AS j SET {set} FROM {values} WHERE j.{key} = v.id")
    }

    crate::backends::sql::executes_on!(Postgres, |t: String| numbered(&t), |pool| pool.begin());

    async fn insert_absent(
        &self,
        jobs: &[(crate::job::Job, Option<crate::time::Timestamp>)],
        defs: &[String],
    ) -> Result<Option<Vec<usize>>> {
        self.insert_absent_jobs(jobs, defs).await.map(Some)
    }

    async fn start_runs(&self, runs: &[StartRun]) -> Result<Vec<StartOutcome>> {
        self.start_batch(runs).await
    }

    fn run_sequence(&self) -> Option<String> {
        Some(self.next_run_id())
    }

    async fn after_bulk_insert(&self, rows: usize) -> Result<()> {
        use std::sync::atomic::Ordering;
        if rows < 1_000 || self.analyzing.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        // In the background: the enqueue does not wait for it, and one refresh at
        // a time is enough.
        let (pool, jobs, flag) = (self.pool.clone(), self.t("jobs"), self.analyzing.clone());
        tokio::spawn(async move {
            let refresh = async {
                let analyzed: Option<f32> = sqlx::query_scalar(
                    "SELECT reltuples FROM pg_class WHERE oid = to_regclass($1)",
                )
                .bind(&jobs)
                .fetch_optional(&pool)
                .await?;
                let analyzed = analyzed.unwrap_or(-1.0);
                if analyzed < 0.0 || rows as f32 >= analyzed / 5.0 {
                    // The columns the due scan's plan depends on.
                    sqlx::query(sqlx::AssertSqlSafe(format!(
                        "ANALYZE {jobs} (next_fire_at, enabled, running_run, lease_until, run_node)"
                    )))
                    .execute(&pool)
                    .await?;
                }
                Ok::<(), sqlx::Error>(())
            };
            if let Err(e) = refresh.await {
                tracing::debug!(error = %e, "the job table's statistics were not refreshed");
            }
            flag.store(false, Ordering::SeqCst);
        });
        Ok(())
    }

    async fn purge_runs(&self, before: i64) -> Result<u64> {
        partitions::purge(self, before).await
    }

    async fn prepare_log(&self) -> Result<()> {
        partitions::prepare(self).await
    }

    async fn finish_runs(&self, runs: &[FinishRun]) -> Result<Vec<FinishOutcome>> {
        self.finish_batch(runs).await
    }

    async fn claim_runs(
        &self,
        claims: &[crate::record::ClaimRun],
        want: usize,
    ) -> Result<Vec<crate::record::ClaimOutcome>> {
        self.claim_batch(claims, want).await
    }

    async fn acquire_jobs(
        &self,
        owner: &str,
        requests: &[crate::lock::LockRequest],
    ) -> Result<Vec<Option<crate::lock::Lease>>> {
        self.acquire_batch(owner, requests).await
    }
}

/// The run log's day partitions are tables `<prefix>runs_<tag>` and
/// `<prefix>run_lines_<tag>` in the tables' schema.
impl DayParts for PgDialect {
    fn list_parts(&self) -> Sql {
        let skip = self.tables.prefix.len() + "runs_".len() + 1;
        Sql::new(format!(
            "SELECT substr(c.relname, {skip}) AS tag FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
             WHERE i.inhparent = to_regclass(?)"
        ))
        .bind(self.t("runs"))
    }

    fn part_of(&self, table: &str, tag: &str) -> String {
        format!("{}_{tag}", self.t(table))
    }

    fn add_day(&self, day: i64) -> Vec<Sql> {
        let tag = Part::Day(day).tag();
        let (lo, hi) = (
            day * crate::backends::sql::run_ids::ID_STEP,
            (day + 1) * crate::backends::sql::run_ids::ID_STEP,
        );
        ["runs", "run_lines"]
            .iter()
            .map(|t| {
                Sql::new(format!(
                    "CREATE TABLE IF NOT EXISTS {} PARTITION OF {} FOR VALUES FROM ({lo}) TO ({hi})",
                    self.part_of(t, &tag),
                    self.t(t)
                ))
            })
            .collect()
    }

    fn drop_part(&self, tag: &str) -> Vec<Sql> {
        vec![Sql::new(format!(
            "DROP TABLE IF EXISTS {}, {}",
            self.part_of("run_lines", tag),
            self.part_of("runs", tag)
        ))]
    }
}

sql_handles! {
    /// A [`JobStore`](crate::JobStore) in PostgreSQL.
    store PgStore;
    /// Row leases in `<schema>.<prefix>locks`: each batched call is one statement
    /// (rows taken in key order), tokens are the server's clock in µs. Usable with any
    /// store.
    locks PgLocks over locks::PgLockStatements;
    builder PgBuilder;
    dialect PgDialect, pool PgPool, names tables: &Tables;
}

impl PgStore {
    /// A builder for `url`.
    pub fn builder(url: impl Into<String>) -> PgBuilder {
        PgBuilder {
            url: url.into(),
            schema: "public".into(),
            prefix: "jobwheel_".into(),
            max_connections: 8,
            connect_timeout: crate::backends::sql::connect::DEFAULT_CONNECT_TIMEOUT,
        }
    }

    /// Where the tables live.
    pub fn tables(&self) -> &Tables {
        &self.inner.d.tables
    }
}

/// Where the tables live: `<schema>.<prefix><table>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tables {
    schema: String,
    prefix: String,
}

impl Tables {
    /// Validated names. Errors name `postgres.schema` or `postgres.prefix`.
    pub fn new(schema: &str, prefix: &str) -> Result<Self> {
        check_ident("postgres.schema", schema, false)?;
        check_ident("postgres.prefix", prefix, true)?;
        Ok(Tables {
            schema: schema.into(),
            prefix: prefix.into(),
        })
    }

    /// `<schema>.<prefix><name>`.
    pub(crate) fn t(&self, name: &str) -> String {
        format!("{}.{}{name}", self.schema, self.prefix)
    }
}

/// Builds a [`PgStore`] from a URL.
#[derive(Clone)]
pub struct PgBuilder {
    url: String,
    schema: String,
    prefix: String,
    max_connections: u32,
    connect_timeout: std::time::Duration,
}

impl std::fmt::Debug for PgBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgBuilder")
            .field("url", &crate::error::redact_url(&self.url))
            .field("schema", &self.schema)
            .field("prefix", &self.prefix)
            .field("max_connections", &self.max_connections)
            .field("connect_timeout", &self.connect_timeout)
            .finish()
    }
}

impl PgBuilder {
    /// Schema (default `public`).
    pub fn schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = schema.into();
        self
    }
    /// Connects. Does not migrate: call [`PgStore::migrate`].
    pub async fn build(self) -> Result<PgStore> {
        use crate::backends::sql::connect;
        let tables = Tables::new(&self.schema, &self.prefix)?;
        let pool_size = self.pool_size()?;
        connect::check_scheme("postgres.url", &self.url, &["postgres", "postgresql"])?;
        let options: sqlx::postgres::PgConnectOptions =
            connect::options("postgres.url", &self.url)?;
        let server = format!("{}:{}", options.get_host(), options.get_port());
        let pool = PgPoolOptions::new().max_connections(pool_size);
        let pool = connect::open(NAME, server, options, pool, self.connect_timeout).await?;
        PgStore::from_pool(pool, &tables)
    }
}
