//! The one SQL store: [`SqlStore`] implements every store part once, over a
//! [`Dialect`] that says what differs between SQLite, PostgreSQL and MySQL — how a
//! statement is executed (each driver's own types), placeholders, the clock, the due
//! scan's filter and keyset clause, row locking, the shape of a joined `UPDATE`, and,
//! for PostgreSQL, the one-statement start and finish.
//!
//! SQL text is assembled only from static fragments, placeholder lists and table
//! names whose prefix (and PostgreSQL schema) is checked against `[A-Za-z0-9_]`; every
//! value is a bind parameter ([`Arg`]), which is why statements go through
//! `sqlx::AssertSqlSafe`. Statements are written with `?` placeholders; a dialect that
//! numbers them (`$1` …) rewrites them when it executes.

mod audit;
pub(crate) mod batch;
pub(crate) mod connect;
mod credentials;
pub(crate) mod decode;
mod handles;
mod jobs;
mod leases;
pub(crate) mod locks;
pub(crate) mod log;
pub(crate) mod migrate;
mod outbox;
#[cfg(any(feature = "postgres", feature = "mysql"))]
pub(crate) mod partitions;
pub(crate) mod releases;
pub(crate) mod run_ids;
pub(crate) mod running;

use crate::error::{Error, Result};
use crate::record::{DueKey, FinishOutcome, FinishRun, StartOutcome, StartRun};
use decode::SqlRow;
pub(crate) use handles::sql_handles;
use std::fmt;
use std::future::Future;

/// The condition of a job row that holds its running run (the run log reads both
/// the run rows and these, [`running`]).
pub(crate) const IN_ROW: &str = "run_node IS NOT NULL";

/// One bind parameter.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Arg {
    Int(Option<i64>),
    Text(Option<String>),
    Bool(bool),
    Bytes(Vec<u8>),
}

impl From<i64> for Arg {
    fn from(v: i64) -> Self {
        Arg::Int(Some(v))
    }
}
impl From<Option<i64>> for Arg {
    fn from(v: Option<i64>) -> Self {
        Arg::Int(v)
    }
}
/// Text every SQL server stores: PostgreSQL refuses the NUL character in `TEXT`
/// ("invalid byte sequence for encoding UTF8: 0x00"), so it becomes U+FFFD on every
/// dialect alike. Every text bound to a statement goes through here; ids and names
/// are validated without NUL long before, so only free text (errors) changes.
pub(crate) fn storable(v: String) -> String {
    if v.contains('\0') {
        v.replace('\0', "\u{FFFD}")
    } else {
        v
    }
}

impl From<&str> for Arg {
    fn from(v: &str) -> Self {
        Arg::Text(Some(storable(v.to_string())))
    }
}
impl From<String> for Arg {
    fn from(v: String) -> Self {
        Arg::Text(Some(storable(v)))
    }
}
impl From<Option<String>> for Arg {
    fn from(v: Option<String>) -> Self {
        Arg::Text(v.map(storable))
    }
}
impl From<Option<&str>> for Arg {
    fn from(v: Option<&str>) -> Self {
        Arg::Text(v.map(|v| storable(v.to_string())))
    }
}
impl From<Vec<u8>> for Arg {
    fn from(v: Vec<u8>) -> Self {
        Arg::Bytes(v)
    }
}
impl From<bool> for Arg {
    fn from(v: bool) -> Self {
        Arg::Bool(v)
    }
}

/// A statement with `?` placeholders and its arguments, in order.
#[derive(Clone, Debug, Default)]
pub(crate) struct Sql {
    pub(crate) text: String,
    pub(crate) args: Vec<Arg>,
}

impl Sql {
    pub(crate) fn new(text: impl Into<String>) -> Self {
        Sql {
            text: text.into(),
            args: Vec::new(),
        }
    }

    /// Appends one argument.
    pub(crate) fn bind(mut self, a: impl Into<Arg>) -> Self {
        self.args.push(a.into());
        self
    }

    /// Appends text and its arguments.
    pub(crate) fn push(&mut self, text: &str, args: impl IntoIterator<Item = Arg>) {
        self.text.push_str(text);
        self.args.extend(args);
    }
}

/// Binds `sql`'s arguments to a query of the driver `DB`, its text passed through
/// `text` (a dialect's placeholder rewrite).
pub(crate) fn query<DB>(
    text: String,
    args: Vec<Arg>,
) -> sqlx::query::Query<'static, DB, <DB as sqlx::Database>::Arguments>
where
    DB: sqlx::Database,
    Option<i64>: for<'q> sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    Option<String>: for<'q> sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    bool: for<'q> sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    Vec<u8>: for<'q> sqlx::Encode<'q, DB> + sqlx::Type<DB>,
{
    let mut q = sqlx::query::<DB>(sqlx::AssertSqlSafe(text));
    for a in args {
        q = match a {
            Arg::Int(v) => q.bind(v),
            Arg::Text(v) => q.bind(v),
            Arg::Bool(v) => q.bind(v),
            Arg::Bytes(v) => q.bind(v),
        };
    }
    q
}

/// `?, ?, …` with `n` placeholders.
pub(crate) fn marks(n: usize) -> String {
    vec!["?"; n].join(", ")
}

/// A derived table `v` of `rows` rows of placeholders named `cols`, bound row by row,
/// as `SELECT`s joined by `UNION ALL`: `(SELECT ? AS a, ? AS b UNION ALL SELECT ?, ? …)
/// AS v` (the form MySQL and MariaDB both read; see [`Dialect::values`]).
#[cfg(feature = "mysql")]
pub(crate) fn union_values(cols: &[&str], rows: usize) -> String {
    let first = cols
        .iter()
        .map(|c| format!("? AS {c}"))
        .collect::<Vec<_>>()
        .join(", ");
    let rest = format!(" UNION ALL SELECT {}", marks(cols.len())).repeat(rows.saturating_sub(1));
    format!("(SELECT {first}{rest}) AS v")
}

/// The rows of a `VALUES` list: `(?, ?), (?, ?) …`.
pub(crate) fn value_rows(cols: usize, rows: usize) -> String {
    vec![format!("({})", marks(cols)); rows].join(", ")
}

/// What differs between the SQL servers. Everything else is [`SqlStore`]'s, once.
pub(crate) trait Dialect: Send + Sync + Clone + fmt::Debug + 'static {
    /// The driver's row type.
    type Row: SqlRow + Send + Sync;
    /// An open write transaction.
    type Tx: Send;

    /// Backend name for errors and logs.
    const NAME: &'static str;
    /// The runs table's `trigger` column, quoted where the word is reserved.
    const TRIGGER: &'static str;
    /// The literal `false` as the run table's `will_retry` column holds it.
    const FALSE: &'static str;
    /// `NULL` typed as an integer column and as a text column, for a `UNION` whose
    /// other side has those columns.
    const NULL_INT: &'static str;
    /// See [`NULL_INT`](Self::NULL_INT).
    const NULL_TEXT: &'static str;
    /// Integer division (`a {DIV} b`).
    const DIV: &'static str;
    /// The store's clock as an SQL expression in epoch milliseconds, never ahead of it.
    const NOW_MS: &'static str;
    /// The same clock in microseconds, for lock tokens.
    const NOW_US: &'static str;
    /// The locks table's key column (`key` is reserved in MySQL).
    const LOCK_KEY: &'static str;
    /// The due scan's filter, written exactly as the due index's predicate.
    const DUE: &'static str;
    /// Appended to a `SELECT` whose rows the transaction goes on to write.
    const FOR_UPDATE: &'static str;
    /// Appended to a claiming `SELECT`: lock the rows, skipping those others hold.
    const SKIP_LOCKED: &'static str;
    /// `INSERT` that does nothing when the key exists (with the columns and values to
    /// follow).
    const INSERT_IGNORE: &'static str;
    /// What follows the values of [`INSERT_IGNORE`](Self::INSERT_IGNORE).
    const ON_CONFLICT_IGNORE: &'static str;
    /// How many transactions a bulk write runs at once: one where the database has a
    /// single writer (SQLite), more where the server writes in parallel.
    const BULK_WRITERS: usize;
    /// The migrations, in order ([`migrate::Embedded`]).
    const MIGRATIONS: &'static [migrate::Embedded];
    /// A statement taking a session lock for a whole migration run, with one
    /// placeholder for the lock's name, returning a `BIGINT` column `got`, 1 once the
    /// lock is held (the session's end releases it). `None` where the database's own
    /// write lock serializes migrations (SQLite).
    const MIGRATE_LOCK: Option<&'static str>;

    /// A table's full name.
    fn t(&self, name: &str) -> String;
    /// Where the tables live (the server, the database and the table names), as
    /// [`JobLeases::home`](crate::store::JobLeases::home) and the store's lock
    /// provider name it.
    fn home(&self) -> String;
    /// The bare table prefix (without a schema).
    fn prefix(&self) -> &str;
    /// A statement to run before the migrations, on the same connection (PostgreSQL
    /// creates the schema).
    fn migrate_prelude(&self) -> Option<String> {
        None
    }
    /// Maps a driver error, marking the temporary ones.
    fn err(&self, op: &'static str, e: sqlx::Error) -> Error;
    /// Appends the keyset condition "after `key`" to a due scan.
    fn keyset(&self, q: &mut Sql, key: &DueKey);
    /// A derived table `v` of `rows` rows of placeholders named `cols`, bound row by
    /// row. A batched `UPDATE` joins it on the key ([`update_from`](Self::update_from)):
    /// one index lookup per row, where a `CASE key WHEN … END` per column compares
    /// every row with every arm (quadratic in the batch: 57 µs of server time per row
    /// at 1,000 rows, measured on MariaDB 10.11).
    fn values(&self, cols: &[&str], rows: usize) -> String;
    /// An `UPDATE` of `target` (aliased `j`) joined on `j.<key> = v.id` to the derived
    /// table `values` (aliased `v`), setting `set` (unqualified target columns).
    fn update_from(&self, target: &str, key: &str, set: &str, values: &str) -> String;

    /// Runs a query outside a transaction and returns its rows.
    fn fetch(
        &self,
        op: &'static str,
        q: Sql,
    ) -> impl Future<Output = Result<Vec<Self::Row>>> + Send;
    /// Runs a statement outside a transaction; rows affected.
    fn exec(&self, op: &'static str, q: Sql) -> impl Future<Output = Result<u64>> + Send;
    /// Opens a write transaction.
    fn begin(&self, op: &'static str) -> impl Future<Output = Result<Self::Tx>> + Send;
    /// Runs a query in `tx`.
    fn fetch_in(
        &self,
        tx: &mut Self::Tx,
        op: &'static str,
        q: Sql,
    ) -> impl Future<Output = Result<Vec<Self::Row>>> + Send;
    /// Runs a statement in `tx`; rows affected.
    fn exec_in(
        &self,
        tx: &mut Self::Tx,
        op: &'static str,
        q: Sql,
    ) -> impl Future<Output = Result<u64>> + Send;
    /// Commits `tx`.
    fn commit(&self, tx: Self::Tx, op: &'static str) -> impl Future<Output = Result<()>> + Send;
    /// On one connection, under [`MIGRATE_LOCK`](Self::MIGRATE_LOCK): the prelude, the
    /// migrations table, the adoption of an earlier runner's table, then `m`.
    fn migrate_on_one_connection(
        &self,
        m: &sqlx::migrate::Migrator,
        table: &str,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Whether [`insert_absent`](Self::insert_absent) has a path of its own.
    const INSERTS_ABSENT: bool = false;
    /// Inserts, in one statement, the jobs of `jobs` (each with its encoded
    /// definition in `defs` and its first fire) whose ids no row holds, as `upsert`
    /// creates them; answers their indexes. `None` (the default): the dialect has no
    /// such path, and [`upsert_many`](crate::store::Jobs::upsert_many) runs its
    /// chunked transactions for every job.
    fn insert_absent(
        &self,
        jobs: &[(crate::job::Job, Option<crate::time::Timestamp>)],
        defs: &[String],
    ) -> impl Future<Output = Result<Option<Vec<usize>>>> + Send {
        let _ = (jobs, defs);
        async { Ok(None) }
    }
    /// Called after a bulk insert of `rows` new jobs; by default nothing. PostgreSQL
    /// refreshes the job table's statistics in the background when the insert grew
    /// it by a fifth or more (or it was never analyzed): planned on stale statistics
    /// (autovacuum analyzes within a minute or so), the due scan reads every due row
    /// and sorts them instead of reading the due index in order up to its limit.
    fn after_bulk_insert(&self, rows: usize) -> impl Future<Output = Result<()>> + Send {
        let _ = rows;
        async { Ok(()) }
    }
    /// The SQL of the next value of the run ids' sequence where run ids carry their
    /// start day and the run log is partitioned by it ([`partitions`]: the start
    /// writes each id with [`run_ids::run_id_for`], queries by start time bound
    /// the id too); `None` (the default): the table numbers its runs.
    fn run_sequence(&self) -> Option<String> {
        None
    }
    /// [`RunLog::purge_runs`](crate::store::RunLog::purge_runs) with `before` in
    /// epoch ms; by default two `DELETE`s in one transaction.
    fn purge_runs(&self, before: i64) -> impl Future<Output = Result<u64>> + Send {
        log::purge_rows(self, before)
    }
    /// [`RunLog::prepare_log`](crate::store::RunLog::prepare_log); by default
    /// nothing to do.
    fn prepare_log(&self) -> impl Future<Output = Result<()>> + Send {
        async { Ok(()) }
    }
    /// Records starts; by default with the rules decided in Rust over locked rows
    /// ([`batch::start`]).
    fn start_runs(
        &self,
        runs: &[StartRun],
    ) -> impl Future<Output = Result<Vec<StartOutcome>>> + Send {
        batch::start(self, runs)
    }
    /// [`JobLeases::claim_runs`](crate::store::JobLeases::claim_runs); by default
    /// decided in Rust over locked rows ([`leases::claim`]).
    fn claim_runs(
        &self,
        claims: &[crate::record::ClaimRun],
        want: usize,
    ) -> impl Future<Output = Result<Vec<crate::record::ClaimOutcome>>> + Send {
        leases::claim(self, claims, want)
    }
    /// [`JobLeases::acquire_jobs`](crate::store::JobLeases::acquire_jobs); by default
    /// decided in Rust over locked rows ([`leases::acquire`]).
    fn acquire_jobs(
        &self,
        owner: &str,
        requests: &[crate::lock::LockRequest],
    ) -> impl Future<Output = Result<Vec<Option<crate::lock::Lease>>>> + Send {
        leases::acquire(self, owner, requests)
    }
    /// Records finishes; by default with the rules decided in Rust over locked rows
    /// ([`batch::finish`]).
    fn finish_runs(
        &self,
        runs: &[FinishRun],
    ) -> impl Future<Output = Result<Vec<FinishOutcome>>> + Send {
        batch::finish(self, runs)
    }
}

/// A store in an SQL database: every part of [`JobStore`](crate::JobStore),
/// written once over a [`Dialect`].
#[derive(Clone, Debug)]
pub(crate) struct SqlStore<D: Dialect> {
    pub(crate) d: D,
}

impl<D: Dialect> SqlStore<D> {
    /// The store's clock, epoch milliseconds.
    pub(crate) async fn now_ms(&self) -> Result<i64> {
        let rows = self
            .d
            .fetch("now", Sql::new(format!("SELECT {} AS now", D::NOW_MS)))
            .await?;
        decode::first_int(D::NAME, &rows, "now")
    }
}

/// The store's clock inside `tx`, epoch milliseconds.
pub(crate) async fn now_in<D: Dialect>(d: &D, tx: &mut D::Tx, op: &'static str) -> Result<i64> {
    let rows = d
        .fetch_in(tx, op, Sql::new(format!("SELECT {} AS now", D::NOW_MS)))
        .await?;
    decode::first_int(D::NAME, &rows, "now")
}

/// Runs a transaction again when it failed with a temporary error (a lost deadlock
/// or lock wait, a connection lost), up to 5 times. A connection lost at the commit
/// may have committed: what runs here is safe to repeat (starts are idempotent; a
/// repeated finish is refused `NotRunning`, and the engine reads the run to tell
/// its own write from a newer holder's).
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

/// Checks a table prefix or schema name: up to 40 characters of `[A-Za-z0-9_]`, not
/// starting with a digit (and not empty unless `allow_empty`).
pub(crate) fn check_ident(field: &'static str, v: &str, allow_empty: bool) -> Result<()> {
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

/// The execution methods of a [`Dialect`] for the driver `$db`, whose `pool` field is
/// the pool, `begin` opens a write transaction on it, and `$rewrite` turns the
/// statement's text into the driver's.
macro_rules! executes_on {
    ($db:ty, $rewrite:expr, |$pool:ident| $begin:expr) => {
        async fn fetch(
            &self,
            op: &'static str,
            q: $crate::backends::sql::Sql,
        ) -> $crate::error::Result<Vec<Self::Row>> {
            $crate::backends::sql::query::<$db>($rewrite(q.text), q.args)
                .fetch_all(&self.pool)
                .await
                .map_err(db_err(op))
        }
        async fn exec(
            &self,
            op: &'static str,
            q: $crate::backends::sql::Sql,
        ) -> $crate::error::Result<u64> {
            let r = $crate::backends::sql::query::<$db>($rewrite(q.text), q.args)
                .execute(&self.pool)
                .await
                .map_err(db_err(op))?;
            Ok(r.rows_affected())
        }
        async fn begin(&self, op: &'static str) -> $crate::error::Result<Self::Tx> {
            let $pool = &self.pool;
            $begin.await.map_err(db_err(op))
        }
        async fn fetch_in(
            &self,
            tx: &mut Self::Tx,
            op: &'static str,
            q: $crate::backends::sql::Sql,
        ) -> $crate::error::Result<Vec<Self::Row>> {
            $crate::backends::sql::query::<$db>($rewrite(q.text), q.args)
                .fetch_all(&mut **tx)
                .await
                .map_err(db_err(op))
        }
        async fn exec_in(
            &self,
            tx: &mut Self::Tx,
            op: &'static str,
            q: $crate::backends::sql::Sql,
        ) -> $crate::error::Result<u64> {
            let r = $crate::backends::sql::query::<$db>($rewrite(q.text), q.args)
                .execute(&mut **tx)
                .await
                .map_err(db_err(op))?;
            Ok(r.rows_affected())
        }
        async fn commit(&self, tx: Self::Tx, op: &'static str) -> $crate::error::Result<()> {
            tx.commit().await.map_err(db_err(op))
        }
        async fn migrate_on_one_connection(
            &self,
            m: &sqlx::migrate::Migrator,
            table: &str,
        ) -> $crate::error::Result<()> {
            use $crate::backends::sql::decode::SqlRow as _;
            let op = "migrate";
            let err = |e| $crate::backends::sql::migrate::map_err(Self::NAME, Self::MIGRATIONS, e);
            let mut conn = self.pool.acquire().await.map_err(db_err(op))?;
            let result = async {
                if let Some(lock) = Self::MIGRATE_LOCK {
                    let name = format!("jobwheel.migrate.{}", self.t(""));
                    let row = $crate::backends::sql::query::<$db>(
                        $rewrite(lock.to_string()),
                        vec![name.into()],
                    )
                    .fetch_one(&mut *conn)
                    .await
                    .map_err(db_err(op))?;
                    if row.opt_int("got").map_err(db_err(op))? != Some(1) {
                        return Err($crate::error::Error::backend(
                            Self::NAME,
                            op,
                            true,
                            "timed out waiting for the migration lock",
                        ));
                    }
                }
                if let Some(prelude) = self.migrate_prelude() {
                    $crate::backends::sql::query::<$db>($rewrite(prelude), vec![])
                        .execute(&mut *conn)
                        .await
                        .map_err(db_err(op))?;
                }
                sqlx::migrate::Migrate::ensure_migrations_table(&mut *conn, table)
                    .await
                    .map_err(err)?;
                $crate::backends::sql::migrate::adopt_legacy(self, m, table).await?;
                m.run_direct(None, &mut *conn, false).await.map_err(err)
            }
            .await;
            // The lock belongs to the session: closing it releases the lock whatever
            // happened above, and the pool opens a fresh connection in its place.
            let _ = conn.close().await;
            result
        }
    };
}
pub(crate) use executes_on;
