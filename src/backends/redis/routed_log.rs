//! The run log, node registry, alarm outbox, audit log and credentials of
//! [`RedisStore`]: a run, an alarm or an audit entry is read on the shard its id
//! names; listings ask every shard and merge newest first; nodes, executors and
//! credentials live on shard 0.

use super::store::RedisStore;
use crate::error::Result;
use crate::record::*;
use crate::store::{
    AlarmChange, AlarmClaim, AlarmOutbox, AlarmQuery, AuditLog, AuditQuery, Credentials,
    NodeRegistry, Page, RunLog, RunQuery,
};
use crate::time::Timestamp;
use async_trait::async_trait;
use chrono::NaiveDate;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// The newest `limit` of `lists` (each newest first) by `id`.
fn newest<T>(lists: Vec<Vec<T>>, id: impl Fn(&T) -> i64, limit: usize) -> Vec<T> {
    let mut all: Vec<T> = lists.into_iter().flatten().collect();
    all.sort_by_key(|t| std::cmp::Reverse(id(t)));
    all.truncate(limit);
    all
}

#[async_trait]
impl RunLog for RedisStore {
    async fn runs(&self, query: &RunQuery) -> Result<Vec<RunRecord>> {
        if let Some(job) = &query.job_id {
            return self.job_shard(job).query_runs(query).await;
        }
        let lists = self.each(|s| s.query_runs(query)).await?;
        Ok(newest(lists, |r| r.id.0, query.effective_limit()))
    }

    async fn purge_runs(&self, before: Timestamp) -> Result<u64> {
        Ok(self.each(|s| s.purge_runs(before)).await?.iter().sum())
    }

    async fn daily_stats(&self, from: NaiveDate, to: NaiveDate) -> Result<Vec<DailyStats>> {
        let mut days: BTreeMap<NaiveDate, DailyStats> = BTreeMap::new();
        for list in self.each(|s| s.stats(from, to)).await? {
            for s in list {
                match days.get_mut(&s.day) {
                    Some(d) => d.add_all(&s),
                    None => {
                        days.insert(s.day, s);
                    }
                }
            }
        }
        Ok(days.into_values().collect())
    }

    async fn append_lines(&self, chunks: &[LogLines]) -> Result<()> {
        if !self.is_split() {
            return self.home().append_lines(chunks).await;
        }
        let groups = self.split(chunks, |c| self.id_index(c.run_id.0));
        let calls = groups.iter().map(|(shard, positions)| {
            let share: Vec<LogLines> = positions.iter().map(|&i| chunks[i].clone()).collect();
            async move { self.shards[*shard].append_lines(&share).await }
        });
        futures::future::try_join_all(calls).await.map(drop)
    }

    async fn lines(&self, run: RunId, offset: u64, limit: usize) -> Result<Vec<LogLine>> {
        self.id_shard(run.0).lines(run, offset, limit).await
    }
}

#[async_trait]
impl NodeRegistry for RedisStore {
    async fn heartbeat(&self, node: &NodeInfo) -> Result<Timestamp> {
        self.home().heartbeat(node).await
    }

    async fn nodes(&self) -> Result<Page<NodeRecord>> {
        self.home().nodes().await
    }

    async fn reap_nodes(&self, silent_for: Duration) -> Result<Vec<String>> {
        self.home().reap_nodes(silent_for).await
    }

    async fn deregister(&self, node_id: &str) -> Result<bool> {
        self.home().deregister(node_id).await
    }

    async fn orphaned_runs(&self, limit: usize) -> Result<Vec<RunRecord>> {
        if !self.is_split() {
            return self.home().orphaned_runs(limit).await;
        }
        // The nodes are registered on shard 0; each shard checks its running runs
        // against them.
        let live = self.home().node_ids().await?;
        let mut all: Vec<RunRecord> = self
            .each(|s| s.orphaned_among(limit, &live))
            .await?
            .into_iter()
            .flatten()
            .collect();
        all.sort_by_key(|r| r.id.0);
        all.truncate(crate::limits::page(limit));
        Ok(all)
    }

    async fn executor_beat(&self, instance: &ExecutorInfo) -> Result<Timestamp> {
        self.home().executor_beat(instance).await
    }

    async fn executors(&self, group: Option<&str>) -> Result<Page<ExecutorRecord>> {
        self.home().executors(group).await
    }

    async fn reap_executors(&self, silent_for: Duration) -> Result<Vec<(String, String)>> {
        self.home().reap_executors(silent_for).await
    }

    async fn deregister_executor(&self, group: &str, address: &str) -> Result<bool> {
        self.home().deregister_executor(group, address).await
    }
}

#[async_trait]
impl AlarmOutbox for RedisStore {
    async fn claim_alarms(&self, claim: &AlarmClaim) -> Result<Page<AlarmRecord>> {
        if !self.is_split() {
            return self.home().claim_alarms(claim).await;
        }
        // Shard by shard from a place that moves on every call, until the limit.
        let n = self.shards.len();
        let start = self.claim_from.fetch_add(1, Ordering::Relaxed) % n;
        let mut page = Page::default();
        for k in 0..n {
            if page.items.len() >= claim.limit {
                break;
            }
            let mut share = claim.clone();
            share.limit = claim.limit - page.items.len();
            let got = self.shards[(start + k) % n].claim_alarms(&share).await?;
            page.items.extend(got.items);
            page.corrupt.extend(got.corrupt);
        }
        page.items.sort_by_key(|a| a.id.0);
        Ok(page)
    }

    async fn complete_alarm(
        &self,
        id: AlarmId,
        owner: &str,
        delivery: &AlarmDelivery,
    ) -> Result<bool> {
        self.id_shard(id.0)
            .complete_alarm(id, owner, delivery)
            .await
    }

    async fn alarms(&self, query: &AlarmQuery) -> Result<Vec<AlarmRecord>> {
        if let Some(id) = query.id {
            return self.id_shard(id.0).alarms(query).await;
        }
        let lists = self.each(|s| s.alarms(query)).await?;
        Ok(newest(lists, |a| a.id.0, query.effective_limit()))
    }

    async fn purge_alarms(&self, before: Timestamp) -> Result<u64> {
        Ok(self.each(|s| s.purge_alarms(before)).await?.iter().sum())
    }

    async fn apply_alarm(&self, change: AlarmChange, audit: Option<&AuditEntry>) -> Result<bool> {
        self.id_shard(change.id().0)
            .apply_alarm(change, audit)
            .await
    }
}

#[async_trait]
impl AuditLog for RedisStore {
    async fn append_audit(&self, entry: &AuditEntry) -> Result<()> {
        self.home().append_audit(entry).await
    }

    async fn audit(&self, query: &AuditQuery) -> Result<Vec<AuditRecord>> {
        let lists = self.each(|s| s.audit(query)).await?;
        Ok(newest(lists, |a| a.id, query.effective_limit()))
    }

    async fn purge_audit(&self, before: Timestamp) -> Result<u64> {
        Ok(self.each(|s| s.purge_audit(before)).await?.iter().sum())
    }
}

#[async_trait]
impl Credentials for RedisStore {
    async fn add_credential(&self, c: &Credential, audit: &AuditEntry) -> Result<bool> {
        self.home().add_credential(c, audit).await
    }

    async fn remove_credential(
        &self,
        kind: CredentialKind,
        name: &str,
        audit: &AuditEntry,
    ) -> Result<bool> {
        self.home().remove_credential(kind, name, audit).await
    }

    async fn credentials(&self) -> Result<Vec<CredentialRecord>> {
        self.home().credentials().await
    }
}
