//! The PostgreSQL backend: [`PgStore`] and [`PgLocks`] (feature `postgres`).
//!
//! Each batched call is **one statement**: starts, finishes, lock grants, renewals and
//! releases take arrays (`UNNEST`) and do their checks and writes in data-modifying
//! CTEs, so a batch costs one round trip whatever its size. The store's clock is the
//! server's `clock_timestamp()`; instants are `BIGINT` epoch milliseconds, so no
//! session time zone is involved. Alarm claims use `FOR UPDATE SKIP LOCKED`.
//!
//! Job ids compare bytewise (the id columns use the `"C"` collation), as on every
//! backend. Everything but the one-statement start and finish is the shared SQL store's
//! (`backends/sql/`); this module is the dialect.
//!
//! ```no_run
//! # async fn t() -> jobwheel::Result<()> {
//! let store = jobwheel::postgres::PgStore::builder("postgres://app@db/app").build().await?;
//! store.migrate().await?;
//! let locks = jobwheel::postgres::PgLocks::new(store.pool().clone(), store.tables());
//! # Ok(()) }
//! ```

mod batch;
mod locks;

pub use locks::PgLocks;

use crate::error::{Error, Result};
use crate::record::{DueKey, FinishOutcome, FinishRun, StartOutcome, StartRun};
use crate::sql::migrate::{self, Embedded};
use crate::sql::{Dialect, Sql, SqlStore, check_ident, query};
use async_trait::async_trait;
use sqlx::postgres::{PgPool, PgPoolOptions, PgRow};
use sqlx::{Postgres, Transaction};

const NAME: &str = "postgres";
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
}

#[async_trait]
impl Dialect for PgDialect {
    type Row = PgRow;
    type Tx = Transaction<'static, Postgres>;

    const NAME: &'static str = NAME;
    const TRIGGER: &'static str = "trigger";
    const DIV: &'static str = "/";
    const NOW_MS: &'static str = NOW_MS;
    const DUE: &'static str = "enabled AND running_run IS NULL AND next_fire_at IS NOT NULL";
    const FOR_UPDATE: &'static str = " FOR UPDATE";
    const SKIP_LOCKED: &'static str = " FOR UPDATE SKIP LOCKED";
    const INSERT_IGNORE: &'static str = "INSERT INTO";
    const ON_CONFLICT_IGNORE: &'static str = " ON CONFLICT DO NOTHING";

    fn t(&self, name: &str) -> String {
        self.tables.t(name)
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

    fn update_from(&self, target: &str, set: &str, values: &str) -> String {
        format!("UPDATE {target} AS j SET {set} FROM {values} WHERE j.id = v.id")
    }

    async fn fetch(&self, op: &'static str, q: Sql) -> Result<Vec<PgRow>> {
        query::<Postgres>(numbered(&q.text), q.args)
            .fetch_all(&self.pool)
            .await
            .map_err(db_err(op))
    }

    async fn exec(&self, op: &'static str, q: Sql) -> Result<u64> {
        let r = query::<Postgres>(numbered(&q.text), q.args)
            .execute(&self.pool)
            .await
            .map_err(db_err(op))?;
        Ok(r.rows_affected())
    }

    async fn begin(&self, op: &'static str) -> Result<Self::Tx> {
        self.pool.begin().await.map_err(db_err(op))
    }

    async fn fetch_in(&self, tx: &mut Self::Tx, op: &'static str, q: Sql) -> Result<Vec<PgRow>> {
        query::<Postgres>(numbered(&q.text), q.args)
            .fetch_all(&mut **tx)
            .await
            .map_err(db_err(op))
    }

    async fn exec_in(&self, tx: &mut Self::Tx, op: &'static str, q: Sql) -> Result<u64> {
        let r = query::<Postgres>(numbered(&q.text), q.args)
            .execute(&mut **tx)
            .await
            .map_err(db_err(op))?;
        Ok(r.rows_affected())
    }

    async fn commit(&self, tx: Self::Tx, op: &'static str) -> Result<()> {
        tx.commit().await.map_err(db_err(op))
    }

    async fn start_runs(&self, runs: &[StartRun]) -> Result<Vec<StartOutcome>> {
        self.start_batch(runs).await
    }

    async fn finish_runs(&self, runs: &[FinishRun]) -> Result<Vec<FinishOutcome>> {
        self.finish_batch(runs).await
    }
}

/// A [`JobStore`](crate::JobStore) in PostgreSQL.
#[derive(Debug, Clone)]
pub struct PgStore {
    inner: SqlStore<PgDialect>,
}

crate::store::delegate_store!(PgStore => inner);

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

    /// A store on an existing pool (for example the application's own).
    pub fn from_pool(pool: PgPool, tables: Tables) -> Self {
        PgStore {
            inner: SqlStore {
                d: PgDialect { pool, tables },
            },
        }
    }

    /// The pool.
    pub fn pool(&self) -> &PgPool {
        &self.inner.d.pool
    }

    /// Where the tables live.
    pub fn tables(&self) -> &Tables {
        &self.inner.d.tables
    }

    /// Runs the migrations not yet applied to these tables (creating the schema if
    /// needed). Idempotent; nodes running it at once take turns on an advisory lock.
    /// Errors with [`Error::SchemaTooNew`] when a newer jobwheel migrated them.
    pub async fn migrate(&self) -> Result<()> {
        let d = &self.inner.d;
        let tables = &d.tables;
        let table = tables.t("migrations");
        let m = migrate::migrator(
            MIGRATIONS,
            |sql| {
                sql.replace("{t}", &tables.t(""))
                    .replace("{p}", &tables.prefix)
            },
            table.clone(),
        );
        let err = |e| migrate::map_err(NAME, MIGRATIONS, e);
        // One session holds an advisory lock for the whole run, so nodes migrating at
        // once never race on `CREATE … IF NOT EXISTS` (which PostgreSQL does not make
        // safe against itself).
        let mut conn = d.pool.acquire().await.map_err(db_err("migrate"))?;
        let lock = format!("jobwheel.migrate.{}", tables.t(""));
        sqlx::query("SELECT pg_advisory_lock(hashtext($1))")
            .bind(&lock)
            .execute(&mut *conn)
            .await
            .map_err(db_err("migrate"))?;
        let result = async {
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "CREATE SCHEMA IF NOT EXISTS {}",
                tables.schema
            )))
            .execute(&mut *conn)
            .await
            .map_err(db_err("migrate"))?;
            sqlx::migrate::Migrate::ensure_migrations_table(&mut *conn, &table)
                .await
                .map_err(err)?;
            migrate::adopt_legacy(d, &m, &table).await?;
            m.run(&mut *conn).await.map_err(err)
        }
        .await;
        let _ = sqlx::query("SELECT pg_advisory_unlock(hashtext($1))")
            .bind(&lock)
            .execute(&mut *conn)
            .await;
        result
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
