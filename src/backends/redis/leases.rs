//! [`JobLeases`] for [`RedisStore`] on one keyspace: each job's lease in the job's
//! hash (`lease_owner`, `lease_until`; the token is the hash's `token`), so a fire's
//! claim and its start are one script and its finish frees or keeps the lease (see
//! the scripts in `lease_scripts`). A sharded store keeps its leases in
//! [`RedisLocks`](super::RedisLocks) keys and offers none here.

use super::decode::{corrupt, parse_int};
use super::prepared::push_run;
use super::store::RedisStore;
use crate::error::Result;
use crate::lock::{Lease, LockRequest};
use crate::record::*;
use crate::store::JobLeases;
use crate::time::{Timestamp, duration_ms};
use async_trait::async_trait;
use std::time::Duration;

/// The refusal a claim script answers with, by its code.
fn refusal(code: &str, what: &'static str) -> Result<StartRefusal> {
    Ok(match code {
        "not_found" => StartRefusal::NotFound,
        "disabled" => StartRefusal::Disabled,
        "changed" => StartRefusal::Changed,
        "running" => StartRefusal::Running,
        "not_due" => StartRefusal::NotDue,
        "held" => StartRefusal::Held,
        other => return Err(corrupt(what, format!("unknown outcome {other:?}"))),
    })
}

/// `out` in groups of `per` values, one per item of `n`.
fn groups(out: Vec<String>, n: usize, per: usize, what: &'static str) -> Result<Vec<Vec<String>>> {
    if out.len() != n * per {
        return Err(corrupt(what, format!("{} values for {n} items", out.len())));
    }
    Ok(out.chunks(per).map(<[String]>::to_vec).collect())
}

#[async_trait]
impl JobLeases for RedisStore {
    fn home(&self) -> String {
        self.lease_home.as_deref().unwrap_or_default().to_string()
    }

    async fn claim_runs(&self, claims: &[ClaimRun], want: usize) -> Result<Vec<ClaimOutcome>> {
        if claims.is_empty() {
            return Ok(Vec::new());
        }
        let shard = self.home();
        let mut call = shard.call(&shard.scripts.claim);
        call.arg(want).arg(claims.len());
        for c in claims {
            call.arg(c.job_id.as_str())
                .arg(c.fire_at.as_millis())
                .arg(c.version);
            push_run(
                &mut call, &c.node, c.attempt, c.trigger, c.covers, &c.context,
            );
            call.arg(duration_ms(c.ttl).max(1));
        }
        let out: Vec<String> = shard.invoke(call, "claim_runs").await?;
        self.replicated(shard, "claim_runs").await;
        let w = "decode claim";
        groups(out, claims.len(), 5, w)?
            .into_iter()
            .zip(claims)
            .map(|(g, c)| {
                Ok(match g[0].as_str() {
                    "ok" => ClaimOutcome::Started {
                        run_id: RunId(parse_int(&g[1], w)?),
                        started_at: Timestamp::from_millis(parse_int(&g[2], w)?),
                        lease: Lease {
                            key: c.job_id.to_string(),
                            owner: c.node.clone(),
                            token: parse_int(&g[3], w)? as u64,
                            expires_at: Timestamp::from_millis(parse_int(&g[4], w)?),
                        },
                    },
                    "left" => ClaimOutcome::Left,
                    code => ClaimOutcome::Refused(refusal(code, w)?),
                })
            })
            .collect()
    }

    async fn acquire_jobs(
        &self,
        owner: &str,
        requests: &[LockRequest],
    ) -> Result<Vec<Option<Lease>>> {
        if requests.is_empty() {
            return Ok(Vec::new());
        }
        let shard = self.home();
        let mut call = shard.call(&shard.scripts.acquire_jobs);
        call.arg(owner).arg(requests.len());
        for r in requests {
            call.arg(&r.key).arg(duration_ms(r.ttl).max(1));
        }
        let out: Vec<String> = shard.invoke(call, "acquire").await?;
        let w = "decode acquire";
        groups(out, requests.len(), 3, w)?
            .into_iter()
            .zip(requests)
            .map(|(g, r)| {
                if g[0] != "ok" {
                    return Ok(None);
                }
                Ok(Some(Lease {
                    key: r.key.clone(),
                    owner: owner.to_string(),
                    token: parse_int(&g[1], w)? as u64,
                    expires_at: Timestamp::from_millis(parse_int(&g[2], w)?),
                }))
            })
            .collect()
    }

    async fn renew_jobs(&self, leases: &[Lease], ttl: Duration) -> Result<Vec<Option<Lease>>> {
        let out = self.renew_or_release(leases, Some(ttl), "renew").await?;
        let w = "decode renew";
        leases
            .iter()
            .zip(out)
            .map(|(l, until)| {
                if until.is_empty() {
                    return Ok(None);
                }
                Ok(Some(Lease {
                    expires_at: Timestamp::from_millis(parse_int(&until, w)?),
                    ..l.clone()
                }))
            })
            .collect()
    }

    async fn release_jobs(&self, leases: &[Lease]) -> Result<Vec<bool>> {
        let out = self.renew_or_release(leases, None, "release").await?;
        Ok(out.into_iter().map(|r| r == "ok").collect())
    }
}

impl RedisStore {
    /// One script renewing (`ttl`) or releasing (`None`) `leases`: per lease its new
    /// expiry or `ok`, or '' when it was not held.
    async fn renew_or_release(
        &self,
        leases: &[Lease],
        ttl: Option<Duration>,
        operation: &'static str,
    ) -> Result<Vec<String>> {
        if leases.is_empty() {
            return Ok(Vec::new());
        }
        let shard = self.home();
        let mut call = shard.call(&shard.scripts.renew_or_release_jobs);
        call.arg(ttl.map_or(String::new(), |t| duration_ms(t).max(1).to_string()))
            .arg(leases.len());
        for l in leases {
            call.arg(&l.key).arg(&l.owner).arg(l.token);
        }
        let out: Vec<String> = shard.invoke(call, operation).await?;
        let out = groups(out, leases.len(), 1, "decode leases")?;
        Ok(out.into_iter().flatten().collect())
    }
}
