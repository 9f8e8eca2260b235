use super::{NOW_MS, check_prefix, db_err, marks, retrying, values};
use crate::error::Result;
use crate::lock::{Lease, LockProvider, LockRequest};
use crate::time::{Timestamp, duration_ms};
use async_trait::async_trait;
use sqlx::mysql::MySqlPool;
use sqlx::{AssertSqlSafe, MySql, Transaction};
use std::collections::HashMap;
use std::time::Duration;

/// Row leases in a MySQL/MariaDB table (ShedLock-style): `owner`, `expires_at` and a
/// fencing `token` bumped in the transaction that grants the lock. A key's row (and
/// its token) stays after release, so tokens never repeat. Each batched call is one
/// transaction with a fixed number of statements; a deadlock between concurrent
/// callers is retried. Usable with any store; the table is created by
/// [`MySqlStore::migrate`](super::MySqlStore::migrate) with the same prefix.
#[derive(Debug, Clone)]
pub struct MySqlLocks {
    pool: MySqlPool,
    table: String,
}

/// The server's now, in epoch milliseconds.
async fn now_in(tx: &mut Transaction<'static, MySql>, op: &'static str) -> Result<i64> {
    sqlx::query_scalar(AssertSqlSafe(format!("SELECT {NOW_MS}")))
        .fetch_one(&mut **tx)
        .await
        .map_err(db_err(op))
}

/// A locked row: owner, token, expiry.
type Row = (Option<String>, i64, i64);

impl MySqlLocks {
    /// Leases in `<prefix>locks` on `pool`. Errors when `prefix` is not a valid
    /// table prefix (use the store's).
    pub fn new(pool: MySqlPool, prefix: &str) -> Result<Self> {
        check_prefix(prefix)?;
        Ok(MySqlLocks {
            pool,
            table: format!("{prefix}locks"),
        })
    }

    /// Locks the rows of `keys` (in key order) and reads them with the server's now.
    async fn lock_rows(
        &self,
        tx: &mut Transaction<'static, MySql>,
        keys: &[&str],
        op: &'static str,
    ) -> Result<(i64, HashMap<String, Row>)> {
        let now = now_in(tx, op).await?;
        Ok((now, self.read_rows(tx, keys, "FOR UPDATE", op).await?))
    }

    /// The rows of `keys`, read with `lock` (`FOR UPDATE`, or empty for rows this
    /// transaction has already written).
    async fn read_rows(
        &self,
        tx: &mut Transaction<'static, MySql>,
        keys: &[&str],
        lock: &'static str,
        op: &'static str,
    ) -> Result<HashMap<String, Row>> {
        let mut q = sqlx::query_as::<_, (String, Option<String>, i64, i64)>(AssertSqlSafe(
            format!(
                "SELECT lock_key, owner, token, expires_at FROM {} WHERE lock_key IN ({}) ORDER BY lock_key {lock}",
                self.table,
                marks(keys.len())
            ),
        ));
        for k in keys {
            q = q.bind(*k);
        }
        let rows = q.fetch_all(&mut **tx).await.map_err(db_err(op))?;
        Ok(rows
            .into_iter()
            .map(|(k, o, t, e)| (k, (o, t, e)))
            .collect())
    }

    /// Writes `(key, owner, token, expires_at)` for each row in one statement.
    async fn write_rows(
        &self,
        tx: &mut Transaction<'static, MySql>,
        rows: &[(String, Option<String>, i64, i64)],
        op: &'static str,
    ) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        let sql = format!(
            "UPDATE {} l JOIN {} ON l.lock_key = v.k
             SET l.owner = v.o, l.token = v.t, l.expires_at = v.e",
            self.table,
            values(&["k", "o", "t", "e"], rows.len())
        );
        let mut q = sqlx::query(AssertSqlSafe(sql));
        for (k, o, t, e) in rows {
            q = q.bind(k).bind(o.clone()).bind(*t).bind(*e);
        }
        q.execute(&mut **tx).await.map_err(db_err(op))?;
        Ok(())
    }
}

#[async_trait]
impl LockProvider for MySqlLocks {
    fn name(&self) -> &'static str {
        super::NAME
    }

    async fn acquire(&self, owner: &str, requests: &[LockRequest]) -> Result<Vec<Option<Lease>>> {
        if requests.is_empty() {
            return Ok(Vec::new());
        }
        let op = "acquire";
        // One statement grants every free or expired key and creates missing ones, in
        // key order (the same row-lock order on every node); a read in the same
        // transaction tells which were granted. A key asked for twice is granted once.
        let mut keys: Vec<&str> = requests.iter().map(|r| r.key.as_str()).collect();
        keys.sort_unstable();
        keys.dedup();
        let ttl: HashMap<&str, i64> = requests
            .iter()
            .rev()
            .map(|r| (r.key.as_str(), duration_ms(r.ttl)))
            .collect();
        retrying(|| async {
            let mut tx = self.pool.begin().await.map_err(db_err(op))?;
            let now = now_in(&mut tx, op).await?;
            // The assignments run left to right: `expires_at` is the old value until
            // the last one.
            let sql = format!(
                "INSERT INTO {t} (lock_key, owner, token, expires_at) VALUES {}
                 ON DUPLICATE KEY UPDATE
                   token = IF(expires_at <= ?, token + 1, token),
                   owner = IF(expires_at <= ?, VALUES(owner), owner),
                   expires_at = IF(expires_at <= ?, VALUES(expires_at), expires_at)",
                vec!["(?, ?, 1, ?)"; keys.len()].join(", "),
                t = self.table,
            );
            let mut q = sqlx::query(AssertSqlSafe(sql));
            for k in &keys {
                q = q.bind(*k).bind(owner).bind(now + ttl[k]);
            }
            q.bind(now)
                .bind(now)
                .bind(now)
                .execute(&mut *tx)
                .await
                .map_err(db_err(op))?;
            let mut rows = self.read_rows(&mut tx, &keys, "", op).await?;
            tx.commit().await.map_err(db_err(op))?;
            // Granted now: ours, expiring exactly at this grant's instant.
            Ok(requests
                .iter()
                .map(|r| {
                    let (o, token, expires) = rows.remove(r.key.as_str())?;
                    (o.as_deref() == Some(owner) && expires == now + ttl[r.key.as_str()]).then(
                        || Lease {
                            key: r.key.clone(),
                            owner: owner.to_string(),
                            token: token as u64,
                            expires_at: Timestamp::from_millis(expires),
                        },
                    )
                })
                .collect())
        })
        .await
    }

    async fn renew(&self, leases: &[Lease], ttl: Duration) -> Result<Vec<Option<Lease>>> {
        if leases.is_empty() {
            return Ok(Vec::new());
        }
        let op = "renew";
        retrying(|| async {
            let mut tx = self.pool.begin().await.map_err(db_err(op))?;
            let keys: Vec<&str> = leases.iter().map(|l| l.key.as_str()).collect();
            let (now, mut rows) = self.lock_rows(&mut tx, &keys, op).await?;
            let mut writes = Vec::new();
            let mut out = Vec::with_capacity(leases.len());
            for l in leases {
                let renewed = match rows.get_mut(&l.key) {
                    Some(row)
                        if row.0.as_deref() == Some(l.owner.as_str())
                            && row.1 == l.token as i64
                            && row.2 > now =>
                    {
                        row.2 = now + duration_ms(ttl);
                        writes.push((l.key.clone(), row.0.clone(), row.1, row.2));
                        Some(Lease {
                            expires_at: Timestamp::from_millis(row.2),
                            ..l.clone()
                        })
                    }
                    _ => None,
                };
                out.push(renewed);
            }
            self.write_rows(&mut tx, &writes, op).await?;
            tx.commit().await.map_err(db_err(op))?;
            Ok(out)
        })
        .await
    }

    async fn release(&self, leases: &[Lease]) -> Result<Vec<bool>> {
        if leases.is_empty() {
            return Ok(Vec::new());
        }
        let op = "release";
        retrying(|| async {
            let mut tx = self.pool.begin().await.map_err(db_err(op))?;
            let keys: Vec<&str> = leases.iter().map(|l| l.key.as_str()).collect();
            let (_, mut rows) = self.lock_rows(&mut tx, &keys, op).await?;
            let mut writes = Vec::new();
            let mut out = Vec::with_capacity(leases.len());
            for l in leases {
                let released = match rows.get_mut(&l.key) {
                    Some(row)
                        if row.0.as_deref() == Some(l.owner.as_str())
                            && row.1 == l.token as i64 =>
                    {
                        row.0 = None;
                        row.2 = 0;
                        writes.push((l.key.clone(), None, row.1, 0));
                        true
                    }
                    _ => false,
                };
                out.push(released);
            }
            self.write_rows(&mut tx, &writes, op).await?;
            tx.commit().await.map_err(db_err(op))?;
            Ok(out)
        })
        .await
    }
}
