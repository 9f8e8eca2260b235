//! Run log, stats, node registry and alarm outbox of [`MySqlStore`], and its
//! [`JobStore`] implementation.

use super::store::MySqlStore;
use super::{NAME, db_err};
use crate::error::Result;
use crate::job::{Job, JobId};
use crate::record::*;
use crate::store::JobStore;
use crate::time::{Timestamp, duration_ms};
use async_trait::async_trait;
use chrono::NaiveDate;
use sqlx::AssertSqlSafe;
use std::time::Duration;

use crate::sql::DAY_MS;

#[async_trait]
impl JobStore for MySqlStore {
    fn name(&self) -> &'static str {
        NAME
    }

    async fn now(&self) -> Result<Timestamp> {
        let now: i64 = sqlx::query_scalar(AssertSqlSafe(format!("SELECT {}", super::NOW_MS)))
            .fetch_one(&self.pool)
            .await
            .map_err(db_err("now"))?;
        Ok(Timestamp::from_millis(now))
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
        if runs.is_empty() {
            return Ok(Vec::new());
        }
        self.start(runs).await
    }

    async fn finish_runs(&self, runs: &[FinishRun]) -> Result<Vec<FinishOutcome>> {
        if runs.is_empty() {
            return Ok(Vec::new());
        }
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
        let mut query = sqlx::query(AssertSqlSafe(sql.clone()));
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
        let r = sqlx::query(AssertSqlSafe(format!(
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
        let rows = sqlx::query(AssertSqlSafe(format!(
            "SELECT started_at DIV {DAY_MS} AS day, status, COUNT(*) AS n FROM {} WHERE started_at >= ? AND started_at < ?
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
        let info = crate::sql::encode(NAME, node)?;
        let now = self.now().await?.as_millis();
        sqlx::query(AssertSqlSafe(format!(
            "INSERT INTO {} (node_id, info, last_beat) VALUES (?, ?, ?)
             ON DUPLICATE KEY UPDATE info = VALUES(info), last_beat = VALUES(last_beat)",
            self.t("nodes")
        )))
        .bind(&node.node_id)
        .bind(info)
        .bind(now)
        .execute(&self.pool)
        .await
        .map_err(db_err("heartbeat"))?;
        Ok(Timestamp::from_millis(now))
    }

    async fn nodes(&self) -> Result<Vec<NodeRecord>> {
        let rows = sqlx::query(AssertSqlSafe(format!(
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
        let op = "reap_nodes";
        let nodes = self.t("nodes");
        let mut tx = self.pool.begin().await.map_err(db_err(op))?;
        let dead: Vec<String> = sqlx::query_scalar(AssertSqlSafe(format!(
            "SELECT node_id FROM {nodes} WHERE last_beat < {} - ? ORDER BY node_id FOR UPDATE",
            super::NOW_MS
        )))
        .bind(duration_ms(silent_for))
        .fetch_all(&mut *tx)
        .await
        .map_err(db_err(op))?;
        if !dead.is_empty() {
            let mut q = sqlx::query(AssertSqlSafe(format!(
                "DELETE FROM {nodes} WHERE node_id IN ({})",
                super::marks(dead.len())
            )));
            for d in &dead {
                q = q.bind(d);
            }
            q.execute(&mut *tx).await.map_err(db_err(op))?;
        }
        tx.commit().await.map_err(db_err(op))?;
        Ok(dead)
    }

    async fn deregister(&self, node_id: &str) -> Result<bool> {
        let r = sqlx::query(AssertSqlSafe(format!(
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
        let rows = sqlx::query(AssertSqlSafe(format!(
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
        let op = "enqueue_alarms";
        let mut tx = self.pool.begin().await.map_err(db_err(op))?;
        let now = Self::now_in(&mut tx, op).await?;
        let sql = format!(
            "INSERT INTO {} (event, status, attempts, next_attempt_at, created_at) VALUES (?, 'pending', 0, ?, ?)",
            self.t("alarms")
        );
        let mut ids = Vec::with_capacity(events.len());
        for e in events {
            let r = sqlx::query(AssertSqlSafe(sql.clone()))
                .bind(crate::sql::encode(NAME, e)?)
                .bind(now)
                .bind(now)
                .execute(&mut *tx)
                .await
                .map_err(db_err(op))?;
            ids.push(AlarmId(r.last_insert_id() as i64));
        }
        tx.commit().await.map_err(db_err(op))?;
        Ok(ids)
    }

    async fn claim_alarms(
        &self,
        owner: &str,
        limit: usize,
        lease: Duration,
    ) -> Result<Vec<AlarmRecord>> {
        let op = "claim_alarms";
        let (alarms, now_sql) = (self.t("alarms"), super::NOW_MS);
        super::retrying(|| async {
        let mut tx = self.pool.begin().await.map_err(db_err(op))?;
        let ids: Vec<i64> = sqlx::query_scalar(AssertSqlSafe(format!(
            "SELECT id FROM {alarms} WHERE
                 (status IN ('pending', 'failed') AND next_attempt_at IS NOT NULL AND next_attempt_at <= {now_sql})
                 OR (status = 'sending' AND claim_until <= {now_sql})
             ORDER BY id LIMIT ? FOR UPDATE SKIP LOCKED"
        )))
        .bind(limit as i64)
        .fetch_all(&mut *tx)
        .await
        .map_err(db_err(op))?;
        if ids.is_empty() {
            tx.commit().await.map_err(db_err(op))?;
            return Ok(Vec::new());
        }
        let list = super::marks(ids.len());
        let mut q = sqlx::query(AssertSqlSafe(format!(
            "UPDATE {alarms} SET status = 'sending', claimed_by = ?, claim_until = {now_sql} + ?, attempts = attempts + 1
             WHERE id IN ({list})"
        )))
        .bind(owner)
        .bind(duration_ms(lease));
        for id in &ids {
            q = q.bind(id);
        }
        q.execute(&mut *tx).await.map_err(db_err(op))?;
        let mut q = sqlx::query(AssertSqlSafe(format!("SELECT * FROM {alarms} WHERE id IN ({list}) ORDER BY id")));
        for id in &ids {
            q = q.bind(id);
        }
        let rows = q.fetch_all(&mut *tx).await.map_err(db_err(op))?;
        tx.commit().await.map_err(db_err(op))?;
        rows.iter().map(|r| crate::sql::alarm_record(NAME, r)).collect()
        })
        .await
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
        let r = sqlx::query(AssertSqlSafe(format!(
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
        let mut q = sqlx::query(AssertSqlSafe(sql.clone()));
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
