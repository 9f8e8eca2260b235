//! The SQLite backend: [`SqliteStore`] and [`SqliteLocks`] (feature `sqlite`).
//!
//! One database file, shared by any number of schedulers and processes on one host:
//! WAL journal, a busy timeout, and every write in a `BEGIN IMMEDIATE` transaction,
//! so writers queue instead of failing to upgrade. Each batched call is one
//! transaction. The store's clock is SQLite's `unixepoch('subsec')`, which on one host
//! is the host's clock. Instants are stored as UTC epoch milliseconds; ids compare
//! bytewise (SQLite's `BINARY` collation).
//!
//! ```no_run
//! # async fn t() -> jobwheel::Result<()> {
//! let store = jobwheel::sqlite::SqliteStore::builder("sqlite:///var/lib/app/jobs.db").build().await?;
//! store.migrate().await?;
//! let locks = store.locks();
//! # Ok(()) }
//! ```
//!
//! The SQL itself is the shared SQL store's (`backends/sql/`); this module is the
//! dialect: how statements run on SQLite's driver, its clock, and its joined `UPDATE`.

use crate::backends::sql::migrate::Embedded;
use crate::backends::sql::{Dialect, Sql, check_ident, sql_handles, value_rows};
use crate::error::{Error, Result};
use crate::record::DueKey;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteRow,
    SqliteSynchronous,
};
use sqlx::{Sqlite, Transaction};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

const NAME: &str = "sqlite";
/// The migrations (`{p}` is the table prefix).
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
        "executor instances",
        include_str!("migrations/0003_executors.sql"),
    ),
    (4, "audit log", include_str!("migrations/0004_audit.sql")),
    (
        5,
        "payload overrides",
        include_str!("migrations/0005_fire_payload.sql"),
    ),
    (
        6,
        "fire contexts",
        include_str!("migrations/0006_fire_context.sql"),
    ),
    (
        7,
        "runtime accounts and tokens",
        include_str!("migrations/0007_credentials.sql"),
    ),
    (
        8,
        "local runs' log lines",
        include_str!("migrations/0008_run_lines.sql"),
    ),
    (
        9,
        "releases queued per job",
        include_str!("migrations/0009_releases.sql"),
    ),
    (
        10,
        "marks on queued releases (alarmed, taken)",
        include_str!("migrations/0010_release_marks.sql"),
    ),
    (
        11,
        "a fire in its job's row (lease, running run, run ids)",
        include_str!("migrations/0011_fire_in_job_row.sql"),
    ),
    (
        12,
        "the executor instance in a run's record",
        include_str!("migrations/0012_run_executor.sql"),
    ),
];
/// The store's clock in SQL: epoch milliseconds.
pub(crate) const NOW_MS: &str = "CAST(unixepoch('subsec') * 1000 AS INTEGER)";

/// Maps a driver error; busy, locked and I/O errors are temporary.
pub(crate) fn db_err(operation: &'static str) -> impl Fn(sqlx::Error) -> Error {
    move |e| {
        let temporary = match &e {
            sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed => true,
            sqlx::Error::Database(d) => d
                .code()
                .is_some_and(|c| matches!(c.as_ref(), "5" | "6" | "261" | "262" | "517")),
            _ => false,
        };
        Error::backend(NAME, operation, temporary, e)
    }
}

/// Checks a table prefix: 0-40 characters of `[A-Za-z0-9_]`, not starting with a digit.
pub(crate) fn check_prefix(prefix: &str) -> Result<()> {
    check_ident("sqlite.prefix", prefix, true)
}

/// How the shared SQL store runs on SQLite.
#[derive(Debug, Clone)]
pub(crate) struct SqliteDialect {
    pool: SqlitePool,
    prefix: Arc<str>,
}

impl SqliteDialect {
    fn new(pool: SqlitePool, prefix: &str) -> Result<Self> {
        check_prefix(prefix)?;
        Ok(SqliteDialect {
            pool,
            prefix: prefix.into(),
        })
    }
}

impl Dialect for SqliteDialect {
    type Row = SqliteRow;
    type Tx = Transaction<'static, Sqlite>;

    const NAME: &'static str = NAME;
    const TRIGGER: &'static str = "trigger";
    const FALSE: &'static str = "0";
    const NULL_INT: &'static str = "CAST(NULL AS INTEGER)";
    const NULL_TEXT: &'static str = "CAST(NULL AS TEXT)";
    const DIV: &'static str = "/";
    const NOW_MS: &'static str = NOW_MS;
    const NOW_US: &'static str = "CAST(unixepoch('subsec') * 1000000 AS INTEGER)";
    const LOCK_KEY: &'static str = "key";
    const DUE: &'static str = "enabled = 1 AND running_run IS NULL AND next_fire_at IS NOT NULL";
    // A `BEGIN IMMEDIATE` transaction already holds the database's write lock.
    const FOR_UPDATE: &'static str = "";
    const SKIP_LOCKED: &'static str = "";
    const INSERT_IGNORE: &'static str = "INSERT INTO";
    const ON_CONFLICT_IGNORE: &'static str = " ON CONFLICT DO NOTHING";
    // One writer: the database's write lock serializes transactions.
    const BULK_WRITERS: usize = 1;
    const MIGRATIONS: &'static [Embedded] = MIGRATIONS;
    // Processes migrating one file at once queue on its write lock, and retry.
    const MIGRATE_LOCK: Option<&'static str> = None;

    fn t(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }

    fn home(&self) -> String {
        let o = self.pool.connect_options();
        format!("sqlite {} {}", o.get_filename().display(), self.prefix)
    }

    fn prefix(&self) -> &str {
        &self.prefix
    }

    fn err(&self, op: &'static str, e: sqlx::Error) -> Error {
        db_err(op)(e)
    }

    fn keyset(&self, q: &mut Sql, key: &DueKey) {
        q.push(
            " AND (next_fire_at, id) > (?, ?)",
            [key.fire_at.as_millis().into(), key.job_id.as_str().into()],
        );
    }

    fn values(&self, cols: &[&str], rows: usize) -> String {
        // A multi-row VALUES is not bound by SQLite's 500-term limit on compound SELECTs.
        let named = cols
            .iter()
            .enumerate()
            .map(|(i, c)| format!("column{} AS {c}", i + 1))
            .collect::<Vec<_>>()
            .join(", ");
        format!(
            "(SELECT {named} FROM (VALUES {})) AS v",
            value_rows(cols.len(), rows)
        )
    }

    fn update_from(&self, target: &str, key: &str, set: &str, values: &str) -> String {
        format!("UPDATE {target} AS j SET {set} FROM {values} WHERE j.{key} = v.id")
    }

    crate::backends::sql::executes_on!(Sqlite, std::convert::identity, |pool| pool
        .begin_with("BEGIN IMMEDIATE"));
}

sql_handles! {
    /// A [`JobStore`](crate::JobStore) in one SQLite database.
    store SqliteStore;
    /// Row leases in `<prefix>locks` (the SQL store's locks: one transaction per
    /// batch, tokens from the clock in µs). Usable with any store.
    locks SqliteLocks over crate::backends::sql::locks::SqlLocks<SqliteDialect>;
    builder SqliteBuilder;
    dialect SqliteDialect, pool SqlitePool, names prefix: &str;
}

impl SqliteStore {
    /// A builder for `url`.
    pub fn builder(url: impl Into<String>) -> SqliteBuilder {
        SqliteBuilder {
            url: url.into(),
            prefix: "jobwheel_".into(),
            max_connections: 4,
            busy_timeout: Duration::from_secs(10),
            connect_timeout: crate::backends::sql::connect::DEFAULT_CONNECT_TIMEOUT,
        }
    }

    /// The table prefix.
    pub fn prefix(&self) -> &str {
        &self.inner.d.prefix
    }
}

/// Builds a [`SqliteStore`] from a URL (`sqlite://path/to/file.db`, `sqlite::memory:`).
#[derive(Debug, Clone)]
pub struct SqliteBuilder {
    url: String,
    prefix: String,
    max_connections: u32,
    busy_timeout: Duration,
    connect_timeout: Duration,
}

impl SqliteBuilder {
    /// How long a writer waits for another process's write lock (default 10 s).
    pub fn busy_timeout(mut self, d: Duration) -> Self {
        self.busy_timeout = d;
        self
    }

    /// Opens the pool (creating the file if missing), with WAL and the busy timeout.
    /// Does not migrate: call [`SqliteStore::migrate`].
    pub async fn build(self) -> Result<SqliteStore> {
        check_prefix(&self.prefix)?;
        let pool_size = self.pool_size()?;
        crate::backends::sql::connect::check_scheme("sqlite.url", &self.url, &["sqlite"])?;
        let options = SqliteConnectOptions::from_str(&self.url)
            .map_err(|e| Error::invalid("sqlite.url", &self.url, e.to_string()))?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(self.busy_timeout);
        // Switching a new file to WAL takes the write lock without always waiting on the
        // busy handler, so nodes opening a fresh file together retry a busy connect.
        let deadline = std::time::Instant::now() + self.busy_timeout;
        let pool = loop {
            match SqlitePoolOptions::new()
                .max_connections(pool_size)
                .acquire_timeout(self.connect_timeout)
                .connect_with(options.clone())
                .await
                .map_err(db_err("connect"))
            {
                Err(e) if e.is_temporary() && std::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(20 + fastrand::u64(..30))).await;
                }
                other => break other?,
            }
        };
        SqliteStore::from_pool(pool, &self.prefix)
    }
}
