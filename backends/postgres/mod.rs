//! The PostgreSQL backend: [`PgStore`] and [`PgLocks`] (feature `postgres`).
//!
//! Each batched call is **one statement**: starts, finishes, lock grants, renewals and
//! releases take arrays (`UNNEST`) and do their checks and writes in data-modifying
//! CTEs, so a batch costs one round trip whatever its size. The store's clock is the
//! server's `clock_timestamp()`; instants are `BIGINT` epoch milliseconds, so no
//! session time zone is involved. Alarm claims use `FOR UPDATE SKIP LOCKED`.
//!
//! SQL text is assembled only from static fragments and the schema and table prefix,
//! both checked against `[A-Za-z0-9_]`; every value is a bind parameter, which is why
//! the SQL goes through `sqlx::AssertSqlSafe`.
//!
//! ```no_run
//! # async fn t() -> jobwheel::Result<()> {
//! let store = jobwheel::postgres::PgStore::builder("postgres://app@db/app").build().await?;
//! store.migrate().await?;
//! let locks = jobwheel::postgres::PgLocks::new(store.pool().clone(), store.tables());
//! # Ok(()) }
//! ```

mod locks;
mod log;
mod store;

pub use locks::PgLocks;
pub use store::PgStore;

use crate::error::{Error, Result};
use sqlx::postgres::{PgPool, PgPoolOptions};

const NAME: &str = "postgres";
const MIGRATIONS: &[(i64, &str)] = &[
    (1, include_str!("migrations/0001_init.sql")),
    (2, include_str!("migrations/0002_misfire_spans.sql")),
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

fn check_ident(field: &'static str, v: &str, allow_empty: bool) -> Result<()> {
    let ok = (allow_empty || !v.is_empty())
        && v.len() <= 40
        && v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !v.starts_with(|c: char| c.is_ascii_digit());
    if ok {
        Ok(())
    } else {
        Err(Error::invalid(
            field,
            v,
            "must be up to 40 characters of [A-Za-z0-9_], not starting with a digit",
        ))
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
#[derive(Debug, Clone)]
pub struct PgBuilder {
    url: String,
    schema: String,
    prefix: String,
    max_connections: u32,
}

impl PgBuilder {
    /// Schema (default `public`).
    pub fn schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = schema.into();
        self
    }
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
    /// Connects. Does not migrate: call [`PgStore::migrate`].
    pub async fn build(self) -> Result<PgStore> {
        let tables = Tables::new(&self.schema, &self.prefix)?;
        if self.max_connections == 0 {
            return Err(Error::invalid(
                "postgres.max_connections",
                0,
                "must be at least 1",
            ));
        }
        let pool = PgPoolOptions::new()
            .max_connections(self.max_connections)
            .connect(&self.url)
            .await
            .map_err(db_err("connect"))?;
        Ok(PgStore::from_pool(pool, tables))
    }
}

/// Runs the embedded migrations not yet run, under an advisory lock so that nodes
/// migrating at once take turns.
pub(crate) async fn migrate(pool: &PgPool, tables: &Tables) -> Result<()> {
    let op = "migrate";
    let mut tx = pool.begin().await.map_err(db_err(op))?;
    sqlx::query("SELECT pg_advisory_xact_lock(hashtext('jobwheel.migrate'))")
        .execute(&mut *tx)
        .await
        .map_err(db_err(op))?;
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "CREATE SCHEMA IF NOT EXISTS {}",
        tables.schema
    )))
    .execute(&mut *tx)
    .await
    .map_err(db_err(op))?;
    let table = tables.t("schema");
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "CREATE TABLE IF NOT EXISTS {table} (version BIGINT PRIMARY KEY)"
    )))
    .execute(&mut *tx)
    .await
    .map_err(db_err(op))?;
    let done: Option<i64> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT MAX(version) FROM {table}"
    )))
    .fetch_one(&mut *tx)
    .await
    .map_err(db_err(op))?;
    for (version, sql) in MIGRATIONS {
        if done.is_some_and(|d| d >= *version) {
            continue;
        }
        let sql = sql
            .replace("{t}", &tables.t(""))
            .replace("{p}", &tables.prefix);
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
            .execute(&mut *tx)
            .await
            .map_err(db_err(op))?;
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO {table} (version) VALUES ($1)"
        )))
        .bind(version)
        .execute(&mut *tx)
        .await
        .map_err(db_err(op))?;
    }
    tx.commit().await.map_err(db_err(op))
}

impl PgStore {
    /// A builder for `url`.
    pub fn builder(url: impl Into<String>) -> PgBuilder {
        PgBuilder {
            url: url.into(),
            schema: "public".into(),
            prefix: "jobwheel_".into(),
            max_connections: 8,
        }
    }
}
