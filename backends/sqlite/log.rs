//! Run log, stats, node registry and alarm outbox of [`SqliteStore`], and its
//! [`JobStore`] implementation.

use super::store::SqliteStore;
use super::{NAME, db_err};
use crate::error::{Error, Result};
use crate::job::{Job, JobId};
use crate::record::*;
use crate::store::JobStore;
use crate::time::{Timestamp, duration_ms};
use async_trait::async_trait;
use chrono::NaiveDate;
use sqlx::{Sqlite, Transaction};
use std::time::Duration;

use crate::sql::DAY_MS;

impl SqliteStore {
    pub(super) async fn insert_alarms(
        &self,
        tx: &mut Transaction<'static, Sqlite>,
        events: &[AlarmEvent],
        now: i64,
    ) -> Result<Vec<AlarmId>> {
        let sql = format!(
            "INSERT INTO {} (event, status, attempts, next_attempt_at, created_at) VALUES (?, 'pending', 0, ?, ?) RETURNING id",
            self.t("alarms")
        );
        let mut ids = Vec::with_capacity(events.len());
        for e in events {
            let text = serde_json::to_string(e)
                .map_err(|e| Error::backend(NAME, "encode alarm", false, e))?;
            let id: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(sql.clone()))
                .bind(text)
                .bind(now)
                .bind(now)
                .fetch_one(&mut **tx)
                .await
                .map_err(db_err("enqueue_alarms"))?;
            ids.push(AlarmId(id));
        }
        Ok(ids)
    }
}

#[async_trait]
impl JobStore for SqliteStore {
    fn name(&self) -> &'static str {
        NAME
    }

    async fn now(&self) -> Result<Timestamp> {
        self.now_ms().await.map(Timestamp::from_millis)
    }

    async fn upsert(&self, job: &Job, next: Option<Timestamp>) -> Result<UpsertOutcome> {
        self.upsert_job(job, next).await
    }

    async fn get(&self, id: &JobId) -> Result<Option<JobRecord>> {
        self.get_job(id).await
    }

    async fn list(&self, after: Option<&JobId>, limit: usize) -> Result<Vec<JobRecord>> {
        self.list_jobs(after, limit).await
    }

    async fn remove(&self, id: &JobId) -> Result<bool> {
        self.remove_job(id).await
    }

    async fn set_enabled(&self, id: &JobId, enabled: bool, next: Option<Timestamp>) -> Result<()> {
        self.set_job_enabled(id, enabled, next).await
    }

    async fn trigger(&self, id: &JobId, at: Timestamp) -> Result<()> {
        self.trigger_job(id, at).await
    }

    async fn due(
        &self,
        until: Timestamp,
        after: Option<&DueKey>,
        limit: usize,
    ) -> Result<Vec<DueFire>> {
        self.due_fires(until, after, limit).await
    }

    async fn start_runs(&self, runs: &[StartRun]) -> Result<Vec<StartOutcome>> {
        self.start(runs).await
    }

    async fn finish_runs(&self, runs: &[FinishRun]) -> Result<Vec<FinishOutcome>> {
        self.finish(runs).await
    }

    async fn runs(&self, q: &RunQuery) -> Result<Vec<RunRecord>> {
        let mut sql = format!("SELECT * FROM {} WHERE 1 = 1", self.t("runs"));
        for (cond, clause) in [
            (q.job_id.is_some(), " AND job_id = ?"),
            (q.status.is_some(), " AND status = ?"),
            (q.since.is_some(), " AND started_at >= ?"),
            (q.until.is_some(), " AND started_at < ?"),
            (q.before.is_some(), " AND id < ?"),
        ] {
            if cond {
                sql.push_str(clause);
            }
        }
        sql.push_str(" ORDER BY id DESC LIMIT ?");
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql.clone()));
        if let Some(j) = &q.job_id {
            query = query.bind(j.as_str());
        }
        if let Some(s) = q.status {
            query = query.bind(s.as_str());
        }
        if let Some(t) = q.since {
            query = query.bind(t.as_millis());
        }
        if let Some(t) = q.until {
            query = query.bind(t.as_millis());
        }
        if let Some(b) = q.before {
            query = query.bind(b.0);
        }
        let rows = query
            .bind(q.effective_limit() as i64)
            .fetch_all(&self.pool)
            .await
            .map_err(db_err("runs"))?;
        rows.iter()
            .map(|r| crate::sql::run_record(NAME, r))
            .collect()
    }

    async fn purge_runs(&self, before: Timestamp) -> Result<u64> {
        let r = sqlx::query(sqlx::AssertSqlSafe(format!(
            "DELETE FROM {} WHERE ended_at IS NOT NULL AND ended_at < ?",
            self.t("runs")
        )))
        .bind(before.as_millis())
        .execute(&self.pool)
        .await
        .map_err(db_err("purge_runs"))?;
        Ok(r.rows_affected())
    }

    async fn daily_stats(&self, from: NaiveDate, to: NaiveDate) -> Result<Vec<DailyStats>> {
        let day_ms = crate::sql::day_start_ms;
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT started_at / {DAY_MS} AS day, status, COUNT(*) AS n FROM {} WHERE started_at >= ? AND started_at < ?
             GROUP BY day, status ORDER BY day",
            self.t("runs")
        )))
        .bind(day_ms(from))
        .bind(day_ms(to) + DAY_MS)
        .fetch_all(&self.pool)
        .await
        .map_err(db_err("daily_stats"))?;
        crate::sql::daily_stats(NAME, &rows)
    }

    async fn heartbeat(&self, node: &NodeInfo) -> Result<Timestamp> {
        let info = serde_json::to_string(node)
            .map_err(|e| Error::backend(NAME, "encode node", false, e))?;
        let now: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "INSERT INTO {} (node_id, info, last_beat) VALUES (?, ?, {now})
             ON CONFLICT (node_id) DO UPDATE SET info = excluded.info, last_beat = excluded.last_beat RETURNING last_beat",
            self.t("nodes"),
            now = super::NOW_MS
        )))
        .bind(&node.node_id)
        .bind(info)
        .fetch_one(&self.pool)
        .await
        .map_err(db_err("heartbeat"))?;
        Ok(Timestamp::from_millis(now))
    }

    async fn nodes(&self) -> Result<Vec<NodeRecord>> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT info, last_beat FROM {} ORDER BY node_id",
            self.t("nodes")
        )))
        .fetch_all(&self.pool)
        .await
        .map_err(db_err("nodes"))?;
        rows.iter()
            .map(|r| crate::sql::node_record(NAME, r))
            .collect()
    }

    async fn reap_nodes(&self, silent_for: Duration) -> Result<Vec<String>> {
        sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "DELETE FROM {} WHERE last_beat < {} - ? RETURNING node_id",
            self.t("nodes"),
            super::NOW_MS
        )))
        .bind(duration_ms(silent_for))
        .fetch_all(&self.pool)
        .await
        .map_err(db_err("reap_nodes"))
    }

    async fn deregister(&self, node_id: &str) -> Result<bool> {
        let r = sqlx::query(sqlx::AssertSqlSafe(format!(
            "DELETE FROM {} WHERE node_id = ?",
            self.t("nodes")
        )))
        .bind(node_id)
        .execute(&self.pool)
        .await
        .map_err(db_err("deregister"))?;
        Ok(r.rows_affected() > 0)
    }

    async fn orphaned_runs(&self, limit: usize) -> Result<Vec<RunRecord>> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT * FROM {runs} WHERE status = 'running' AND node NOT IN (SELECT node_id FROM {nodes}) ORDER BY id LIMIT ?",
            runs = self.t("runs"),
            nodes = self.t("nodes")
        )))
        .bind(limit as i64)
        .fetch_all(&self.pool)
        .await
        .map_err(db_err("orphaned_runs"))?;
        rows.iter()
            .map(|r| crate::sql::run_record(NAME, r))
            .collect()
    }

    async fn enqueue_alarms(&self, events: &[AlarmEvent]) -> Result<Vec<AlarmId>> {
        let mut tx = self.write("enqueue_alarms").await?;
        let now = Self::now_in(&mut tx, "enqueue_alarms").await?;
        let ids = self.insert_alarms(&mut tx, events, now).await?;
        tx.commit().await.map_err(db_err("enqueue_alarms"))?;
        Ok(ids)
    }

    async fn claim_alarms(
        &self,
        owner: &str,
        limit: usize,
        lease: Duration,
    ) -> Result<Vec<AlarmRecord>> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE {alarms} SET status = 'sending', claimed_by = ?, claim_until = {now} + ?, attempts = attempts + 1
             WHERE id IN (SELECT id FROM {alarms} WHERE
                 (status IN ('pending', 'failed') AND next_attempt_at IS NOT NULL AND next_attempt_at <= {now})
                 OR (status = 'sending' AND claim_until <= {now})
               ORDER BY id LIMIT ?)
             RETURNING *",
            alarms = self.t("alarms"),
            now = super::NOW_MS
        )))
        .bind(owner)
        .bind(duration_ms(lease))
        .bind(limit as i64)
        .fetch_all(&self.pool)
        .await
        .map_err(db_err("claim_alarms"))?;
        let mut out: Vec<AlarmRecord> = rows
            .iter()
            .map(|r| crate::sql::alarm_record(NAME, r))
            .collect::<Result<_>>()?;
        out.sort_by_key(|a| a.id);
        Ok(out)
    }

    async fn complete_alarm(&self, id: AlarmId, owner: &str, d: &AlarmDelivery) -> Result<bool> {
        let (status, next, error) = match d {
            AlarmDelivery::Sent => (AlarmStatus::Sent, None, None),
            AlarmDelivery::NotNeeded => (AlarmStatus::NotNeeded, None, None),
            AlarmDelivery::Failed { error, retry_at } => (
                AlarmStatus::Failed,
                retry_at.map(Timestamp::as_millis),
                Some(error.as_str()),
            ),
        };
        let r = sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE {} SET status = ?, next_attempt_at = ?, last_error = COALESCE(?, last_error), claimed_by = NULL,
             claim_until = NULL WHERE id = ? AND status = 'sending' AND claimed_by = ?",
            self.t("alarms")
        )))
        .bind(status.as_str())
        .bind(next)
        .bind(error)
        .bind(id.0)
        .bind(owner)
        .execute(&self.pool)
        .await
        .map_err(db_err("complete_alarm"))?;
        Ok(r.rows_affected() > 0)
    }

    async fn alarms(&self, status: Option<AlarmStatus>, limit: usize) -> Result<Vec<AlarmRecord>> {
        let filter = if status.is_some() {
            "WHERE status = ?"
        } else {
            ""
        };
        let sql = format!(
            "SELECT * FROM {} {filter} ORDER BY id DESC LIMIT ?",
            self.t("alarms")
        );
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql.clone()));
        if let Some(s) = status {
            q = q.bind(s.as_str());
        }
        let rows = q
            .bind(limit as i64)
            .fetch_all(&self.pool)
            .await
            .map_err(db_err("alarms"))?;
        rows.iter()
            .map(|r| crate::sql::alarm_record(NAME, r))
            .collect()
    }
}
