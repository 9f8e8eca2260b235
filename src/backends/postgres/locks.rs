//! PostgreSQL's own lease statements: each batched grant, renewal or release is one
//! statement over arrays (`UNNEST`), where the generic [`SqlLocks`] needs a
//! transaction of several. The decisions are the generic ones: a grant takes a free
//! or expired row; its token is `max(previous + 1, server µs)`; renew and release are
//! owner- and token-checked.
//!
//! [`SqlLocks`]: crate::backends::sql::locks::SqlLocks

use super::{NOW_MS, PgDialect, db_err};
use crate::backends::sql::Dialect;
use crate::backends::sql::locks::{LocksOver, SqlLocks};
use crate::error::Result;
use crate::lock::{Lease, LockRequest};
use crate::time::{Timestamp, duration_ms};
use sqlx::AssertSqlSafe;
use sqlx::postgres::PgPool;
use std::collections::{HashMap, HashSet};
use std::time::Duration;

/// The server's clock in µs.
const NOW_US: &str = <PgDialect as Dialect>::NOW_US;
/// The key column.
const KEY: &str = <PgDialect as Dialect>::LOCK_KEY;

/// Leases in one table, one statement per batch.
#[derive(Clone, Debug)]
pub(crate) struct PgLockStatements {
    pool: PgPool,
    table: String,
    /// The generic statements, for what needs no PostgreSQL form (forgetting idle keys).
    generic: SqlLocks<PgDialect>,
}

impl LocksOver<PgDialect> for PgLockStatements {
    fn over(d: PgDialect) -> Self {
        PgLockStatements {
            table: d.t("locks"),
            pool: d.pool.clone(),
            generic: SqlLocks::over(d),
        }
    }
}

/// A CTE `locked` that row-locks the lease rows of the keys in `$1` in key order
/// (locking applies after the sort). Every call takes its rows in that order (the
/// grant inserts in key order too), so concurrent batches from several nodes wait for
/// each other instead of deadlocking, which costs `deadlock_timeout` (1 s by default)
/// before one of them is cancelled.
fn lock_in_key_order(table: &str) -> String {
    format!(
        "locked AS MATERIALIZED (SELECT {KEY} AS key FROM {table} WHERE {KEY} = ANY($1) ORDER BY {KEY} FOR UPDATE)"
    )
}

impl PgLockStatements {
    /// Where the leases live: the store's tables (see
    /// [`LockProvider::home`](crate::LockProvider::home)).
    pub(crate) fn home(&self) -> Option<String> {
        self.generic.home()
    }

    /// Grants every requested key that is free or expired to `owner`.
    pub(crate) async fn acquire(
        &self,
        owner: &str,
        requests: &[LockRequest],
    ) -> Result<Vec<Option<Lease>>> {
        let unique = crate::backends::sql::locks::distinct(requests);
        let t = &self.table;
        let rows: Vec<(String, i64, i64)> = sqlx::query_as(AssertSqlSafe(format!(
            "INSERT INTO {t} AS l ({KEY}, owner, token, expires_at)
             SELECT k, $2, {NOW_US}, {NOW_MS} + ttl FROM UNNEST($1::text[], $3::int8[]) AS r(k, ttl) ORDER BY k
             ON CONFLICT ({KEY}) DO UPDATE SET owner = EXCLUDED.owner,
               token = GREATEST(l.token + 1, EXCLUDED.token), expires_at = EXCLUDED.expires_at
             WHERE l.expires_at <= {NOW_MS}
             RETURNING {KEY}, token, expires_at"
        )))
        .bind(unique.iter().map(|r| r.key.clone()).collect::<Vec<_>>())
        .bind(owner)
        .bind(unique.iter().map(|r| duration_ms(r.ttl)).collect::<Vec<_>>())
        .fetch_all(&self.pool)
        .await
        .map_err(db_err("acquire"))?;
        let mut granted: HashMap<String, (i64, i64)> =
            rows.into_iter().map(|(k, t, e)| (k, (t, e))).collect();
        Ok(requests
            .iter()
            .map(|r| {
                granted.remove(&r.key).map(|(token, expires)| Lease {
                    key: r.key.clone(),
                    owner: owner.to_string(),
                    token: token as u64,
                    expires_at: Timestamp::from_millis(expires),
                })
            })
            .collect())
    }

    /// Extends each lease still held by its owner with its token.
    pub(crate) async fn renew(
        &self,
        leases: &[Lease],
        ttl: Duration,
    ) -> Result<Vec<Option<Lease>>> {
        let rows: Vec<(String, String, i64, i64)> = sqlx::query_as(AssertSqlSafe(format!(
            "WITH r AS (SELECT * FROM UNNEST($1::text[], $2::text[], $3::int8[]) AS r(k, o, tok)),
             {lock}
             UPDATE {t} l SET expires_at = {NOW_MS} + $4
             FROM r, locked
             WHERE l.{KEY} = locked.key AND l.{KEY} = r.k AND l.owner = r.o AND l.token = r.tok
               AND l.expires_at > {NOW_MS}
             RETURNING l.{KEY}, l.owner, l.token, l.expires_at",
            t = self.table,
            lock = lock_in_key_order(&self.table),
        )))
        .bind(leases.iter().map(|l| l.key.clone()).collect::<Vec<_>>())
        .bind(leases.iter().map(|l| l.owner.clone()).collect::<Vec<_>>())
        .bind(leases.iter().map(|l| l.token as i64).collect::<Vec<_>>())
        .bind(duration_ms(ttl))
        .fetch_all(&self.pool)
        .await
        .map_err(db_err("renew"))?;
        let renewed: HashMap<(String, String, i64), i64> = rows
            .into_iter()
            .map(|(k, o, t, e)| ((k, o, t), e))
            .collect();
        Ok(leases
            .iter()
            .map(|l| {
                renewed
                    .get(&(l.key.clone(), l.owner.clone(), l.token as i64))
                    .map(|e| Lease {
                        expires_at: Timestamp::from_millis(*e),
                        ..l.clone()
                    })
            })
            .collect())
    }

    /// Frees each lease still held by its owner with its token.
    pub(crate) async fn release(&self, leases: &[Lease]) -> Result<Vec<bool>> {
        let rows: Vec<(String, String, i64)> = sqlx::query_as(AssertSqlSafe(format!(
            "WITH r AS (SELECT * FROM UNNEST($1::text[], $2::text[], $3::int8[]) AS r(k, o, tok)),
             {lock},
             hit AS (SELECT l.{KEY} AS key, l.owner, l.token FROM {t} l JOIN locked ON l.{KEY} = locked.key
                     JOIN r ON l.{KEY} = r.k AND l.owner = r.o AND l.token = r.tok)
             UPDATE {t} l SET owner = NULL, expires_at = 0 FROM hit WHERE l.{KEY} = hit.key
             RETURNING hit.key, hit.owner, hit.token",
            t = self.table,
            lock = lock_in_key_order(&self.table),
        )))
        .bind(leases.iter().map(|l| l.key.clone()).collect::<Vec<_>>())
        .bind(leases.iter().map(|l| l.owner.clone()).collect::<Vec<_>>())
        .bind(leases.iter().map(|l| l.token as i64).collect::<Vec<_>>())
        .fetch_all(&self.pool)
        .await
        .map_err(db_err("release"))?;
        let released: HashSet<(String, String, i64)> = rows.into_iter().collect();
        Ok(leases
            .iter()
            .map(|l| released.contains(&(l.key.clone(), l.owner.clone(), l.token as i64)))
            .collect())
    }

    /// Deletes the rows nobody holds whose last grant is older than `older_than`.
    pub(crate) async fn forget_idle(&self, older_than: Duration) -> Result<u64> {
        self.generic.forget_idle(older_than).await
    }
}
