//! The MySQL 8 / MariaDB 10.6+ backend: [`MySqlStore`] and [`MySqlLocks`] (feature
//! `mysql`).
//!
//! Neither server has array parameters, and MySQL has no `RETURNING`, so each batched
//! call is one transaction with a fixed number of statements whatever the batch size:
//! a `SELECT … FOR UPDATE` of the rows involved, the conditions decided in request
//! order, then one multi-row `INSERT` and one `UPDATE` joined to the batch's rows per
//! table (a derived table of the rows, see `values`); a lock grant is one
//! `INSERT … ON DUPLICATE KEY UPDATE` and a read. Instants are `BIGINT` epoch
//! milliseconds; the store's clock is computed from `UTC_TIMESTAMP(6)`,
//! so the session time zone never matters. Alarm claims use `FOR UPDATE SKIP LOCKED`.
//!
//! SQL text is assembled only from static fragments, placeholder lists and the table
//! prefix (checked against `[A-Za-z0-9_]`); every value is a bind parameter, which is
//! why the SQL goes through `sqlx::AssertSqlSafe`.
//!
//! ```no_run
//! # async fn t() -> jobwheel::Result<()> {
//! let store = jobwheel::mysql::MySqlStore::builder("mysql://root@127.0.0.1/app").build().await?;
//! store.migrate().await?;
//! let locks = jobwheel::mysql::MySqlLocks::new(store.pool().clone(), store.prefix());
//! # Ok(()) }
//! ```

mod finish;
mod locks;
mod log;
mod store;

pub use locks::MySqlLocks;
pub use store::MySqlStore;

use crate::error::{Error, Result};
use sqlx::mysql::{MySqlPool, MySqlPoolOptions};

const NAME: &str = "mysql";
const MIGRATIONS: &[(i64, &str)] = &[
    (1, include_str!("migrations/0001_init.sql")),
    (2, include_str!("migrations/0002_misfire_spans.sql")),
];
/// The store's clock in SQL: epoch milliseconds from UTC, no session zone involved.
pub(crate) const NOW_MS: &str =
    "(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000)";

/// Maps a driver error; I/O, pool, deadlock and lock-wait errors are temporary.
pub(crate) fn db_err(operation: &'static str) -> impl Fn(sqlx::Error) -> Error {
    move |e| {
        let temporary = match &e {
            sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed => true,
            sqlx::Error::Database(d) => d
                .try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
                .is_some_and(|m| matches!(m.number(), 1205 | 1213 | 2006 | 2013)),
            _ => false,
        };
        Error::backend(NAME, operation, temporary, e)
    }
}

/// Runs a transaction again when it lost a deadlock or a lock wait, up to 5 times.
pub(crate) async fn retrying<T, F, Fut>(f: F) -> Result<T>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    let mut tries = 0;
    loop {
        match f().await {
            Err(Error::Backend {
                temporary: true, ..
            }) if tries < 5 => {
                tries += 1;
                tokio::time::sleep(std::time::Duration::from_millis(5 << tries)).await;
            }
            other => return other,
        }
    }
}

/// `?, ?, …` with `n` placeholders.
pub(crate) fn marks(n: usize) -> String {
    vec!["?"; n].join(", ")
}

/// A derived table `v` of `rows` rows of placeholders named `cols`, bound row by row:
/// `(SELECT ? AS a, ? AS b UNION ALL SELECT ?, ? …) AS v`. A batched UPDATE joins it on
/// the key: one index lookup per row, where a `CASE key WHEN … END` per column compares
/// every row with every arm (quadratic in the batch: 57 µs of server time per row at
/// 1,000 rows, measured on MariaDB 10.11).
pub(crate) fn values(cols: &[&str], rows: usize) -> String {
    let first = cols
        .iter()
        .map(|c| format!("? AS {c}"))
        .collect::<Vec<_>>()
        .join(", ");
    let rest = format!(" UNION ALL SELECT {}", marks(cols.len())).repeat(rows.saturating_sub(1));
    format!("(SELECT {first}{rest}) AS v")
}

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
            "mysql.prefix",
            prefix,
            "must be up to 40 characters of [A-Za-z0-9_], not starting with a digit",
        ))
    }
}

/// Builds a [`MySqlStore`] from a URL.
#[derive(Debug, Clone)]
pub struct MySqlBuilder {
    url: String,
    prefix: String,
    max_connections: u32,
}

impl MySqlBuilder {
    /// Table prefix (default `jobwheel_`).
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }
    /// Pool size (default 8).
    pub fn max_connections(mut self, n: u32) -> Self {
        self.max_connections = n;
        self
    }
    /// Connects. Does not migrate: call [`MySqlStore::migrate`].
    pub async fn build(self) -> Result<MySqlStore> {
        check_prefix(&self.prefix)?;
        if self.max_connections == 0 {
            return Err(Error::invalid(
                "mysql.max_connections",
                0,
                "must be at least 1",
            ));
        }
        let pool = MySqlPoolOptions::new()
            .max_connections(self.max_connections)
            // No gap locks: concurrent claimers and lockers do not deadlock on ranges.
            .after_connect(|conn, _meta| {
                Box::pin(async move {
                    sqlx::query("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
                        .execute(conn)
                        .await
                        .map(|_| ())
                })
            })
            .connect(&self.url)
            .await
            .map_err(db_err("connect"))?;
        MySqlStore::from_pool(pool, &self.prefix)
    }
}

/// Runs the embedded migrations not yet run, holding a named lock so that nodes
/// migrating at once take turns (DDL commits implicitly in MySQL, so the lock, not a
/// transaction, is what serialises them).
pub(crate) async fn migrate(pool: &MySqlPool, prefix: &str) -> Result<()> {
    let op = "migrate";
    let mut conn = pool.acquire().await.map_err(db_err(op))?;
    let lock = format!("jobwheel.migrate.{prefix}");
    let got: Option<i64> = sqlx::query_scalar("SELECT GET_LOCK(?, 60)")
        .bind(&lock)
        .fetch_one(&mut *conn)
        .await
        .map_err(db_err(op))?;
    if got != Some(1) {
        return Err(Error::backend(
            NAME,
            op,
            true,
            "timed out waiting for the migration lock",
        ));
    }
    let result = async {
        let table = format!("{prefix}schema");
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "CREATE TABLE IF NOT EXISTS {table} (version BIGINT PRIMARY KEY) ENGINE = InnoDB"
        )))
        .execute(&mut *conn)
        .await
        .map_err(db_err(op))?;
        let done: Option<i64> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT MAX(version) FROM {table}"
        )))
        .fetch_one(&mut *conn)
        .await
        .map_err(db_err(op))?;
        for (version, sql) in MIGRATIONS {
            if done.is_some_and(|d| d >= *version) {
                continue;
            }
            for statement in sql.replace("{t}", prefix).split(';') {
                let body: String = statement
                    .lines()
                    .filter(|l| !l.trim_start().starts_with("--"))
                    .collect::<Vec<_>>()
                    .join("\n");
                if body.trim().is_empty() {
                    continue;
                }
                sqlx::query(sqlx::AssertSqlSafe(body))
                    .execute(&mut *conn)
                    .await
                    .map_err(db_err(op))?;
            }
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "INSERT INTO {table} (version) VALUES (?)"
            )))
            .bind(version)
            .execute(&mut *conn)
            .await
            .map_err(db_err(op))?;
        }
        Ok(())
    }
    .await;
    let _ = sqlx::query("SELECT RELEASE_LOCK(?)")
        .bind(&lock)
        .execute(&mut *conn)
        .await;
    result
}

impl MySqlStore {
    /// A builder for `url`.
    pub fn builder(url: impl Into<String>) -> MySqlBuilder {
        MySqlBuilder {
            url: url.into(),
            prefix: "jobwheel_".into(),
            max_connections: 8,
        }
    }
}
