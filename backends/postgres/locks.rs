use super::{NOW_MS, Tables, db_err};
use crate::error::Result;
use crate::lock::{Lease, LockProvider, LockRequest};
use crate::time::{Timestamp, duration_ms};
use async_trait::async_trait;
use sqlx::AssertSqlSafe;
use sqlx::postgres::PgPool;
use std::collections::{HashMap, HashSet};
use std::time::Duration;

/// Row leases in a PostgreSQL table (ShedLock-style): `owner`, `expires_at` and a
/// fencing `token` bumped in the statement that grants the lock. Each batched call is
/// one statement. The row (and its token) stays after release, so tokens never repeat.
/// Usable with any store; the table is created by
/// [`PgStore::migrate`](super::PgStore::migrate).
#[derive(Debug, Clone)]
pub struct PgLocks {
    pool: PgPool,
    table: String,
}

impl PgLocks {
    /// Leases in `<schema>.<prefix>locks` on `pool`.
    pub fn new(pool: PgPool, tables: &Tables) -> Self {
        PgLocks {
            pool,
            table: tables.t("locks"),
        }
    }
}

type Granted = (String, i64, i64);

/// A CTE `locked` that row-locks the lease rows of the keys in `$1` in key order
/// (locking applies after the sort). Every lock call takes its rows in that order (the
/// grant inserts in key order too), so concurrent batches from several nodes wait for
/// each other instead of deadlocking, which costs PostgreSQL's `deadlock_timeout`
/// (1 s by default) before one of them is cancelled.
fn lock_in_key_order(table: &str) -> String {
    format!(
        "locked AS MATERIALIZED (SELECT key FROM {table} WHERE key = ANY($1) ORDER BY key FOR UPDATE)"
    )
}

#[async_trait]
impl LockProvider for PgLocks {
    fn name(&self) -> &'static str {
        super::NAME
    }

    async fn acquire(&self, owner: &str, requests: &[LockRequest]) -> Result<Vec<Option<Lease>>> {
        // A key asked twice in one batch is granted at most once.
        let mut seen = HashSet::new();
        let unique: Vec<&LockRequest> = requests
            .iter()
            .filter(|r| seen.insert(r.key.as_str()))
            .collect();
        let t = &self.table;
        let rows: Vec<Granted> = sqlx::query_as(AssertSqlSafe(format!(
            "INSERT INTO {t} AS l (key, owner, token, expires_at)
             SELECT k, $2, 1, {NOW_MS} + ttl FROM UNNEST($1::text[], $3::int8[]) AS r(k, ttl) ORDER BY k
             ON CONFLICT (key) DO UPDATE SET owner = EXCLUDED.owner, token = l.token + 1, expires_at = EXCLUDED.expires_at
             WHERE l.expires_at <= {NOW_MS}
             RETURNING key, token, expires_at"
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

    async fn renew(&self, leases: &[Lease], ttl: Duration) -> Result<Vec<Option<Lease>>> {
        let rows: Vec<(String, String, i64, i64)> = sqlx::query_as(AssertSqlSafe(format!(
            "WITH r AS (SELECT * FROM UNNEST($1::text[], $2::text[], $3::int8[]) AS r(k, o, tok)),
             {lock}
             UPDATE {t} l SET expires_at = {NOW_MS} + $4
             FROM r, locked
             WHERE l.key = locked.key AND l.key = r.k AND l.owner = r.o AND l.token = r.tok
               AND l.expires_at > {NOW_MS}
             RETURNING l.key, l.owner, l.token, l.expires_at",
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

    async fn release(&self, leases: &[Lease]) -> Result<Vec<bool>> {
        let rows: Vec<(String, String, i64)> = sqlx::query_as(AssertSqlSafe(format!(
            "WITH r AS (SELECT * FROM UNNEST($1::text[], $2::text[], $3::int8[]) AS r(k, o, tok)),
             {lock},
             hit AS (SELECT l.key, l.owner, l.token FROM {t} l JOIN locked ON l.key = locked.key
                     JOIN r ON l.key = r.k AND l.owner = r.o AND l.token = r.tok)
             UPDATE {t} l SET owner = NULL, expires_at = 0 FROM hit WHERE l.key = hit.key
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
}
