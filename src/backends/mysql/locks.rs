//! MariaDB's and MySQL's lease grant in one statement: every requested key inserted,
//! or on a duplicate key taken over only where its lease has expired
//! (`INSERT … ON DUPLICATE KEY UPDATE col = IF(expired, new, col)`), where the
//! generic [`SqlLocks`] grant holds the batch's rows over a transaction of six round
//! trips. Nodes polling the same due fires ask for the same (often new) keys at once;
//! with the rows held for one statement instead of a transaction, they wait for each
//! other for the length of a statement, and the duplicate key takes an exclusive lock
//! (never `INSERT IGNORE`'s shared one, which a later locked read has to upgrade — two
//! such upgrades deadlock). Renewal and release are the generic ones.
//!
//! The decisions are the generic ones: a grant takes a free or expired row; its token
//! is `max(previous + 1, server µs)`; its expiry the server's clock plus the ttl.
//!
//! [`SqlLocks`]: crate::backends::sql::locks::SqlLocks

use super::{MySqlDialect, db_err};
use crate::backends::sql::locks::{LocksOver, SqlLocks};
use crate::backends::sql::{Dialect, marks, retrying, value_rows};
use crate::error::Result;
use crate::lock::{Lease, LockRequest};
use crate::time::{Timestamp, duration_ms};
use sqlx::mysql::MySqlPool;
use sqlx::{AssertSqlSafe, Row};
use std::collections::HashMap;
use std::time::Duration;

/// Leases in one table: the grant in one statement, the rest generic.
#[derive(Clone, Debug)]
pub(crate) struct MySqlLockStatements {
    generic: SqlLocks<MySqlDialect>,
    pool: MySqlPool,
    table: String,
}

impl LocksOver<MySqlDialect> for MySqlLockStatements {
    fn over(d: MySqlDialect) -> Self {
        MySqlLockStatements {
            table: d.t("locks"),
            pool: d.pool.clone(),
            generic: SqlLocks::over(d),
        }
    }
}

impl MySqlLockStatements {
    /// Where the leases live: the store's tables (see
    /// [`LockProvider::home`](crate::LockProvider::home)).
    pub(crate) fn home(&self) -> Option<String> {
        self.generic.home()
    }

    /// Grants every requested key that is free or expired to `owner` (a key asked
    /// twice in one batch at most once): the server's clock read first, then one
    /// autocommitted `INSERT … ON DUPLICATE KEY UPDATE` of the batch in key order
    /// against that instant, then the rows read back. A row this call granted is
    /// `owner`'s, with a token at or past the instant's µs and the expiry the grant
    /// wrote; a lease the owner already held from an earlier grant has an older token.
    pub(crate) async fn acquire(
        &self,
        owner: &str,
        requests: &[LockRequest],
    ) -> Result<Vec<Option<Lease>>> {
        let mut unique = crate::backends::sql::locks::distinct(requests);
        if unique.is_empty() {
            return Ok(vec![None; requests.len()]);
        }
        unique.sort_unstable_by(|a, b| a.key.cmp(&b.key));
        let mut granted: HashMap<String, Lease> = retrying(|| self.grant(owner, &unique))
            .await?
            .into_iter()
            .map(|l| (l.key.clone(), l))
            .collect();
        Ok(requests.iter().map(|r| granted.remove(&r.key)).collect())
    }

    /// One try of [`acquire`](Self::acquire) over distinct keys in key order.
    async fn grant(&self, owner: &str, requests: &[&LockRequest]) -> Result<Vec<Lease>> {
        let op = "acquire";
        let clock = sqlx::query(AssertSqlSafe(format!(
            "SELECT CAST({} AS SIGNED) AS now, CAST({} AS SIGNED) AS now_us",
            <MySqlDialect as Dialect>::NOW_MS,
            <MySqlDialect as Dialect>::NOW_US
        )))
        .fetch_one(&self.pool)
        .await
        .map_err(db_err(op))?;
        let now: i64 = clock.try_get("now").map_err(db_err(op))?;
        let now_us: i64 = clock.try_get("now_us").map_err(db_err(op))?;
        let t = &self.table;
        // Assignments run left to right and see the values already assigned, so the
        // expiry that decides is changed last.
        let sql = format!(
            "INSERT INTO {t} (lock_key, owner, token, expires_at) VALUES {}
             ON DUPLICATE KEY UPDATE
               token = IF(expires_at <= ?, GREATEST(token + 1, VALUES(token)), token),
               owner = IF(expires_at <= ?, VALUES(owner), owner),
               expires_at = IF(expires_at <= ?, VALUES(expires_at), expires_at)",
            value_rows(4, requests.len())
        );
        let mut insert = sqlx::query(AssertSqlSafe(sql));
        for r in requests {
            insert = insert
                .bind(r.key.as_str())
                .bind(owner)
                .bind(now_us)
                .bind(now + duration_ms(r.ttl));
        }
        insert
            .bind(now)
            .bind(now)
            .bind(now)
            .execute(&self.pool)
            .await
            .map_err(db_err(op))?;
        let read = format!(
            "SELECT lock_key, owner, token, expires_at FROM {t} WHERE lock_key IN ({})",
            marks(requests.len())
        );
        let mut q = sqlx::query(AssertSqlSafe(read));
        for r in requests {
            q = q.bind(r.key.as_str());
        }
        let rows = q.fetch_all(&self.pool).await.map_err(db_err(op))?;
        let ttl: HashMap<&str, i64> = requests
            .iter()
            .map(|r| (r.key.as_str(), duration_ms(r.ttl)))
            .collect();
        let mut out = Vec::new();
        for row in rows {
            let key: String = row.try_get("lock_key").map_err(db_err(op))?;
            let holder: Option<String> = row.try_get("owner").map_err(db_err(op))?;
            let token: i64 = row.try_get("token").map_err(db_err(op))?;
            let expires: i64 = row.try_get("expires_at").map_err(db_err(op))?;
            let ours = holder.as_deref() == Some(owner)
                && token >= now_us
                && ttl.get(key.as_str()).is_some_and(|t| expires == now + t);
            if ours {
                out.push(Lease {
                    key,
                    owner: owner.to_string(),
                    token: token as u64,
                    expires_at: Timestamp::from_millis(expires),
                });
            }
        }
        Ok(out)
    }

    /// Extends each lease still held by its owner with its token.
    pub(crate) async fn renew(
        &self,
        leases: &[Lease],
        ttl: Duration,
    ) -> Result<Vec<Option<Lease>>> {
        self.generic.renew(leases, ttl).await
    }

    /// Frees each lease still held by its owner with its token.
    pub(crate) async fn release(&self, leases: &[Lease]) -> Result<Vec<bool>> {
        self.generic.release(leases).await
    }

    /// Deletes the rows nobody holds whose last grant is older than `older_than`.
    pub(crate) async fn forget_idle(&self, older_than: Duration) -> Result<u64> {
        self.generic.forget_idle(older_than).await
    }
}
