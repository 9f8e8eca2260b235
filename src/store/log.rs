//! [`RunLog`]: one record per run.

use super::RunQuery;
use crate::error::Result;
use crate::record::{DailyStats, RunRecord};
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

    /// Deletes finished runs that ended before `before`. Returns how many.
    async fn purge_runs(&self, before: Timestamp) -> Result<u64>;

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
            async fn daily_stats(&self, from: NaiveDate, to: NaiveDate) -> Result<Vec<DailyStats>> { (**self).daily_stats(from, to).await }
        }
    )*};
}

forward!(Arc<S>, Box<S>);
