use super::{NOW_MS, check_prefix, db_err};
use crate::error::Result;
use crate::lock::{Lease, LockProvider, LockRequest};
use crate::time::{Timestamp, duration_ms};
use async_trait::async_trait;
use sqlx::sqlite::SqlitePool;
use std::time::Duration;

/// Row leases in a SQLite table (ShedLock-style): `owner`, `expires_at` and a
/// fencing `token` bumped in the same statement that grants the lock. The token row
/// stays after release, so tokens never repeat. Usable with any store; the table is
/// created by [`SqliteStore::migrate`](super::SqliteStore::migrate) with the same prefix.
#[derive(Debug, Clone)]
pub struct SqliteLocks {
    pool: SqlitePool,
    table: String,
}

impl SqliteLocks {
    /// Leases in `<prefix>locks` on `pool`. Errors when `prefix` is not a valid
    /// table prefix (use the store's).
    pub fn new(pool: SqlitePool, prefix: &str) -> Result<Self> {
        check_prefix(prefix)?;
        Ok(SqliteLocks {
            pool,
            table: format!("{prefix}locks"),
        })
    }
}

#[async_trait]
impl LockProvider for SqliteLocks {
    fn name(&self) -> &'static str {
        super::NAME
    }

    async fn acquire(&self, owner: &str, requests: &[LockRequest]) -> Result<Vec<Option<Lease>>> {
        let op = "acquire";
        let mut tx = self
            .pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(db_err(op))?;
        let sql = format!(
            "INSERT INTO {t} (key, owner, token, expires_at) VALUES (?, ?, 1, {NOW_MS} + ?)
             ON CONFLICT (key) DO UPDATE SET owner = excluded.owner, token = {t}.token + 1, expires_at = excluded.expires_at
             WHERE {t}.expires_at <= {NOW_MS}
             RETURNING token, expires_at",
            t = self.table
        );
        let mut out = Vec::with_capacity(requests.len());
        for r in requests {
            let row: Option<(i64, i64)> = sqlx::query_as(sqlx::AssertSqlSafe(sql.clone()))
                .bind(&r.key)
                .bind(owner)
                .bind(duration_ms(r.ttl))
                .fetch_optional(&mut *tx)
                .await
                .map_err(db_err(op))?;
            out.push(row.map(|(token, expires)| Lease {
                key: r.key.clone(),
                owner: owner.to_string(),
                token: token as u64,
                expires_at: Timestamp::from_millis(expires),
            }));
        }
        tx.commit().await.map_err(db_err(op))?;
        Ok(out)
    }

    async fn renew(&self, leases: &[Lease], ttl: Duration) -> Result<Vec<Option<Lease>>> {
        let op = "renew";
        let mut tx = self
            .pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(db_err(op))?;
        let sql = format!(
            "UPDATE {} SET expires_at = {NOW_MS} + ? WHERE key = ? AND owner = ? AND token = ? AND expires_at > {NOW_MS}
             RETURNING expires_at",
            self.table
        );
        let mut out = Vec::with_capacity(leases.len());
        for l in leases {
            let expires: Option<i64> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql.clone()))
                .bind(duration_ms(ttl))
                .bind(&l.key)
                .bind(&l.owner)
                .bind(l.token as i64)
                .fetch_optional(&mut *tx)
                .await
                .map_err(db_err(op))?;
            out.push(expires.map(|e| Lease {
                expires_at: Timestamp::from_millis(e),
                ..l.clone()
            }));
        }
        tx.commit().await.map_err(db_err(op))?;
        Ok(out)
    }

    async fn release(&self, leases: &[Lease]) -> Result<Vec<bool>> {
        let op = "release";
        let mut tx = self
            .pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(db_err(op))?;
        let sql = format!(
            "UPDATE {} SET owner = NULL, expires_at = 0 WHERE key = ? AND owner = ? AND token = ?",
            self.table
        );
        let mut out = Vec::with_capacity(leases.len());
        for l in leases {
            let r = sqlx::query(sqlx::AssertSqlSafe(sql.clone()))
                .bind(&l.key)
                .bind(&l.owner)
                .bind(l.token as i64)
                .execute(&mut *tx)
                .await
                .map_err(db_err(op))?;
            out.push(r.rows_affected() > 0);
        }
        tx.commit().await.map_err(db_err(op))?;
        Ok(out)
    }
}
