//! The run log, node registry and alarm outbox of one shard of [`RedisStore`](super::RedisStore).

use super::decode::{
    Fields, corrupt, decode_alarm, decode_executor, decode_node, encode, executor_key,
    executor_member, int,
};
use super::prepared::flag_ms;
use super::redis_err;
use super::shard::{PURGE_CHUNK, Shard};
use crate::error::Result;
use crate::record::*;
use crate::store::{
    AlarmChange, AlarmClaim, AlarmOutbox, AlarmQuery, CorruptRow, NodeRegistry, Page, RunLog,
    RunQuery,
};
use crate::time::{Timestamp, duration_ms};
use async_trait::async_trait;
use chrono::NaiveDate;
use std::time::Duration;

/// Ids read per page while a query filters the run log or the outbox.
const PAGE: usize = 256;
/// Day numbers are days since 1970-01-01 (UTC).
const EPOCH_DAY: NaiveDate = NaiveDate::from_ymd_opt(1970, 1, 1).unwrap();

impl Shard {
    /// Ids from a score-ordered set, newest first, below `before`.
    pub(super) async fn ids_below(
        &self,
        set: &str,
        before: Option<i64>,
        n: usize,
    ) -> Result<Vec<String>> {
        let max = before.map_or_else(|| "+inf".to_string(), |b| format!("({b}"));
        redis::cmd("ZREVRANGEBYSCORE")
            .arg(self.key(set))
            .arg(max)
            .arg("-inf")
            .arg("LIMIT")
            .arg(0)
            .arg(n)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(redis_err("read index"))
    }

    /// Pages through the run ids newest first (the job's own index when the query
    /// names a job, the running runs' index when it asks for running runs only) and
    /// keeps the runs that pass every filter.
    pub(super) async fn query_runs(&self, query: &RunQuery) -> Result<Vec<RunRecord>> {
        let limit = query.effective_limit();
        let set = match (&query.job_id, query.status) {
            (Some(j), _) => format!("runs:job:{j}"),
            (None, Some(RunStatus::Running)) => "running".to_string(),
            (None, _) => "runs".to_string(),
        };
        let filtered = query.status.is_some()
            || query.node.is_some()
            || query.trigger.is_some()
            || query.since.is_some()
            || query.until.is_some();
        let page = if filtered { PAGE } else { limit };
        let mut before = query.before.map(|b| b.0);
        let mut out = Vec::new();
        while out.len() < limit {
            let ids = self.ids_below(&set, before, page).await?;
            let Some(last) = ids.last() else { break };
            before = Some(last.parse().map_err(|_| corrupt("read runs", last))?);
            let exhausted = ids.len() < page;
            for r in self.run_records(&ids).await? {
                if query.matches(&r) && out.len() < limit {
                    out.push(r);
                }
            }
            if exhausted {
                break;
            }
        }
        Ok(out)
    }

    /// Counts kept per UTC day number by the start, finish and purge scripts.
    pub(super) async fn stats(&self, from: NaiveDate, to: NaiveDate) -> Result<Vec<DailyStats>> {
        let day_no = |d: NaiveDate| (d - EPOCH_DAY).num_days();
        let days: Vec<i64> = redis::cmd("ZRANGEBYSCORE")
            .arg(self.key("stats:days"))
            .arg(day_no(from))
            .arg(day_no(to))
            .query_async(&mut self.conn.clone())
            .await
            .map_err(redis_err("daily_stats"))?;
        let keys = days.iter().map(|d| self.key(&format!("stats:{d}")));
        let hashes = self.hashes(keys, "daily_stats").await?;
        let mut out = Vec::new();
        for (d, h) in days.into_iter().zip(hashes) {
            let mut s = DailyStats {
                day: EPOCH_DAY + chrono::Days::new(d as u64),
                ..DailyStats::default()
            };
            for status in RunStatus::ALL {
                if h.contains_key(status.as_str()) {
                    let n = int(&h, status.as_str(), "decode stats")?;
                    s.add(status, n.max(0) as u64);
                }
            }
            if s.total > 0 {
                out.push(s);
            }
        }
        Ok(out)
    }

    pub(super) async fn node_records(&self) -> Result<Page<NodeRecord>> {
        let mut ids: Vec<String> = redis::cmd("ZRANGE")
            .arg(self.key("nodes"))
            .arg(0)
            .arg(-1)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(redis_err("nodes"))?;
        ids.sort();
        let keys = ids.iter().map(|id| self.key(&format!("node:{id}")));
        let mut page = Page::default();
        for (id, h) in ids.iter().zip(self.hashes(keys, "nodes").await?) {
            if h.is_empty() {
                continue;
            }
            match decode_node(&h) {
                Ok(n) => page.items.push(n),
                Err(reason) => page.corrupt.push(CorruptRow {
                    kind: "node",
                    id: id.clone(),
                    due_key: None,
                    reason,
                }),
            }
        }
        Ok(page)
    }

    /// The executor instances of `group` (all with `None`), by group then address.
    pub(super) async fn executor_records(
        &self,
        group: Option<&str>,
    ) -> Result<Page<ExecutorRecord>> {
        let members: Vec<String> = redis::cmd("ZRANGE")
            .arg(self.key("executors"))
            .arg(0)
            .arg(-1)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(redis_err("executors"))?;
        let mut wanted: Vec<((String, String), String)> = members
            .into_iter()
            .filter_map(|m| Some((executor_key(&m)?, m)))
            .filter(|((g, _), _)| group.is_none_or(|want| g == want))
            .collect();
        wanted.sort();
        let keys = wanted
            .iter()
            .map(|(_, m)| self.key(&format!("executor:{m}")));
        let mut page = Page::default();
        for (((g, a), _), h) in wanted.iter().zip(self.hashes(keys, "executors").await?) {
            if h.is_empty() {
                continue;
            }
            match decode_executor(&h) {
                Ok(e) => page.items.push(e),
                Err(reason) => page.corrupt.push(CorruptRow {
                    kind: "executor",
                    id: format!("{g}/{a}"),
                    due_key: None,
                    reason,
                }),
            }
        }
        Ok(page)
    }

    /// The ids of the nodes registered on this shard.
    pub(super) async fn node_ids(&self) -> Result<Vec<String>> {
        redis::cmd("ZRANGE")
            .arg(self.key("nodes"))
            .arg(0)
            .arg(-1)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(redis_err("nodes"))
    }

    /// This shard's running runs whose node is not in `live`, oldest first, at
    /// most `limit`.
    pub(super) async fn orphaned_among(
        &self,
        limit: usize,
        live: &[String],
    ) -> Result<Vec<RunRecord>> {
        let mut call = self.call(&self.scripts.orphaned_among);
        call.arg(crate::limits::page(limit)).arg(live);
        let ids: Vec<String> = self.invoke(call, "orphaned_runs").await?;
        self.run_records(&ids).await
    }

    /// The events of `ids` that can be read, and those that cannot.
    pub(super) async fn alarm_records(&self, ids: &[String]) -> Result<Page<AlarmRecord>> {
        let keys = ids.iter().map(|id| self.key(&format!("alarm:{id}")));
        let hashes: Vec<Fields> = self.hashes(keys, "read alarms").await?;
        let mut page = Page::default();
        for (id, h) in ids.iter().zip(hashes) {
            if h.is_empty() {
                continue;
            }
            match decode_alarm(id, &h) {
                Ok(a) => page.items.push(a),
                Err(e) => page.corrupt.push(CorruptRow {
                    kind: "alarm",
                    id: id.clone(),
                    due_key: None,
                    reason: e.to_string(),
                }),
            }
        }
        Ok(page)
    }

    pub(super) async fn alarm_list(
        &self,
        status: Option<AlarmStatus>,
        limit: usize,
    ) -> Result<Vec<AlarmRecord>> {
        let page = if status.is_some() { PAGE } else { limit.max(1) };
        let mut before = None;
        let mut out = Vec::new();
        while out.len() < limit {
            let ids = self.ids_below("alarms", before, page).await?;
            let Some(last) = ids.last() else { break };
            before = Some(last.parse().map_err(|_| corrupt("read alarms", last))?);
            let exhausted = ids.len() < page;
            for a in self.alarm_records(&ids).await?.items {
                if status.is_none_or(|s| a.status == s) && out.len() < limit {
                    out.push(a);
                }
            }
            if exhausted {
                break;
            }
        }
        Ok(out)
    }
}

#[async_trait]
impl RunLog for Shard {
    async fn runs(&self, query: &RunQuery) -> Result<Vec<RunRecord>> {
        self.query_runs(query).await
    }

    async fn purge_runs(&self, before: Timestamp) -> Result<u64> {
        let mut total = 0;
        loop {
            let mut call = self.call(&self.scripts.purge);
            call.arg(before.as_millis()).arg(PURGE_CHUNK);
            let n: usize = self.invoke(call, "purge_runs").await?;
            total += n as u64;
            if n < PURGE_CHUNK {
                return Ok(total);
            }
        }
    }

    async fn daily_stats(&self, from: NaiveDate, to: NaiveDate) -> Result<Vec<DailyStats>> {
        self.stats(from, to).await
    }

    async fn append_lines(&self, chunks: &[LogLines]) -> Result<()> {
        // One script per chunk: each line is added at its offset unless one is
        // there, so a repeated chunk adds nothing.
        let calls = chunks.iter().filter(|c| !c.lines.is_empty()).map(|c| {
            let mut call = self.call(&self.scripts.append_lines);
            call.arg(c.run_id.0).arg(c.first).arg(&c.lines);
            async move { self.invoke::<i64>(call, "append_lines").await }
        });
        for r in futures::future::join_all(calls).await {
            r?;
        }
        Ok(())
    }

    async fn lines(&self, run: RunId, offset: u64, limit: usize) -> Result<Vec<LogLine>> {
        let members: Vec<String> = redis::cmd("ZRANGE")
            .arg(self.key(&format!("lines:{}", run.0)))
            .arg(offset)
            .arg("+inf")
            .arg("BYSCORE")
            .arg("LIMIT")
            .arg(0)
            .arg(limit)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(redis_err("lines"))?;
        members
            .into_iter()
            .map(|m| {
                let parsed = m
                    .split_once('|')
                    .and_then(|(o, l)| Some((o.parse::<u64>().ok()?, l.to_string())));
                match parsed {
                    Some((offset, line)) => Ok(LogLine { offset, line }),
                    None => Err(corrupt(
                        "decode log line",
                        format!("run {}: a line without its offset", run.0),
                    )),
                }
            })
            .collect()
    }
}

#[async_trait]
impl NodeRegistry for Shard {
    async fn heartbeat(&self, node: &NodeInfo) -> Result<Timestamp> {
        let mut call = self.call(&self.scripts.heartbeat);
        call.arg(&node.node_id).arg(encode(node)?);
        let now: i64 = self.invoke(call, "heartbeat").await?;
        Ok(Timestamp::from_millis(now))
    }

    async fn nodes(&self) -> Result<Page<NodeRecord>> {
        self.node_records().await
    }

    async fn reap_nodes(&self, silent_for: Duration) -> Result<Vec<String>> {
        let mut call = self.call(&self.scripts.reap);
        call.arg(duration_ms(silent_for));
        self.invoke(call, "reap_nodes").await
    }

    async fn deregister(&self, node_id: &str) -> Result<bool> {
        let mut call = self.call(&self.scripts.deregister);
        call.arg(node_id);
        let n: i64 = self.invoke(call, "deregister").await?;
        Ok(n > 0)
    }

    async fn orphaned_runs(&self, limit: usize) -> Result<Vec<RunRecord>> {
        let mut call = self.call(&self.scripts.orphaned);
        call.arg(crate::limits::page(limit));
        let ids: Vec<String> = self.invoke(call, "orphaned_runs").await?;
        self.run_records(&ids).await
    }

    async fn executor_beat(&self, instance: &ExecutorInfo) -> Result<Timestamp> {
        let mut call = self.call(&self.scripts.executor_beat);
        call.arg(executor_member(&instance.group, &instance.address))
            .arg(encode(instance)?);
        let now: i64 = self.invoke(call, "executor_beat").await?;
        Ok(Timestamp::from_millis(now))
    }

    async fn executors(&self, group: Option<&str>) -> Result<Page<ExecutorRecord>> {
        self.executor_records(group).await
    }

    async fn reap_executors(&self, silent_for: Duration) -> Result<Vec<(String, String)>> {
        let mut call = self.call(&self.scripts.reap_executors);
        call.arg(duration_ms(silent_for));
        let members: Vec<String> = self.invoke(call, "reap_executors").await?;
        let mut dead: Vec<(String, String)> =
            members.iter().filter_map(|m| executor_key(m)).collect();
        dead.sort();
        Ok(dead)
    }

    async fn deregister_executor(&self, group: &str, address: &str) -> Result<bool> {
        let mut call = self.call(&self.scripts.deregister_executor);
        call.arg(executor_member(group, address));
        let n: i64 = self.invoke(call, "deregister_executor").await?;
        Ok(n > 0)
    }
}

#[async_trait]
impl AlarmOutbox for Shard {
    async fn claim_alarms(&self, claim: &AlarmClaim) -> Result<Page<AlarmRecord>> {
        if claim.limit == 0 {
            return Ok(Page::default());
        }
        let mut call = self.call(&self.scripts.claim_alarms);
        call.arg(claim.owner.as_str())
            .arg(crate::limits::page(claim.limit))
            .arg(duration_ms(claim.lease));
        let ids: Vec<String> = self.invoke(call, "claim_alarms").await?;
        let page = self.alarm_records(&ids).await?;
        // An event that cannot be read is never handed out: it fails for good.
        for bad in &page.corrupt {
            if let Ok(id) = bad.id.parse() {
                let failed = AlarmDelivery::Failed {
                    error: format!("cannot be read: {}", bad.reason),
                    retry_at: None,
                };
                self.complete_alarm(AlarmId(id), &claim.owner, &failed)
                    .await?;
            }
        }
        Ok(page)
    }

    async fn complete_alarm(
        &self,
        id: AlarmId,
        owner: &str,
        delivery: &AlarmDelivery,
    ) -> Result<bool> {
        let (status, error, retry) = delivery.parts();
        let mut call = self.call(&self.scripts.complete_alarm);
        call.arg(id.0)
            .arg(owner)
            .arg(status.as_str())
            .arg(error.unwrap_or(""))
            .arg(flag_ms(retry));
        let n: i64 = self.invoke(call, "complete_alarm").await?;
        Ok(n > 0)
    }

    async fn alarms(&self, query: &AlarmQuery) -> Result<Vec<AlarmRecord>> {
        if let Some(id) = query.id {
            // One event: read its hash alone.
            let page = self.alarm_records(&[id.0.to_string()]).await?;
            return Ok(page
                .items
                .into_iter()
                .filter(|a| query.matches(a))
                .collect());
        }
        self.alarm_list(query.status, query.effective_limit()).await
    }

    async fn purge_alarms(&self, before: Timestamp) -> Result<u64> {
        let mut total = 0;
        let mut after = "0".to_string();
        loop {
            let mut call = self.call(&self.scripts.purge_alarms);
            call.arg(&after).arg(PURGE_CHUNK).arg(before.as_millis());
            let (n, last): (u64, String) = self.invoke(call, "purge_alarms").await?;
            total += n;
            if last.is_empty() {
                return Ok(total);
            }
            after = last;
        }
    }

    async fn apply_alarm(&self, change: AlarmChange, audit: Option<&AuditEntry>) -> Result<bool> {
        let mut call = self.audited_call(&self.scripts.apply_alarm, audit);
        call.arg(change.id().0).arg(match change {
            AlarmChange::Retry(_) => "retry",
            AlarmChange::Discard(_) => "discard",
        });
        let n: i64 = self.invoke(call, "apply_alarm").await?;
        Ok(n > 0)
    }
}
