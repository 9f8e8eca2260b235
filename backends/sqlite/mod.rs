//! The SQLite backend: [`SqliteStore`] and [`SqliteLocks`] (feature `sqlite`).
//!
//! One database file, shared by any number of schedulers and processes on one host:
//! WAL journal, a busy timeout, and every write in a `BEGIN IMMEDIATE` transaction,
//! so writers queue instead of failing to upgrade. Each batched call is one
//! transaction. The store's clock is SQLite's `unixepoch('subsec')`, which on one host
//! is the host's clock. Instants are stored as UTC epoch milliseconds.
//!
//! ```no_run
//! # async fn t() -> jobwheel::Result<()> {
//! let store = jobwheel::sqlite::SqliteStore::builder("sqlite:///var/lib/app/jobs.db").build().await?;
//! store.migrate().await?;
//! let locks = jobwheel::sqlite::SqliteLocks::new(store.pool().clone(), store.prefix());
//! # Ok(()) }
//! ```

//! SQL text is assembled only from static fragments and the table prefix, which is
//! checked against `[A-Za-z0-9_]`; every value is a bind parameter. That is why the
//! backend passes its SQL through `sqlx::AssertSqlSafe`.

mod locks;
mod log;
mod store;

pub use locks::SqliteLocks;
pub use store::SqliteStore;

use crate::error::{Error, Result};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use std::str::FromStr;
use std::time::Duration;

const NAME: &str = "sqlite";
const MIGRATIONS: &[(i64, &str)] = &[
    (1, include_str!("migrations/0001_init.sql")),
    (2, include_str!("migrations/0002_misfire_spans.sql")),
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
    let ok = prefix.len() <= 40
        && prefix
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !prefix.starts_with(|c: char| c.is_ascii_digit());
    if ok {
        Ok(())
    } else {
        Err(Error::invalid(
            "sqlite.prefix",
            prefix,
            "must be up to 40 characters of [A-Za-z0-9_], not starting with a digit",
        ))
    }
}

/// Builds a [`SqliteStore`] from a URL (`sqlite://path/to/file.db`, `sqlite::memory:`).
#[derive(Debug, Clone)]
pub struct SqliteBuilder {
    url: String,
    prefix: String,
    max_connections: u32,
    busy_timeout: Duration,
}

impl SqliteBuilder {
    /// Table prefix (default `jobwheel_`).
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }
    /// Pool size (default 4).
    pub fn max_connections(mut self, n: u32) -> Self {
        self.max_connections = n;
        self
    }
    /// How long a writer waits for another process's write lock (default 10 s).
    pub fn busy_timeout(mut self, d: Duration) -> Self {
        self.busy_timeout = d;
        self
    }

    /// Opens the pool (creating the file if missing), with WAL and the busy timeout.
    /// Does not migrate: call [`SqliteStore::migrate`].
    pub async fn build(self) -> Result<SqliteStore> {
        check_prefix(&self.prefix)?;
        if self.max_connections == 0 {
            return Err(Error::invalid(
                "sqlite.max_connections",
                0,
                "must be at least 1",
            ));
        }
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
                .max_connections(self.max_connections)
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

/// Runs the embedded migrations that have not run yet, in one immediate transaction.
pub(crate) async fn migrate(pool: &SqlitePool, prefix: &str) -> Result<()> {
    let mut tx = pool
        .begin_with("BEGIN IMMEDIATE")
        .await
        .map_err(db_err("migrate"))?;
    let table = format!("{prefix}schema");
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "CREATE TABLE IF NOT EXISTS {table} (version INTEGER PRIMARY KEY)"
    )))
    .execute(&mut *tx)
    .await
    .map_err(db_err("migrate"))?;
    let done: Option<i64> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT MAX(version) FROM {table}"
    )))
    .fetch_one(&mut *tx)
    .await
    .map_err(db_err("migrate"))?;
    for (version, sql) in MIGRATIONS {
        if done.is_some_and(|d| d >= *version) {
            continue;
        }
        let sql = sql.replace("{p}", prefix);
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql.clone()))
            .execute(&mut *tx)
            .await
            .map_err(db_err("migrate"))?;
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO {table} (version) VALUES (?)"
        )))
        .bind(version)
        .execute(&mut *tx)
        .await
        .map_err(db_err("migrate"))?;
    }
    tx.commit().await.map_err(db_err("migrate"))
}

impl SqliteStore {
    /// A builder for `url`.
    pub fn builder(url: impl Into<String>) -> SqliteBuilder {
        SqliteBuilder {
            url: url.into(),
            prefix: "jobwheel_".into(),
            max_connections: 4,
            busy_timeout: Duration::from_secs(10),
        }
    }
}
