//! [`Jobs`] on [`RedisStore`]: each call on a job goes to the job's shard; batches
//! are split by shard and sent at once; reads over every job merge the shards' pages
//! in the contract's order.

use super::shard::{Routed, Shard};
use super::store::RedisStore;
use crate::error::Result;
use crate::job::{Job, JobId};
use crate::record::*;
use crate::store::{Applied, CorruptRow, DueQuery, JobChange, JobQuery, Jobs, Page};
use crate::time::Timestamp;
use async_trait::async_trait;
use std::future::Future;

impl RedisStore {
    /// `f` on every shard at once; the results in shard order.
    pub(super) async fn each<'a, T, F, Fut>(&'a self, f: F) -> Result<Vec<T>>
    where
        F: Fn(&'a Shard) -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        futures::future::try_join_all(self.shards.iter().map(f)).await
    }

    /// The positions of `items` grouped by the shard `shard_of` gives each: one group
    /// per shard that has any, each in the items' order.
    pub(super) fn split<T>(
        &self,
        items: &[T],
        shard_of: impl Fn(&T) -> usize,
    ) -> Vec<(usize, Vec<usize>)> {
        let mut groups: Vec<Vec<usize>> = vec![Vec::new(); self.shards.len()];
        for (i, item) in items.iter().enumerate() {
            groups[shard_of(item)].push(i);
        }
        groups
            .into_iter()
            .enumerate()
            .filter(|(_, g)| !g.is_empty())
            .collect()
    }

    /// Runs `call` on each shard's share of `items` at once and puts the answers
    /// back in the items' order (each shard answers one per item, in order).
    async fn scatter<T: Clone + Sync, R, Fut>(
        &self,
        items: &[T],
        shard_of: impl Fn(&T) -> usize,
        call: impl Fn(usize, Vec<T>) -> Fut,
    ) -> Result<Vec<R>>
    where
        Fut: Future<Output = Result<Vec<R>>>,
    {
        let groups = self.split(items, shard_of);
        let calls = groups.iter().map(|(shard, positions)| {
            call(
                *shard,
                positions.iter().map(|&i| items[i].clone()).collect(),
            )
        });
        let answers = futures::future::try_join_all(calls).await?;
        let mut out: Vec<Option<R>> = (0..items.len()).map(|_| None).collect();
        for ((_, positions), answer) in groups.iter().zip(answers) {
            for (&i, r) in positions.iter().zip(answer) {
                out[i] = Some(r);
            }
        }
        out.into_iter()
            .map(|r| {
                r.ok_or_else(|| super::decode::corrupt("route", "a shard answered fewer items"))
            })
            .collect()
    }

    /// Finishes: each shard's share in one script, releases of jobs on other shards
    /// kept by the finish and delivered right after it.
    async fn finish_split(&self, runs: &[FinishRun]) -> Result<Vec<FinishOutcome>> {
        // By the run's shard, which is its job's. A finish that names a job on
        // another shard names the wrong job: it is refused here as the script would.
        let groups = self.split(runs, |f| self.id_index(f.run_id.0));
        let calls = groups.iter().map(|(shard, positions)| {
            let (positions, wrong): (Vec<usize>, Vec<usize>) = positions
                .iter()
                .partition(|&&i| self.shard_of(&runs[i].job_id) == *shard);
            let routed: Vec<Routed<'_>> = positions
                .iter()
                .map(|&i| {
                    let run = &runs[i];
                    let (mut local, mut remote) = (Vec::new(), Vec::new());
                    for r in &run.releases {
                        match self.shard_of(&r.job) {
                            s if s == *shard => local.push(r),
                            s => remote.push((s, r)),
                        }
                    }
                    Routed { run, local, remote }
                })
                .collect();
            let forwards = routed.iter().any(|r| !r.remote.is_empty());
            async move {
                let mut out: Vec<(usize, FinishOutcome)> = positions
                    .iter()
                    .copied()
                    .zip(self.shards[*shard].finish(&routed).await?)
                    .collect();
                self.replicated(&self.shards[*shard], "finish_runs").await;
                for i in wrong {
                    out.push((i, self.refuse_wrong_job(&runs[i]).await?));
                }
                if forwards {
                    // Delivered now; a failure leaves them for the next maintenance
                    // pass (the finish itself is done).
                    if let Err(e) = self.deliver(*shard).await {
                        tracing::warn!(error = %e, shard, "delivering releases to other shards failed; the next maintenance pass delivers them");
                    }
                }
                Ok::<_, crate::error::Error>(out)
            }
        });
        let answers = futures::future::try_join_all(calls).await?;
        let mut out: Vec<Option<FinishOutcome>> = vec![None; runs.len()];
        for (i, r) in answers.into_iter().flatten() {
            out[i] = Some(r);
        }
        out.into_iter()
            .map(|r| {
                r.ok_or_else(|| super::decode::corrupt("route", "a shard answered fewer items"))
            })
            .collect()
    }
}

impl RedisStore {
    /// The refusal of a finish naming a job on another shard than its run's (so not
    /// the run's job), in the finish script's order: no run, a run not running, else
    /// fenced with the named job's last token (the run's when the job is gone).
    async fn refuse_wrong_job(&self, f: &FinishRun) -> Result<FinishOutcome> {
        let run = self.id_shard(f.run_id.0);
        let (status, token): (Option<String>, Option<String>) = redis::cmd("HMGET")
            .arg(run.key(&format!("run:{}", f.run_id.0)))
            .arg("status")
            .arg("token")
            .query_async(&mut run.conn.clone())
            .await
            .map_err(super::redis_err("finish_runs"))?;
        let Some(status) = status else {
            return Ok(FinishOutcome::Refused(FinishRefusal::NotFound));
        };
        if status != "running" {
            return Ok(FinishOutcome::Refused(FinishRefusal::NotRunning));
        }
        let job = self.job_shard(&f.job_id);
        let named: Option<String> = redis::cmd("HGET")
            .arg(job.key(&format!("job:{}", f.job_id)))
            .arg("token")
            .query_async(&mut job.conn.clone())
            .await
            .map_err(super::redis_err("finish_runs"))?;
        let current = named.or(token).unwrap_or_default();
        Ok(FinishOutcome::Refused(FinishRefusal::Fenced {
            current: super::decode::parse_int(&current, "decode finish")? as u64,
        }))
    }
}

/// Rounds of shard pages one `due` reads at most before it answers with the
/// complete part of what it read.
const DUE_ROUNDS: usize = 8;

impl RedisStore {
    /// `due` over every shard: each shard is asked for about its share of the page
    /// (`limit / n` and a quarter more), and the pages are merged by `(fire_at, job
    /// id)`. The merge is complete up to the smallest last key of the shards that
    /// answered a full page (beyond it one of them may hold rows not read yet); while
    /// that is short of `limit`, the shards at that key are asked for their next
    /// page. So the answer is the first `limit` rows of the one due order, as one
    /// index would give them, without reading `limit` rows from every shard.
    async fn due_split(&self, query: &DueQuery) -> Result<Page<DueFire>> {
        type Key = (Timestamp, JobId);
        let ask = crate::limits::page(query.limit);
        let n = self.shards.len();
        let per = (ask.div_ceil(n) + ask.div_ceil(4 * n) + 8).min(ask);
        let mut pool: Vec<(Option<Key>, std::result::Result<DueFire, CorruptRow>)> = Vec::new();
        // Per shard: where its next page starts, and whether it may hold more.
        let mut cursor: Vec<Option<DueKey>> = vec![query.after.clone(); n];
        let mut more = vec![true; n];
        let mut fetch: Vec<usize> = (0..n).collect();
        let key_of = |k: &DueKey| (k.fire_at, k.job_id.clone());
        let mut cut: Option<Key> = None;
        for _ in 0..DUE_ROUNDS {
            let pages = futures::future::try_join_all(fetch.iter().map(|&i| {
                let q = DueQuery {
                    until: query.until,
                    after: cursor[i].clone(),
                    limit: per,
                };
                async move { self.shards[i].due(&q).await }
            }))
            .await?;
            for (&i, page) in fetch.iter().zip(pages) {
                let full = page.rows() >= per;
                let mut end: Option<Key> = None;
                for f in page.items {
                    let k = (f.fire.at, f.job_id.clone());
                    end = end.max(Some(k.clone()));
                    pool.push((Some(k), Ok(f)));
                }
                for c in page.corrupt {
                    let k = c.due_key.as_ref().map(key_of);
                    end = end.max(k.clone());
                    pool.push((k, Err(c)));
                }
                match end {
                    Some((fire_at, job_id)) if full => {
                        cursor[i] = Some(DueKey { fire_at, job_id });
                    }
                    _ => more[i] = false,
                }
            }
            cut = (0..n)
                .filter(|&i| more[i])
                .filter_map(|i| cursor[i].as_ref().map(key_of))
                .min();
            let Some(c) = &cut else { break };
            let complete = pool
                .iter()
                .filter(|(k, _)| k.as_ref().is_none_or(|k| k <= c))
                .count();
            if complete >= ask {
                break;
            }
            fetch = (0..n)
                .filter(|&i| more[i] && cursor[i].as_ref().map(key_of).as_ref() == Some(c))
                .collect();
        }
        if let Some(c) = &cut {
            pool.retain(|(k, _)| k.as_ref().is_none_or(|k| k <= c));
        }
        pool.sort_by(|a, b| a.0.cmp(&b.0));
        pool.truncate(ask);
        let mut page = Page::default();
        for (_, row) in pool {
            match row {
                Ok(f) => page.items.push(f),
                Err(c) => page.corrupt.push(c),
            }
        }
        Ok(page)
    }
}

/// Keeps the first `limit` of `rows` (items and corrupt rows, each with its sort
/// key; a corrupt row without one sorts first), in key order.
fn merged<T, K: Ord>(
    rows: Vec<Page<T>>,
    key: impl Fn(&T) -> K,
    corrupt_key: impl Fn(&CorruptRow) -> Option<K>,
    limit: usize,
) -> Page<T> {
    let mut all: Vec<(Option<K>, Result<T, CorruptRow>)> = Vec::new();
    for page in rows {
        all.extend(page.items.into_iter().map(|t| (Some(key(&t)), Ok(t))));
        all.extend(page.corrupt.into_iter().map(|c| (corrupt_key(&c), Err(c))));
    }
    all.sort_by(|a, b| a.0.cmp(&b.0));
    all.truncate(limit);
    let mut page = Page::default();
    for (_, row) in all {
        match row {
            Ok(t) => page.items.push(t),
            Err(c) => page.corrupt.push(c),
        }
    }
    page
}

#[async_trait]
impl Jobs for RedisStore {
    fn name(&self) -> &'static str {
        super::NAME
    }

    async fn schema(&self) -> Result<Option<crate::store::SchemaVersion>> {
        self.stored_schema().await.map(Some)
    }

    async fn now(&self) -> Result<Timestamp> {
        self.home().now().await
    }

    async fn apply(&self, change: &JobChange, audit: Option<&AuditEntry>) -> Result<Applied> {
        let id = match change {
            JobChange::Upsert { job, .. } | JobChange::Create { job, .. } => job.id(),
            JobChange::Remove { id }
            | JobChange::Pause { id }
            | JobChange::Resume { id, .. }
            | JobChange::Trigger { id, .. } => id,
        };
        self.job_shard(id).apply(change, audit).await
    }

    async fn upsert_many(&self, jobs: &[(Job, Option<Timestamp>)]) -> Result<Vec<UpsertOutcome>> {
        if !self.is_split() {
            return self.home().upsert_many(jobs).await;
        }
        self.scatter(
            jobs,
            |(job, _)| self.shard_of(job.id()),
            |shard, share| async move { self.shards[shard].upsert_many(&share).await },
        )
        .await
    }

    async fn get(&self, id: &JobId) -> Result<Option<JobRecord>> {
        self.job_shard(id).get(id).await
    }

    async fn list(&self, query: &JobQuery) -> Result<Page<JobRecord>> {
        if !self.is_split() {
            return self.home().list(query).await;
        }
        let pages = self.each(|s| s.list(query)).await?;
        Ok(merged(
            pages,
            |r: &JobRecord| r.job.id().as_str().to_string(),
            |c| Some(c.id.clone()),
            query.effective_limit(),
        ))
    }

    async fn due(&self, query: &DueQuery) -> Result<Page<DueFire>> {
        if !self.is_split() {
            return self.home().due(query).await;
        }
        self.due_split(query).await
    }

    async fn start_runs(&self, runs: &[StartRun]) -> Result<Vec<StartOutcome>> {
        if !self.is_split() {
            let out = self.home().start_runs(runs).await?;
            self.replicated(self.home(), "start_runs").await;
            return Ok(out);
        }
        self.scatter(
            runs,
            |r| self.shard_of(&r.job_id),
            |shard, share| async move {
                let out = self.shards[shard].start_runs(&share).await?;
                self.replicated(&self.shards[shard], "start_runs").await;
                Ok(out)
            },
        )
        .await
    }

    async fn finish_runs(&self, runs: &[FinishRun]) -> Result<Vec<FinishOutcome>> {
        if !self.is_split() {
            let out = self.home().finish_runs(runs).await?;
            self.replicated(self.home(), "finish_runs").await;
            return Ok(out);
        }
        self.finish_split(runs).await
    }

    async fn releases(
        &self,
        job: Option<&JobId>,
        limit: usize,
    ) -> Result<Vec<crate::dependency::QueuedRelease>> {
        if let Some(id) = job {
            return self.job_shard(id).queued_releases(job, limit).await;
        }
        let mut all: Vec<_> = self
            .each(|s| s.queued_releases(None, limit))
            .await?
            .into_iter()
            .flatten()
            .collect();
        all.sort_by(|a, b| a.list_order().cmp(&b.list_order()));
        all.truncate(limit);
        Ok(all)
    }

    async fn queue_releases(
        &self,
        releases: &[crate::dependency::Release],
        audit: Option<&AuditEntry>,
    ) -> Result<()> {
        let groups = self.split(releases, |r| self.shard_of(&r.job));
        if groups.is_empty() {
            return self.home().queue_released(&[], audit).await;
        }
        // The audit entry once, with the first shard's share.
        for (n, (shard, positions)) in groups.iter().enumerate() {
            let share: Vec<_> = positions.iter().map(|&i| releases[i].clone()).collect();
            let audit = if n == 0 { audit } else { None };
            self.shards[*shard].queue_released(&share, audit).await?;
        }
        Ok(())
    }

    async fn drop_releases(
        &self,
        job: &JobId,
        fire_at: Timestamp,
        audit: Option<&AuditEntry>,
    ) -> Result<u64> {
        self.job_shard(job).drop_released(job, fire_at, audit).await
    }

    async fn take_releases(&self, limit: usize) -> Result<u64> {
        let mut taken = 0;
        for (i, shard) in self.shards.iter().enumerate() {
            if self.is_split()
                && let Err(e) = self.deliver(i).await
            {
                tracing::warn!(error = %e, shard = i, "delivering releases to other shards failed");
            }
            if (taken as usize) < limit {
                taken += shard.take_queued(limit - taken as usize).await?;
            }
        }
        Ok(taken)
    }

    fn job_leases(&self) -> Option<&dyn crate::store::JobLeases> {
        self.lease_home
            .is_some()
            .then_some(self as &dyn crate::store::JobLeases)
    }

    async fn alarm_waiting(&self, job: &JobId, at: Timestamp, e: &AlarmEvent) -> Result<bool> {
        self.job_shard(job).alarm_queued(job, at, e).await
    }
}
