//! [`RunLog`]: one record per run.

use super::RunQuery;
use crate::error::Result;
use crate::record::{DailyStats, LogLine, LogLines, RunId, RunRecord};
use crate::time::Timestamp;
use async_trait::async_trait;
use chrono::NaiveDate;
use std::sync::Arc;

/// The run log: every run, queryable, purged by retention. Runs are written by
/// [`Jobs::start_runs`](super::Jobs::start_runs) and
/// [`Jobs::finish_runs`](super::Jobs::finish_runs), in the same atomic steps as the
/// job's state.
#[async_trait]
pub trait RunLog: Send + Sync + 'static {
    /// Runs matching `query`, newest first (by id, descending).
    async fn runs(&self, query: &RunQuery) -> Result<Vec<RunRecord>>;

    /// Deletes the finished runs that started before `before`, and their log lines;
    /// running runs stay. Returns how many runs. A store that keeps its log in day
    /// partitions (PostgreSQL, MariaDB) drops a whole day's partition when every run
    /// of it goes, so a `before` at the start of a UTC day (what the engine's
    /// retention passes) deletes no row one by one.
    async fn purge_runs(&self, before: Timestamp) -> Result<u64>;

    /// Makes ready what the log needs to record the coming days' runs: a store that
    /// keeps its log in day partitions creates those of the next
    /// [`DAYS_AHEAD`](crate::store::DAYS_AHEAD) days that are missing. Idempotent,
    /// safe on many nodes at once; called by `migrate` and hourly by every node's
    /// maintenance. The default does nothing.
    async fn prepare_log(&self) -> Result<()> {
        Ok(())
    }

    /// Appends lines to runs' logs (a local handler's `tracing` events, written by
    /// the node that runs it). A line already stored at its offset is kept as it
    /// is: appending a chunk again writes nothing twice. Lines are deleted with
    /// their run ([`purge_runs`](RunLog::purge_runs)); callers append only for runs
    /// they started, so the store does not check that the run exists.
    async fn append_lines(&self, chunks: &[LogLines]) -> Result<()>;

    /// Up to `limit` stored lines of run `run` from offset `offset` on, in offset
    /// order (empty when it has none there).
    async fn lines(&self, run: RunId, offset: u64, limit: usize) -> Result<Vec<LogLine>>;

    /// Per-day counts (UTC days, by start time) for `from..=to`, one entry per day
    /// that has runs, oldest first. The default pages through [`runs`](RunLog::runs);
    /// stores that can count in place override it.
    async fn daily_stats(&self, from: NaiveDate, to: NaiveDate) -> Result<Vec<DailyStats>> {
        let start = |d: NaiveDate| {
            Timestamp::from_millis(
                d.and_hms_opt(0, 0, 0)
                    .map_or(0, |t| t.and_utc().timestamp_millis()),
            )
        };
        let (since, until) = (start(from), start(to.succ_opt().unwrap_or(to)));
        let mut days: Vec<DailyStats> = Vec::new();
        let mut query = RunQuery::new().since(since).until(until).limit(1000);
        loop {
            let page = self.runs(&query).await?;
            for r in &page {
                let day = r.started_at.to_datetime().date_naive();
                match days.iter_mut().find(|d| d.day == day) {
                    Some(d) => d.count(r.status),
                    None => {
                        let mut d = DailyStats {
                            day,
                            ..DailyStats::default()
                        };
                        d.count(r.status);
                        days.push(d);
                    }
                }
            }
            match page.last() {
                Some(last) if page.len() == query.effective_limit() => {
                    query = query.before(last.id);
                }
                _ => break,
            }
        }
        days.sort_by_key(|d| d.day);
        Ok(days)
    }
}

macro_rules! forward {
    ($($ptr:ty),*) => {$(
        #[async_trait]
        impl<S: RunLog + ?Sized> RunLog for $ptr {
            async fn runs(&self, q: &RunQuery) -> Result<Vec<RunRecord>> { (**self).runs(q).await }
            async fn purge_runs(&self, before: Timestamp) -> Result<u64> { (**self).purge_runs(before).await }
            async fn prepare_log(&self) -> Result<()> { (**self).prepare_log().await }
            async fn append_lines(&self, chunks: &[LogLines]) -> Result<()> { (**self).append_lines(chunks).await }
            async fn lines(&self, run: RunId, offset: u64, limit: usize) -> Result<Vec<LogLine>> { (**self).lines(run, offset, limit).await }
            async fn daily_stats(&self, from: NaiveDate, to: NaiveDate) -> Result<Vec<DailyStats>> { (**self).daily_stats(from, to).await }
        }
    )*};
}

forward!(Arc<S>, Box<S>);
