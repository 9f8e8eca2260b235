//! The MySQL 8 / MariaDB 10.6+ backend: [`MySqlStore`] and [`MySqlLocks`] (feature
//! `mysql`).
//!
//! Neither server has array parameters, and MySQL has no `RETURNING`, so each batched
//! call is one transaction with a fixed number of statements whatever the batch size:
//! a `SELECT … FOR UPDATE` of the rows involved, the conditions decided in request
//! order, then one multi-row `INSERT` and one `UPDATE` joined to the batch's rows per
//! table; a lock grant is one `INSERT … ON DUPLICATE KEY UPDATE` and a read. Instants are `BIGINT` epoch
//! milliseconds; the store's clock is computed from `UTC_TIMESTAMP(6)`,
//! so the session time zone never matters. Alarm claims use `FOR UPDATE SKIP LOCKED`.
//!
//! Ids compare bytewise (`utf8mb4_bin`). The SQL is the shared SQL store's
//! (`backends/sql/`); this module is the dialect.
//!
//! ```no_run
//! # async fn t() -> jobwheel::Result<()> {
//! let store = jobwheel::mysql::MySqlStore::builder("mysql://root@127.0.0.1/app").build().await?;
//! store.migrate().await?;
//! let locks = jobwheel::mysql::MySqlLocks::new(store.pool().clone(), store.prefix())?;
//! # Ok(()) }
//! ```

mod locks;

pub use locks::MySqlLocks;

use crate::error::{Error, Result};
use crate::record::DueKey;
use crate::sql::migrate::{self, Embedded};
use crate::sql::{Dialect, Sql, SqlStore, check_ident, query};
use async_trait::async_trait;
use sqlx::mysql::{MySqlPool, MySqlPoolOptions, MySqlRow};
use sqlx::{MySql, Transaction};
use std::sync::Arc;

pub(crate) use crate::sql::{marks, retrying, values};

const NAME: &str = "mysql";
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

/// Checks a table prefix: 0-40 characters of `[A-Za-z0-9_]`, not starting with a digit.
pub(crate) fn check_prefix(prefix: &str) -> Result<()> {
    check_ident("mysql.prefix", prefix, true)
}

/// How the shared SQL store runs on MySQL and MariaDB.
#[derive(Debug, Clone)]
pub(crate) struct MySqlDialect {
    pool: MySqlPool,
    prefix: Arc<str>,
}

#[async_trait]
impl Dialect for MySqlDialect {
    type Row = MySqlRow;
    type Tx = Transaction<'static, MySql>;

    const NAME: &'static str = NAME;
    const TRIGGER: &'static str = "`trigger`";
    const DIV: &'static str = "DIV";
    const NOW_MS: &'static str = NOW_MS;
    const DUE: &'static str = "enabled = TRUE AND running_run IS NULL AND next_fire_at IS NOT NULL";
    const FOR_UPDATE: &'static str = " FOR UPDATE";
    const SKIP_LOCKED: &'static str = " FOR UPDATE SKIP LOCKED";
    // The driver reports found rows, so an `ON DUPLICATE KEY` no-op would count as one;
    // `IGNORE` reports 0 for a duplicate (and every value it inserts is validated).
    const INSERT_IGNORE: &'static str = "INSERT IGNORE INTO";
    const ON_CONFLICT_IGNORE: &'static str = "";

    fn t(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }

    fn err(&self, op: &'static str, e: sqlx::Error) -> Error {
        db_err(op)(e)
    }

    fn keyset(&self, q: &mut Sql, key: &DueKey) {
        // Written as an OR (not a row comparison) so that MariaDB builds two index ranges.
        let at = key.fire_at.as_millis();
        q.push(
            " AND (next_fire_at > ? OR (next_fire_at = ? AND id > ?))",
            [at.into(), at.into(), key.job_id.as_str().into()],
        );
    }

    fn update_from(&self, target: &str, set: &str, values: &str) -> String {
        format!("UPDATE {target} j JOIN {values} ON j.id = v.id SET {set}")
    }

    async fn fetch(&self, op: &'static str, q: Sql) -> Result<Vec<MySqlRow>> {
        query::<MySql>(q.text, q.args)
            .fetch_all(&self.pool)
            .await
            .map_err(db_err(op))
    }

    async fn exec(&self, op: &'static str, q: Sql) -> Result<u64> {
        let r = query::<MySql>(q.text, q.args)
            .execute(&self.pool)
            .await
            .map_err(db_err(op))?;
        Ok(r.rows_affected())
    }

    async fn begin(&self, op: &'static str) -> Result<Self::Tx> {
        self.pool.begin().await.map_err(db_err(op))
    }

    async fn fetch_in(&self, tx: &mut Self::Tx, op: &'static str, q: Sql) -> Result<Vec<MySqlRow>> {
        query::<MySql>(q.text, q.args)
            .fetch_all(&mut **tx)
            .await
            .map_err(db_err(op))
    }

    async fn exec_in(&self, tx: &mut Self::Tx, op: &'static str, q: Sql) -> Result<u64> {
        let r = query::<MySql>(q.text, q.args)
            .execute(&mut **tx)
            .await
            .map_err(db_err(op))?;
        Ok(r.rows_affected())
    }

    async fn commit(&self, tx: Self::Tx, op: &'static str) -> Result<()> {
        tx.commit().await.map_err(db_err(op))
    }
}

/// A [`JobStore`](crate::JobStore) in MySQL 8 or MariaDB 10.6+.
#[derive(Debug, Clone)]
pub struct MySqlStore {
    inner: SqlStore<MySqlDialect>,
}

crate::store::delegate_store!(MySqlStore => inner);

impl MySqlStore {
    /// A builder for `url`.
    pub fn builder(url: impl Into<String>) -> MySqlBuilder {
        MySqlBuilder {
            url: url.into(),
            prefix: "jobwheel_".into(),
            max_connections: 8,
        }
    }

    /// A store on an existing pool. Errors when the prefix is not a valid table-name
    /// prefix. The pool's sessions should use `READ COMMITTED` (the builder's do), so
    /// that concurrent claimers take no gap locks.
    pub fn from_pool(pool: MySqlPool, prefix: &str) -> Result<Self> {
        check_prefix(prefix)?;
        Ok(MySqlStore {
            inner: SqlStore {
                d: MySqlDialect {
                    pool,
                    prefix: prefix.into(),
                },
            },
        })
    }

    /// The pool.
    pub fn pool(&self) -> &MySqlPool {
        &self.inner.d.pool
    }

    /// The table prefix.
    pub fn prefix(&self) -> &str {
        &self.inner.d.prefix
    }

    /// Runs the migrations not yet applied to these tables. Idempotent; nodes running
    /// it at once take turns on the server's `GET_LOCK`. Errors with
    /// [`Error::SchemaTooNew`] when a newer jobwheel migrated them.
    pub async fn migrate(&self) -> Result<()> {
        let d = &self.inner.d;
        let table = d.t("migrations");
        let m = migrate::migrator(
            MIGRATIONS,
            |sql| sql.replace("{t}", &d.prefix),
            table.clone(),
        );
        let err = |e| migrate::map_err(NAME, MIGRATIONS, e);
        // Our own named lock around the whole run: the migrator's `GET_LOCK(…, -1)` does
        // not wait on MariaDB, where a negative timeout is not "forever".
        let mut conn = d.pool.acquire().await.map_err(db_err("migrate"))?;
        let lock = format!("jobwheel.migrate.{}", d.prefix);
        let got: Option<i64> = sqlx::query_scalar("SELECT GET_LOCK(?, 60)")
            .bind(&lock)
            .fetch_one(&mut *conn)
            .await
            .map_err(db_err("migrate"))?;
        if got != Some(1) {
            return Err(Error::backend(
                NAME,
                "migrate",
                true,
                "timed out waiting for the migration lock",
            ));
        }
        let result = async {
            sqlx::migrate::Migrate::ensure_migrations_table(&mut *conn, &table)
                .await
                .map_err(err)?;
            migrate::adopt_legacy(d, &m, &table).await?;
            m.run(&mut *conn).await.map_err(err)
        }
        .await;
        let _ = sqlx::query("SELECT RELEASE_LOCK(?)")
            .bind(&lock)
            .execute(&mut *conn)
            .await;
        result
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
