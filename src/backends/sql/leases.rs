//! [`JobLeases`] for [`SqlStore`]: each job's lease in its row (`lease_owner`,
//! `lease_until`, the token being `last_token`). The dialects without array
//! parameters (SQLite, MySQL) decide in Rust over rows locked in one transaction,
//! in a fixed number of statements; PostgreSQL has one statement per batch.

use super::batch::{self, JobRow};
use super::decode::SqlRow;
use super::running::{self, RowRun};
use super::{Dialect, Sql, SqlStore, marks, retrying};
use crate::error::Result;
use crate::lock::{Lease, LockRequest};
use crate::record::*;
use crate::store::JobLeases;
use crate::store::rules;
use crate::time::{Timestamp, duration_ms};
use async_trait::async_trait;
use std::collections::HashMap;
use std::time::Duration;

#[async_trait]
impl<D: Dialect> JobLeases for SqlStore<D> {
    fn home(&self) -> String {
        self.d.home()
    }

    async fn claim_runs(&self, claims: &[ClaimRun], want: usize) -> Result<Vec<ClaimOutcome>> {
        if claims.is_empty() {
            return Ok(Vec::new());
        }
        self.d.claim_runs(claims, want).await
    }

    async fn acquire_jobs(
        &self,
        owner: &str,
        requests: &[LockRequest],
    ) -> Result<Vec<Option<Lease>>> {
        if requests.is_empty() {
            return Ok(Vec::new());
        }
        self.d.acquire_jobs(owner, requests).await
    }

    async fn renew_jobs(&self, leases: &[Lease], ttl: Duration) -> Result<Vec<Option<Lease>>> {
        if leases.is_empty() {
            return Ok(Vec::new());
        }
        retrying(|| lease_write(&self.d, "renew", leases, Some(ttl))).await
    }

    async fn release_jobs(&self, leases: &[Lease]) -> Result<Vec<bool>> {
        if leases.is_empty() {
            return Ok(Vec::new());
        }
        let out = retrying(|| lease_write(&self.d, "release", leases, None)).await?;
        Ok(out.into_iter().map(|l| l.is_some()).collect())
    }
}

/// The store's clock in ms and µs, in `tx`.
async fn clock<D: Dialect>(d: &D, tx: &mut D::Tx, op: &'static str) -> Result<(i64, i64)> {
    let q = Sql::new(format!(
        "SELECT {} AS now, {} AS now_us",
        D::NOW_MS,
        D::NOW_US
    ));
    let rows = d.fetch_in(tx, op, q).await?;
    let e = |err| d.err(op, err);
    let r = rows
        .first()
        .ok_or_else(|| crate::error::Error::backend(D::NAME, op, false, "no clock"))?;
    Ok((r.int("now").map_err(e)?, r.int("now_us").map_err(e)?))
}

/// The lease columns of the job rows `ids`, locked in id order (`lock`: the
/// dialect's lock suffix), by id.
async fn lease_rows<D: Dialect>(
    d: &D,
    tx: &mut D::Tx,
    op: &'static str,
    ids: &[&str],
    lock: &str,
) -> Result<HashMap<String, (Option<String>, i64, i64)>> {
    let mut q = Sql::new(format!(
        "SELECT id, lease_owner, lease_until, last_token FROM {} WHERE id IN ({}) ORDER BY id{lock}",
        d.t("jobs"),
        marks(ids.len())
    ));
    q.args.extend(ids.iter().map(|id| (*id).into()));
    let e = |err| d.err(op, err);
    d.fetch_in(tx, op, q)
        .await?
        .iter()
        .map(|r| {
            Ok((
                r.text("id").map_err(e)?,
                (
                    r.opt_text("lease_owner").map_err(e)?,
                    r.int("lease_until").map_err(e)?,
                    r.int("last_token").map_err(e)?,
                ),
            ))
        })
        .collect()
}

/// Which of `ids` have a job row, read without a lock: a row a locked read skipped
/// exists but is being written by another call.
async fn existing<D: Dialect>(
    d: &D,
    tx: &mut D::Tx,
    op: &'static str,
    ids: &[&str],
) -> Result<std::collections::HashSet<String>> {
    if ids.is_empty() {
        return Ok(Default::default());
    }
    let mut q = Sql::new(format!(
        "SELECT id FROM {} WHERE id IN ({})",
        d.t("jobs"),
        marks(ids.len())
    ));
    q.args.extend(ids.iter().map(|id| (*id).into()));
    let e = |err| d.err(op, err);
    d.fetch_in(tx, op, q)
        .await?
        .iter()
        .map(|r| r.text("id").map_err(e))
        .collect()
}

/// [`JobLeases::claim_runs`] over rows locked in one transaction (skipping those
/// another call is writing), decided by [`rules::claim`].
pub(crate) async fn claim<D: Dialect>(
    d: &D,
    claims: &[ClaimRun],
    want: usize,
) -> Result<Vec<ClaimOutcome>> {
    retrying(|| claim_once(d, claims, want)).await
}

async fn claim_once<D: Dialect>(
    d: &D,
    claims: &[ClaimRun],
    want: usize,
) -> Result<Vec<ClaimOutcome>> {
    let op = "claim_runs";
    let mut tx = d.begin(op).await?;
    let (now, now_us) = clock(d, &mut tx, op).await?;
    let mut ids: Vec<&str> = claims.iter().map(|c| c.job_id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    let mut rows = batch::job_rows_locked(d, &mut tx, op, &ids, D::SKIP_LOCKED).await?;
    let skipped: Vec<&str> = ids
        .iter()
        .copied()
        .filter(|id| !rows.contains_key(*id))
        .collect();
    let busy = existing(d, &mut tx, op, &skipped).await?;
    let mut out = Vec::with_capacity(claims.len());
    let mut started: Vec<(usize, RowRun)> = Vec::new();
    let mut until = Vec::new();
    let mut starts = Vec::new();
    for (i, c) in claims.iter().enumerate() {
        let Some(JobRow {
            state, lease_until, ..
        }) = rows.get_mut(c.job_id.as_str())
        else {
            out.push(Some(ClaimOutcome::Refused(
                if busy.contains(c.job_id.as_str()) {
                    StartRefusal::Held
                } else {
                    StartRefusal::NotFound
                },
            )));
            continue;
        };
        if let Err(why) = rules::claim(Some(state), *lease_until <= now, c) {
            out.push(Some(ClaimOutcome::Refused(why)));
            continue;
        }
        if started.len() >= want {
            out.push(Some(ClaimOutcome::Left));
            continue;
        }
        let token = rules::grant_token(state.last_token, now_us.max(0) as u64);
        state.running = Some(RunId(-1));
        state.last_token = token;
        *lease_until = now.saturating_add(duration_ms(c.ttl));
        starts.push(c.start(token));
        until.push(*lease_until);
        started.push((i, RowRun::of_start(0, starts.last().expect("pushed"), now)));
        out.push(None);
    }
    if !started.is_empty() {
        let new = running::new_ids(d, &mut tx, op, started.len(), now).await?;
        for ((_, run), id) in started.iter_mut().zip(new) {
            run.id = id;
        }
        let order: Vec<(usize, RowRun)> = started
            .iter()
            .enumerate()
            .map(|(k, (_, r))| (k, r.clone()))
            .collect();
        batch::write_runs(d, &mut tx, op, &order, &starts, Some(&until)).await?;
        for ((i, run), expires) in started.into_iter().zip(until) {
            out[i] = Some(ClaimOutcome::Started {
                run_id: RunId(run.id),
                started_at: Timestamp::from_millis(now),
                lease: Lease {
                    key: claims[i].job_id.to_string(),
                    owner: claims[i].node.clone(),
                    token: run.token as u64,
                    expires_at: Timestamp::from_millis(expires),
                },
            });
        }
    }
    d.commit(tx, op).await?;
    Ok(out
        .into_iter()
        .map(|o| o.expect("every claim decided"))
        .collect())
}

/// [`JobLeases::acquire_jobs`] over rows locked in one transaction (skipping those
/// another call is writing).
pub(crate) async fn acquire<D: Dialect>(
    d: &D,
    owner: &str,
    requests: &[LockRequest],
) -> Result<Vec<Option<Lease>>> {
    retrying(|| acquire_once(d, owner, requests)).await
}

async fn acquire_once<D: Dialect>(
    d: &D,
    owner: &str,
    requests: &[LockRequest],
) -> Result<Vec<Option<Lease>>> {
    let op = "acquire";
    let mut tx = d.begin(op).await?;
    let (now, now_us) = clock(d, &mut tx, op).await?;
    let mut ids: Vec<&str> = requests.iter().map(|r| r.key.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    let mut rows = lease_rows(d, &mut tx, op, &ids, D::SKIP_LOCKED).await?;
    let skipped: Vec<&str> = ids
        .iter()
        .copied()
        .filter(|id| !rows.contains_key(*id))
        .collect();
    let busy = existing(d, &mut tx, op, &skipped).await?;
    let mut out = Vec::with_capacity(requests.len());
    let mut writes: Vec<(&str, i64, i64)> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for r in requests {
        let lease = |token: i64, until: i64| Lease {
            key: r.key.clone(),
            owner: owner.to_string(),
            token: token as u64,
            expires_at: Timestamp::from_millis(until),
        };
        let until = now.saturating_add(duration_ms(r.ttl));
        if !seen.insert(r.key.as_str()) {
            out.push(None);
            continue;
        }
        match rows.get_mut(r.key.as_str()) {
            // No job: nothing to exclude (see the contract).
            None if !busy.contains(r.key.as_str()) => out.push(Some(lease(now_us, until))),
            None => out.push(None),
            Some((_, lease_until, _)) if *lease_until > now => out.push(None),
            Some((_, lease_until, last)) => {
                let token = rules::grant_token(*last as u64, now_us.max(0) as u64) as i64;
                *lease_until = until;
                *last = token;
                writes.push((r.key.as_str(), token, until));
                out.push(Some(lease(token, until)));
            }
        }
    }
    if !writes.is_empty() {
        let mut q = Sql::new(d.update_from(
            &d.t("jobs"),
            "id",
            "last_token = v.t, lease_owner = v.o, lease_until = v.lu",
            &d.values(&["id", "t", "o", "lu"], writes.len()),
        ));
        for (id, token, until) in &writes {
            q = q.bind(*id).bind(*token).bind(owner).bind(*until);
        }
        d.exec_in(&mut tx, op, q).await?;
    }
    d.commit(tx, op).await?;
    Ok(out)
}

/// Renews (`ttl`) or releases (`None`) the leases still held by their owners with
/// their tokens (a renewal only while unexpired), in one transaction; the lease as
/// it is after, for each one that was. A lease on a job that no longer exists is
/// kept as it was (it excludes nothing; a removed job's run still finishes).
async fn lease_write<D: Dialect>(
    d: &D,
    op: &'static str,
    leases: &[Lease],
    ttl: Option<Duration>,
) -> Result<Vec<Option<Lease>>> {
    let mut tx = d.begin(op).await?;
    let (now, _) = clock(d, &mut tx, op).await?;
    let mut ids: Vec<&str> = leases.iter().map(|l| l.key.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    let mut rows = lease_rows(d, &mut tx, op, &ids, D::FOR_UPDATE).await?;
    let mut out = Vec::with_capacity(leases.len());
    let mut writes: Vec<(&str, Option<&str>, i64)> = Vec::new();
    for l in leases {
        let Some((owner, until, last)) = rows.get_mut(l.key.as_str()) else {
            out.push(Some(match ttl {
                Some(t) => Lease {
                    expires_at: Timestamp::from_millis(now.saturating_add(duration_ms(t))),
                    ..l.clone()
                },
                None => l.clone(),
            }));
            continue;
        };
        let held = owner.as_deref() == Some(l.owner.as_str()) && *last == l.token as i64;
        match ttl {
            Some(t) if held && *until > now => {
                *until = now.saturating_add(duration_ms(t));
                writes.push((l.key.as_str(), Some(l.owner.as_str()), *until));
                out.push(Some(Lease {
                    expires_at: Timestamp::from_millis(*until),
                    ..l.clone()
                }));
            }
            None if held => {
                *owner = None;
                *until = 0;
                writes.push((l.key.as_str(), None, 0));
                out.push(Some(l.clone()));
            }
            _ => out.push(None),
        }
    }
    if !writes.is_empty() {
        let mut q = Sql::new(d.update_from(
            &d.t("jobs"),
            "id",
            "lease_owner = v.o, lease_until = v.lu",
            &d.values(&["id", "o", "lu"], writes.len()),
        ));
        for (id, owner, until) in &writes {
            q = q.bind(*id).bind(owner.map(str::to_string)).bind(*until);
        }
        d.exec_in(&mut tx, op, q).await?;
    }
    d.commit(tx, op).await?;
    Ok(out)
}
