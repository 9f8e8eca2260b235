//! [`JobLeases`] for [`MemoryStore`]: each job's lease kept with the job, under the
//! store's one lock, its token the job's `last_token`.

use super::latency::{answer, delay};
use super::store::MemoryStore;
use crate::error::Result;
use crate::lock::{Lease, LockRequest};
use crate::record::*;
use crate::store::JobLeases;
use crate::store::rules::{self, JobState};
use crate::time::Timestamp;
use async_trait::async_trait;
use std::time::Duration;

/// An instant in microseconds, as lease tokens count.
fn micros(t: Timestamp) -> u64 {
    u64::try_from(t.as_millis())
        .unwrap_or(0)
        .saturating_mul(1000)
}

#[async_trait]
impl JobLeases for MemoryStore {
    fn home(&self) -> String {
        self.home_name()
    }

    async fn claim_runs(&self, claims: &[ClaimRun], want: usize) -> Result<Vec<ClaimOutcome>> {
        delay(&self.latency, claims.len()).await;
        let now = self.clock.now();
        let mut inner = self.inner();
        let mut fresh = Vec::new();
        let mut claimed = 0;
        let out = claims
            .iter()
            .map(|c| {
                let state = inner.jobs.get(&c.job_id).map(JobState::from);
                let free = inner
                    .leases
                    .get(&c.job_id)
                    .is_none_or(|(_, until)| *until <= now);
                if let Err(why) = rules::claim(state.as_ref(), free, c) {
                    return ClaimOutcome::Refused(why);
                }
                if claimed >= want {
                    return ClaimOutcome::Left;
                }
                claimed += 1;
                let last = state.map_or(0, |s| s.last_token);
                let token = rules::grant_token(last, micros(now));
                match inner.start(&c.start(token), now, &mut fresh) {
                    StartOutcome::Started { run_id, started_at } => {
                        let expires_at = now + c.ttl;
                        inner
                            .leases
                            .insert(c.job_id.clone(), (c.node.clone(), expires_at));
                        ClaimOutcome::Started {
                            run_id,
                            started_at,
                            lease: Lease {
                                key: c.job_id.to_string(),
                                owner: c.node.clone(),
                                token,
                                expires_at,
                            },
                        }
                    }
                    StartOutcome::Refused(why) => ClaimOutcome::Refused(why),
                }
            })
            .collect();
        drop(inner);
        answer(&self.latency, "claim_runs")?;
        Ok(out)
    }

    async fn acquire_jobs(
        &self,
        owner: &str,
        requests: &[LockRequest],
    ) -> Result<Vec<Option<Lease>>> {
        delay(&self.latency, requests.len()).await;
        let now = self.clock.now();
        let mut inner = self.inner();
        Ok(requests
            .iter()
            .map(|r| {
                let id = crate::job::JobId::new(&r.key).ok();
                let expires_at = now + r.ttl;
                let lease = |token| Lease {
                    key: r.key.clone(),
                    owner: owner.to_string(),
                    token,
                    expires_at,
                };
                let Some(id) = id.filter(|id| inner.jobs.contains_key(id)) else {
                    // No job: nothing to exclude.
                    return Some(lease(micros(now)));
                };
                if inner.leases.get(&id).is_some_and(|(_, u)| *u > now) {
                    return None;
                }
                let token = inner
                    .with_job(&id, |j| {
                        j.last_token = rules::grant_token(j.last_token, micros(now));
                        j.last_token
                    })
                    .unwrap_or(0);
                inner.leases.insert(id, (owner.to_string(), expires_at));
                Some(lease(token))
            })
            .collect())
    }

    async fn renew_jobs(&self, leases: &[Lease], ttl: Duration) -> Result<Vec<Option<Lease>>> {
        delay(&self.latency, leases.len()).await;
        let now = self.clock.now();
        let mut inner = self.inner();
        Ok(leases
            .iter()
            .map(|l| {
                let Some(id) = crate::job::JobId::new(&l.key)
                    .ok()
                    .filter(|id| inner.jobs.contains_key(id))
                else {
                    // A removed job's lease excludes nothing; its run goes on.
                    return Some(Lease {
                        expires_at: now + ttl,
                        ..l.clone()
                    });
                };
                let token = inner.jobs.get(&id).map_or(0, |j| j.last_token);
                match inner.leases.get_mut(&id) {
                    Some((owner, until))
                        if *owner == l.owner && token == l.token && *until > now =>
                    {
                        *until = now + ttl;
                        Some(Lease {
                            expires_at: *until,
                            ..l.clone()
                        })
                    }
                    _ => None,
                }
            })
            .collect())
    }

    async fn release_jobs(&self, leases: &[Lease]) -> Result<Vec<bool>> {
        delay(&self.latency, leases.len()).await;
        let mut inner = self.inner();
        Ok(leases
            .iter()
            .map(|l| {
                let Some(id) = crate::job::JobId::new(&l.key)
                    .ok()
                    .filter(|id| inner.jobs.contains_key(id))
                else {
                    return true;
                };
                let token = inner.jobs.get(&id).map_or(0, |j| j.last_token);
                let held = token == l.token
                    && inner
                        .leases
                        .get(&id)
                        .is_some_and(|(owner, _)| *owner == l.owner);
                if held {
                    inner.leases.remove(&id);
                }
                held
            })
            .collect())
    }
}
