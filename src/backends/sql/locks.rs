//! Row leases in an SQL table (ShedLock-style), for every dialect: one row per key
//! with `owner`, `expires_at` and a fencing `token`. Each batched call is one
//! transaction with a fixed number of statements — lock the batch's rows in key order
//! with the server's clock (the same order on every node, so concurrent batches wait
//! for each other instead of deadlocking), create the missing rows and lock them too
//! (first grants only), decide in Rust, write with one joined `UPDATE` — retried when
//! it loses a deadlock. A key's row (and its token) stays
//! after release, so tokens never repeat.
//!
//! A grant's token is the server's clock in microseconds, or one more than the key's
//! previous token if that is larger: strictly increasing per key, and comparable with
//! the tokens of the Redis and in-process providers, so a deployment can change lock
//! provider without fencing its own jobs out.

// A PostgreSQL-only build uses its own statements, not the generic provider.
#![cfg_attr(not(any(feature = "sqlite", feature = "mysql")), allow(dead_code))]

use super::decode::SqlRow;
use super::{Dialect, Sql, marks, retrying};
use crate::error::Result;
use crate::lock::{Lease, LockRequest};
use crate::time::{Timestamp, duration_ms};
use std::collections::HashMap;
use std::time::Duration;

/// The requests of a batch with each key's first request only, in request order (a
/// key asked twice in one batch is granted at most once).
#[cfg(any(feature = "postgres", feature = "mysql"))]
pub(crate) fn distinct(requests: &[LockRequest]) -> Vec<&LockRequest> {
    let mut seen = std::collections::HashSet::new();
    requests
        .iter()
        .filter(|r| seen.insert(r.key.as_str()))
        .collect()
}

/// `older_than` in µs for a statement, at most a century (so the server's clock
/// minus it stays in range).
fn idle_micros(older_than: Duration) -> i64 {
    const CENTURY_US: u128 = 100 * 365 * 86_400 * 1_000_000;
    older_than.as_micros().min(CENTURY_US) as i64
}

/// A lease row: owner, token, expiry (epoch ms; 0 when released).
#[derive(Clone, Debug)]
struct Row {
    owner: Option<String>,
    token: i64,
    expires_at: i64,
}

/// Leases in `<prefix>locks` over a dialect.
#[derive(Clone, Debug)]
pub(crate) struct SqlLocks<D: Dialect> {
    pub(crate) d: D,
}

/// A lock provider built over a dialect (its pool and table names): the generic
/// [`SqlLocks`], or a dialect's own statements where they save round trips.
pub(crate) trait LocksOver<D>: Sized {
    /// The provider over `d`.
    fn over(d: D) -> Self;
}

impl<D: Dialect> LocksOver<D> for SqlLocks<D> {
    fn over(d: D) -> Self {
        SqlLocks { d }
    }
}

impl<D: Dialect> SqlLocks<D> {
    /// Where the leases live: the store's tables (see
    /// [`LockProvider::home`](crate::LockProvider::home)).
    pub(crate) fn home(&self) -> Option<String> {
        Some(self.d.home())
    }

    /// Reads and locks the rows of `keys` in key order, with the server's clock (ms
    /// and µs) in the same statement; the clock is `None` when no row exists.
    async fn read_rows(
        &self,
        tx: &mut D::Tx,
        op: &'static str,
        keys: &[&str],
        rows: &mut HashMap<String, Row>,
    ) -> Result<Option<(i64, i64)>> {
        let (d, key) = (&self.d, D::LOCK_KEY);
        let mut read = Sql::new(format!(
            "SELECT {key} AS k, owner, token, expires_at, {} AS now, {} AS now_us FROM {} WHERE {key} IN ({}) ORDER BY {key}{}",
            D::NOW_MS,
            D::NOW_US,
            d.t("locks"),
            marks(keys.len()),
            D::FOR_UPDATE
        ));
        read.args.extend(keys.iter().map(|k| (*k).into()));
        let e = |err| d.err(op, err);
        let mut clock = None;
        for r in d.fetch_in(tx, op, read).await? {
            clock = Some((r.int("now").map_err(e)?, r.int("now_us").map_err(e)?));
            rows.insert(
                r.text("k").map_err(e)?,
                Row {
                    owner: r.opt_text("owner").map_err(e)?,
                    token: r.int("token").map_err(e)?,
                    expires_at: r.int("expires_at").map_err(e)?,
                },
            );
        }
        Ok(clock)
    }

    /// Opens a transaction and locks and reads the rows of `keys` in key order, with
    /// the server's clock (ms and µs). When `create`, rows missing for some keys are
    /// inserted first and read in a second statement; when every row exists (the
    /// steady state) the call is three round trips besides `BEGIN`: read, write,
    /// commit.
    async fn lock_rows(
        &self,
        op: &'static str,
        keys: &[&str],
        create: bool,
    ) -> Result<(D::Tx, i64, i64, HashMap<String, Row>)> {
        let d = &self.d;
        let mut tx = d.begin(op).await?;
        let mut rows = HashMap::new();
        let mut clock = self.read_rows(&mut tx, op, keys, &mut rows).await?;
        let missing: Vec<&str> = keys
            .iter()
            .copied()
            .filter(|k| !rows.contains_key(*k))
            .collect();
        if create && !missing.is_empty() {
            let mut insert = Sql::new(format!(
                "{} {} ({}, owner, token, expires_at) VALUES {}{}",
                D::INSERT_IGNORE,
                d.t("locks"),
                D::LOCK_KEY,
                vec!["(?, NULL, 0, 0)"; missing.len()].join(", "),
                D::ON_CONFLICT_IGNORE
            ));
            insert.args.extend(missing.iter().map(|k| (*k).into()));
            d.exec_in(&mut tx, op, insert).await?;
            clock = self
                .read_rows(&mut tx, op, &missing, &mut rows)
                .await?
                .or(clock);
        }
        let (now, now_us) = match clock {
            Some(c) => c,
            None => {
                let q = Sql::new(format!(
                    "SELECT {} AS now, {} AS now_us",
                    D::NOW_MS,
                    D::NOW_US
                ));
                let row = d.fetch_in(&mut tx, op, q).await?;
                let e = |err| d.err(op, err);
                let r = row
                    .first()
                    .ok_or_else(|| crate::error::Error::backend(D::NAME, op, false, "no clock"))?;
                (r.int("now").map_err(e)?, r.int("now_us").map_err(e)?)
            }
        };
        Ok((tx, now, now_us, rows))
    }

    /// Writes the rows of `writes` in one joined `UPDATE` and commits.
    async fn write_rows(
        &self,
        mut tx: D::Tx,
        op: &'static str,
        writes: &[(String, Row)],
    ) -> Result<()> {
        let d = &self.d;
        if !writes.is_empty() {
            let mut q = Sql::new(d.update_from(
                &d.t("locks"),
                D::LOCK_KEY,
                "owner = v.o, token = v.t, expires_at = v.e",
                &d.values(&["id", "o", "t", "e"], writes.len()),
            ));
            for (k, r) in writes {
                q = q
                    .bind(k.as_str())
                    .bind(r.owner.clone())
                    .bind(r.token)
                    .bind(r.expires_at);
            }
            d.exec_in(&mut tx, op, q).await?;
        }
        d.commit(tx, op).await
    }

    /// Grants every requested key that is free or expired to `owner` (SQLite's
    /// locks; PostgreSQL and MariaDB have statements of their own).
    #[cfg(feature = "sqlite")]
    pub(crate) async fn acquire(
        &self,
        owner: &str,
        requests: &[LockRequest],
    ) -> Result<Vec<Option<Lease>>> {
        if requests.is_empty() {
            return Ok(Vec::new());
        }
        let op = "acquire";
        let mut keys: Vec<&str> = requests.iter().map(|r| r.key.as_str()).collect();
        keys.sort_unstable();
        keys.dedup();
        retrying(|| async {
            let (tx, now, now_us, mut rows) = self.lock_rows(op, &keys, true).await?;
            let mut writes = Vec::new();
            let mut out = Vec::with_capacity(requests.len());
            for r in requests {
                let grant = match rows.get_mut(r.key.as_str()) {
                    Some(row) if row.expires_at <= now => {
                        *row = Row {
                            owner: Some(owner.to_string()),
                            token: (row.token + 1).max(now_us),
                            expires_at: now + duration_ms(r.ttl),
                        };
                        writes.push((r.key.clone(), row.clone()));
                        Some(Lease {
                            key: r.key.clone(),
                            owner: owner.to_string(),
                            token: row.token as u64,
                            expires_at: Timestamp::from_millis(row.expires_at),
                        })
                    }
                    _ => None,
                };
                out.push(grant);
            }
            self.write_rows(tx, op, &writes).await?;
            Ok(out)
        })
        .await
    }

    /// Extends each lease still held by its owner with its token.
    pub(crate) async fn renew(
        &self,
        leases: &[Lease],
        ttl: Duration,
    ) -> Result<Vec<Option<Lease>>> {
        self.update(leases, "renew", |row, l, now| {
            (row.owner.as_deref() == Some(l.owner.as_str())
                && row.token == l.token as i64
                && row.expires_at > now)
                .then(|| {
                    row.expires_at = now + duration_ms(ttl);
                    Lease {
                        expires_at: Timestamp::from_millis(row.expires_at),
                        ..l.clone()
                    }
                })
        })
        .await
    }

    /// Frees each lease still held by its owner with its token.
    pub(crate) async fn release(&self, leases: &[Lease]) -> Result<Vec<bool>> {
        let out = self
            .update(leases, "release", |row, l, _| {
                (row.owner.as_deref() == Some(l.owner.as_str()) && row.token == l.token as i64)
                    .then(|| {
                        row.owner = None;
                        row.expires_at = 0;
                    })
            })
            .await?;
        Ok(out.into_iter().map(|o| o.is_some()).collect())
    }

    /// Deletes the rows nobody holds whose last grant is older than `older_than`
    /// ([`LockProvider::forget_idle`](crate::LockProvider::forget_idle)); the token is
    /// the grant's µs, so the row's token says when.
    pub(crate) async fn forget_idle(&self, older_than: Duration) -> Result<u64> {
        let d = &self.d;
        let q = Sql::new(format!(
            "DELETE FROM {} WHERE expires_at <= {} AND token < {} - ?",
            d.t("locks"),
            D::NOW_MS,
            D::NOW_US
        ))
        .bind(idle_micros(older_than));
        d.exec("forget_idle", q).await
    }

    /// Locks the leases' rows and applies `f` to each: a row it answers `Some` for was
    /// changed and is written back; `None` leaves it alone.
    async fn update<T>(
        &self,
        leases: &[Lease],
        op: &'static str,
        f: impl Fn(&mut Row, &Lease, i64) -> Option<T> + Sync,
    ) -> Result<Vec<Option<T>>>
    where
        T: Send,
    {
        if leases.is_empty() {
            return Ok(Vec::new());
        }
        let mut keys: Vec<&str> = leases.iter().map(|l| l.key.as_str()).collect();
        keys.sort_unstable();
        keys.dedup();
        retrying(|| async {
            let (tx, now, _, mut rows) = self.lock_rows(op, &keys, false).await?;
            let mut writes = Vec::new();
            let mut out = Vec::with_capacity(leases.len());
            for l in leases {
                let answer = rows.get_mut(&l.key).and_then(|row| {
                    let a = f(row, l, now)?;
                    writes.push((l.key.clone(), row.clone()));
                    Some(a)
                });
                out.push(answer);
            }
            self.write_rows(tx, op, &writes).await?;
            Ok(out)
        })
        .await
    }
}
