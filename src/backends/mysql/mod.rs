//! The MariaDB 10.6+ backend: [`MySqlStore`] and [`MySqlLocks`] (feature
//! `mysql`).
//!
//! Neither server has array parameters, and MySQL has no `RETURNING`, so each batched
//! call is one transaction with a fixed number of statements whatever the batch size:
//! a `SELECT … FOR UPDATE` of the rows involved, the conditions decided in request
//! order, then one multi-row `INSERT` and one `UPDATE` joined to the batch's rows per
//! table (leases the same way). Instants are `BIGINT` epoch milliseconds; the store's
//! clock is computed from `UTC_TIMESTAMP(6)`, so the session time zone never matters.
//! Alarm claims use `FOR UPDATE SKIP LOCKED`.
//!
//! Ids compare bytewise (`utf8mb4_bin`). The SQL is the shared SQL store's
//! (`backends/sql/`); this module is the dialect.
//!
//! ```no_run
//! # async fn t() -> jobwheel::Result<()> {
//! let store = jobwheel::mysql::MySqlStore::builder("mysql://root@127.0.0.1/app").build().await?;
//! store.migrate().await?;
//! let locks = store.locks();
//! # Ok(()) }
//! ```

mod locks;

use crate::backends::sql::migrate::Embedded;
use crate::backends::sql::partitions::{self, DayParts, Part};
use crate::backends::sql::{Dialect, Sql, check_ident, sql_handles, union_values};
use crate::error::{Error, Result};
use crate::record::DueKey;
use sqlx::mysql::{MySqlPool, MySqlPoolOptions, MySqlRow};
use sqlx::{MySql, Transaction};
use std::sync::Arc;

const NAME: &str = "mysql";
/// The migrations (`{t}` is the table prefix).
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
        "the run log partitioned by day",
        include_str!("migrations/0011_day_partitions.sql"),
    ),
    (
        12,
        "a fire in its job's row (lease, running run)",
        include_str!("migrations/0012_fire_in_job_row.sql"),
    ),
    (
        13,
        "the executor instance in a run's record",
        include_str!("migrations/0013_run_executor.sql"),
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

impl MySqlDialect {
    fn new(pool: MySqlPool, prefix: &str) -> Result<Self> {
        check_prefix(prefix)?;
        Ok(MySqlDialect {
            pool,
            prefix: prefix.into(),
        })
    }
}

impl Dialect for MySqlDialect {
    type Row = MySqlRow;
    type Tx = Transaction<'static, MySql>;

    const NAME: &'static str = NAME;
    const TRIGGER: &'static str = "`trigger`";
    const FALSE: &'static str = "FALSE";
    const NULL_INT: &'static str = "CAST(NULL AS SIGNED)";
    const NULL_TEXT: &'static str = "CAST(NULL AS CHAR)";
    const DIV: &'static str = "DIV";
    const NOW_MS: &'static str = NOW_MS;
    const NOW_US: &'static str =
        "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))";
    const LOCK_KEY: &'static str = "lock_key";
    const DUE: &'static str = "enabled = TRUE AND running_run IS NULL AND next_fire_at IS NOT NULL";
    const FOR_UPDATE: &'static str = " FOR UPDATE";
    const SKIP_LOCKED: &'static str = " FOR UPDATE SKIP LOCKED";
    // The driver reports found rows, so an `ON DUPLICATE KEY` no-op would count as one;
    // `IGNORE` reports 0 for a duplicate (and every value it inserts is validated).
    const INSERT_IGNORE: &'static str = "INSERT IGNORE INTO";
    const ON_CONFLICT_IGNORE: &'static str = "";
    // Bulk upserts in 4 transactions at once (measured in docs/book/src/benchmarks.md).
    const BULK_WRITERS: usize = 4;
    const MIGRATIONS: &'static [Embedded] = MIGRATIONS;
    // A named lock with a timeout: sqlx's own `GET_LOCK(…, -1)` does not wait on
    // MariaDB, where a negative timeout is not "forever".
    const MIGRATE_LOCK: Option<&'static str> =
        Some("SELECT CAST(GET_LOCK(?, 60) AS SIGNED) AS got");

    fn t(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }

    fn home(&self) -> String {
        let o = self.pool.connect_options();
        format!(
            "mysql {}:{}/{} {}",
            o.get_host(),
            o.get_port(),
            o.get_database().unwrap_or_default(),
            self.prefix
        )
    }

    fn prefix(&self) -> &str {
        &self.prefix
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

    fn values(&self, cols: &[&str], rows: usize) -> String {
        union_values(cols, rows)
    }

    fn update_from(&self, target: &str, key: &str, set: &str, values: &str) -> String {
        format!("UPDATE {target} j JOIN {values} ON j.{key} = v.id SET {set}")
    }

    crate::backends::sql::executes_on!(MySql, std::convert::identity, |pool| pool.begin());

    fn run_sequence(&self) -> Option<String> {
        Some(format!("NEXT VALUE FOR {}", self.t("run_ids")))
    }

    async fn purge_runs(&self, before: i64) -> Result<u64> {
        partitions::purge(self, before).await
    }

    async fn prepare_log(&self) -> Result<()> {
        partitions::prepare(self).await
    }
}

/// The run log's day partitions are partitions of `<prefix>runs` and
/// `<prefix>run_lines`, with `pmax` last (ids past the last day: a day is added by
/// splitting it, which moves no row while it is empty).
impl DayParts for MySqlDialect {
    fn list_parts(&self) -> Sql {
        Sql::new(
            "SELECT CAST(PARTITION_NAME AS CHAR) AS tag FROM information_schema.PARTITIONS
             WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND PARTITION_NAME IS NOT NULL",
        )
        .bind(self.t("runs"))
    }

    fn part_of(&self, table: &str, tag: &str) -> String {
        format!("{} PARTITION ({tag})", self.t(table))
    }

    fn add_day(&self, day: i64) -> Vec<Sql> {
        let tag = Part::Day(day).tag();
        let hi = (day + 1) * crate::backends::sql::run_ids::ID_STEP;
        ["runs", "run_lines"]
            .iter()
            .map(|t| {
                Sql::new(format!(
                    "ALTER TABLE {} REORGANIZE PARTITION pmax INTO
                     (PARTITION {tag} VALUES LESS THAN ({hi}), PARTITION pmax VALUES LESS THAN MAXVALUE)",
                    self.t(t)
                ))
            })
            .collect()
    }

    fn drop_part(&self, tag: &str) -> Vec<Sql> {
        ["run_lines", "runs"]
            .iter()
            .map(|t| {
                Sql::new(format!(
                    "ALTER TABLE {} DROP PARTITION IF EXISTS {tag}",
                    self.t(t)
                ))
            })
            .collect()
    }
}

sql_handles! {
    /// A [`JobStore`](crate::JobStore) in MariaDB 10.6+ (its run log needs MariaDB's
    /// sequences). A pool given to
    /// `from_pool` should open its sessions in `READ COMMITTED` (the builder's do), so
    /// that concurrent claimers take no gap locks.
    store MySqlStore;
    /// Row leases in `<prefix>locks`: a batch's grant is one statement (rows
    /// inserted, or taken over where expired, in key order), renewal and release one
    /// transaction per batch; deadlocks retried, tokens from the server's clock in µs.
    /// Usable with any store.
    locks MySqlLocks over locks::MySqlLockStatements;
    builder MySqlBuilder;
    dialect MySqlDialect, pool MySqlPool, names prefix: &str;
}

impl MySqlStore {
    /// A builder for `url`.
    pub fn builder(url: impl Into<String>) -> MySqlBuilder {
        MySqlBuilder {
            url: url.into(),
            prefix: "jobwheel_".into(),
            max_connections: 8,
            connect_timeout: crate::backends::sql::connect::DEFAULT_CONNECT_TIMEOUT,
        }
    }

    /// The table prefix.
    pub fn prefix(&self) -> &str {
        &self.inner.d.prefix
    }
}

/// Builds a [`MySqlStore`] from a URL.
#[derive(Clone)]
pub struct MySqlBuilder {
    url: String,
    prefix: String,
    max_connections: u32,
    connect_timeout: std::time::Duration,
}

impl std::fmt::Debug for MySqlBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MySqlBuilder")
            .field("url", &crate::error::redact_url(&self.url))
            .field("prefix", &self.prefix)
            .field("max_connections", &self.max_connections)
            .field("connect_timeout", &self.connect_timeout)
            .finish()
    }
}

impl MySqlBuilder {
    /// Connects. Does not migrate: call [`MySqlStore::migrate`].
    pub async fn build(self) -> Result<MySqlStore> {
        use crate::backends::sql::connect;
        check_prefix(&self.prefix)?;
        let pool_size = self.pool_size()?;
        connect::check_scheme("mysql.url", &self.url, &["mysql", "mariadb"])?;
        let options: sqlx::mysql::MySqlConnectOptions = connect::options("mysql.url", &self.url)?;
        let server = format!("{}:{}", options.get_host(), options.get_port());
        let pool = MySqlPoolOptions::new()
            .max_connections(pool_size)
            // No gap locks: concurrent claimers and lockers do not deadlock on ranges.
            .after_connect(|conn, _meta| {
                Box::pin(async move {
                    sqlx::query("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
                        .execute(conn)
                        .await
                        .map(|_| ())
                })
            });
        let pool = connect::open(NAME, server, options, pool, self.connect_timeout).await?;
        MySqlStore::from_pool(pool, &self.prefix)
    }
}
