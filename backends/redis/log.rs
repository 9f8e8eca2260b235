//! The read side of [`RedisStore`]: run-log queries, daily stats, nodes and alarms.

use super::decode::{Fields, corrupt, decode_alarm, decode_node, int};
use super::redis_err;
use super::store::RedisStore;
use crate::error::Result;
use crate::record::*;
use chrono::NaiveDate;

/// Ids read per page while a query filters the run log or the outbox.
const PAGE: usize = 256;
/// Day numbers are days since 1970-01-01 (UTC).
const EPOCH_DAY: NaiveDate = NaiveDate::from_ymd_opt(1970, 1, 1).unwrap();

impl RedisStore {
    /// Ids from a score-ordered set, newest first, below `before`.
    async fn ids_below(&self, set: &str, before: Option<i64>, n: usize) -> Result<Vec<String>> {
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
    /// names a job) and keeps the runs that pass every filter.
    pub(super) async fn query_runs(&self, query: &RunQuery) -> Result<Vec<RunRecord>> {
        let limit = query.effective_limit();
        let set = match &query.job_id {
            Some(j) => format!("runs:job:{j}"),
            None => "runs".to_string(),
        };
        let filtered = query.status.is_some() || query.since.is_some() || query.until.is_some();
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

    pub(super) async fn node_records(&self) -> Result<Vec<NodeRecord>> {
        let mut ids: Vec<String> = redis::cmd("ZRANGE")
            .arg(self.key("nodes"))
            .arg(0)
            .arg(-1)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(redis_err("nodes"))?;
        ids.sort();
        let keys = ids.iter().map(|id| self.key(&format!("node:{id}")));
        self.hashes(keys, "nodes")
            .await?
            .iter()
            .filter(|h| !h.is_empty())
            .map(decode_node)
            .collect()
    }

    pub(super) async fn alarm_records(&self, ids: &[String]) -> Result<Vec<AlarmRecord>> {
        let keys = ids.iter().map(|id| self.key(&format!("alarm:{id}")));
        let hashes: Vec<Fields> = self.hashes(keys, "read alarms").await?;
        ids.iter()
            .zip(hashes)
            .filter(|(_, h)| !h.is_empty())
            .map(|(id, h)| decode_alarm(id, &h))
            .collect()
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
            for a in self.alarm_records(&ids).await? {
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
