use super::{NAME, NOW_MS, check_prefix, db_err};
use crate::error::{Error, Result};
use crate::job::{Job, JobId};
use crate::record::*;
use crate::time::Timestamp;
use sqlx::sqlite::SqlitePool;
use sqlx::{Row, Sqlite, Transaction};
use std::sync::Arc;

/// A [`JobStore`](crate::JobStore) in one SQLite database.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    pub(super) pool: SqlitePool,
    pub(super) prefix: Arc<str>,
}

impl SqliteStore {
    /// A store on an existing pool (for example the one the application already has).
    /// Errors when the prefix is not a valid table-name prefix.
    pub fn from_pool(pool: SqlitePool, prefix: &str) -> Result<Self> {
        check_prefix(prefix)?;
        Ok(SqliteStore {
            pool,
            prefix: prefix.into(),
        })
    }

    /// The pool.
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    /// The table prefix.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Creates the tables and indexes that do not exist yet. Idempotent; safe when
    /// several processes run it at once (they queue on SQLite's write lock).
    pub async fn migrate(&self) -> Result<()> {
        super::migrate(&self.pool, &self.prefix).await
    }

    pub(super) fn t(&self, table: &str) -> String {
        format!("{}{table}", self.prefix)
    }

    pub(super) async fn write(&self, op: &'static str) -> Result<Transaction<'static, Sqlite>> {
        self.pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(db_err(op))
    }

    pub(super) async fn now_in(
        tx: &mut Transaction<'static, Sqlite>,
        op: &'static str,
    ) -> Result<i64> {
        sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT {NOW_MS}")))
            .fetch_one(&mut **tx)
            .await
            .map_err(db_err(op))
    }

    pub(super) async fn now_ms(&self) -> Result<i64> {
        sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT {NOW_MS}")))
            .fetch_one(&self.pool)
            .await
            .map_err(db_err("now"))
    }

    pub(super) async fn upsert_job(
        &self,
        job: &Job,
        next: Option<Timestamp>,
    ) -> Result<UpsertOutcome> {
        let op = "upsert";
        let def = crate::sql::encode(NAME, job)?;
        let jobs = self.t("jobs");
        let mut tx = self.write(op).await?;
        let now = Self::now_in(&mut tx, op).await?;
        let stored: Option<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT definition FROM {jobs} WHERE id = ?"
        )))
        .bind(job.id().as_str())
        .fetch_optional(&mut *tx)
        .await
        .map_err(db_err(op))?;
        let outcome = match stored {
            Some(s) if s == def => UpsertOutcome::Unchanged,
            Some(_) => {
                sqlx::query(sqlx::AssertSqlSafe(format!(
                    "UPDATE {jobs} SET definition = ?, enabled = ?, version = version + 1, next_fire_at = ?,
                     next_trigger = 'schedule', attempt = 0, resume_after = NULL, updated_at = ? WHERE id = ?"
                )))
                .bind(&def)
                .bind(job.enabled())
                .bind(next.map(Timestamp::as_millis))
                .bind(now)
                .bind(job.id().as_str())
                .execute(&mut *tx)
                .await
                .map_err(db_err(op))?;
                UpsertOutcome::Updated
            }
            None => {
                sqlx::query(sqlx::AssertSqlSafe(format!(
                    "INSERT INTO {jobs} (id, definition, version, enabled, next_fire_at, next_trigger, attempt,
                     last_token, running_run, created_at, updated_at) VALUES (?, ?, 1, ?, ?, 'schedule', 0, 0, NULL, ?, ?)"
                )))
                .bind(job.id().as_str())
                .bind(&def)
                .bind(job.enabled())
                .bind(next.map(Timestamp::as_millis))
                .bind(now)
                .bind(now)
                .execute(&mut *tx)
                .await
                .map_err(db_err(op))?;
                UpsertOutcome::Created
            }
        };
        tx.commit().await.map_err(db_err(op))?;
        Ok(outcome)
    }

    pub(super) async fn get_job(&self, id: &JobId) -> Result<Option<JobRecord>> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT * FROM {} WHERE id = ?",
            self.t("jobs")
        )))
        .bind(id.as_str())
        .fetch_optional(&self.pool)
        .await
        .map_err(db_err("get"))?;
        row.as_ref()
            .map(|r| crate::sql::job_record(NAME, r))
            .transpose()
    }

    pub(super) async fn list_jobs(
        &self,
        after: Option<&JobId>,
        limit: usize,
    ) -> Result<Vec<JobRecord>> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT * FROM {} WHERE id > ? ORDER BY id LIMIT ?",
            self.t("jobs")
        )))
        .bind(after.map_or("", JobId::as_str))
        .bind(limit as i64)
        .fetch_all(&self.pool)
        .await
        .map_err(db_err("list"))?;
        rows.iter()
            .map(|r| crate::sql::job_record(NAME, r))
            .collect()
    }

    pub(super) async fn remove_job(&self, id: &JobId) -> Result<bool> {
        let r = sqlx::query(sqlx::AssertSqlSafe(format!(
            "DELETE FROM {} WHERE id = ?",
            self.t("jobs")
        )))
        .bind(id.as_str())
        .execute(&self.pool)
        .await
        .map_err(db_err("remove"))?;
        Ok(r.rows_affected() > 0)
    }

    pub(super) async fn set_job_enabled(
        &self,
        id: &JobId,
        enabled: bool,
        next: Option<Timestamp>,
    ) -> Result<()> {
        let op = "set_enabled";
        let jobs = self.t("jobs");
        let mut tx = self.write(op).await?;
        let now = Self::now_in(&mut tx, op).await?;
        let stored: Option<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT definition FROM {jobs} WHERE id = ?"
        )))
        .bind(id.as_str())
        .fetch_optional(&mut *tx)
        .await
        .map_err(db_err(op))?;
        let job: Job = crate::sql::decode(
            NAME,
            &stored.ok_or_else(|| Error::not_found("job", id))?,
            "decode job",
        )?;
        if job.enabled() != enabled {
            let def = crate::sql::encode(NAME, &job.with_enabled(enabled))?;
            let resume = if enabled {
                ", next_fire_at = ?, next_trigger = 'schedule', attempt = 0, resume_after = NULL"
            } else {
                ""
            };
            let sql = format!(
                "UPDATE {jobs} SET definition = ?, enabled = ?, version = version + 1, updated_at = ?{resume} WHERE id = ?"
            );
            let mut q = sqlx::query(sqlx::AssertSqlSafe(sql.clone()))
                .bind(def)
                .bind(enabled)
                .bind(now);
            if enabled {
                q = q.bind(next.map(Timestamp::as_millis));
            }
            q.bind(id.as_str())
                .execute(&mut *tx)
                .await
                .map_err(db_err(op))?;
        }
        tx.commit().await.map_err(db_err(op))
    }

    pub(super) async fn trigger_job(&self, id: &JobId, at: Timestamp) -> Result<()> {
        let r = sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE {} SET next_fire_at = ?, next_trigger = 'manual', attempt = 0, resume_after = NULL WHERE id = ?",
            self.t("jobs")
        )))
        .bind(at.as_millis())
        .bind(id.as_str())
        .execute(&self.pool)
        .await
        .map_err(db_err("trigger"))?;
        if r.rows_affected() == 0 {
            return Err(Error::not_found("job", id));
        }
        Ok(())
    }

    pub(super) async fn due_fires(
        &self,
        until: Timestamp,
        after: Option<&DueKey>,
        limit: usize,
    ) -> Result<Vec<DueFire>> {
        let query = format!(
            "SELECT * FROM {} WHERE enabled = 1 AND running_run IS NULL AND next_fire_at IS NOT NULL
             AND next_fire_at <= ? {} ORDER BY next_fire_at, id LIMIT ?",
            self.t("jobs"),
            if after.is_some() {
                "AND (next_fire_at, id) > (?, ?)"
            } else {
                ""
            }
        );
        let mut rows = sqlx::query(sqlx::AssertSqlSafe(query)).bind(until.as_millis());
        if let Some(k) = after {
            rows = rows.bind(k.fire_at.as_millis()).bind(k.job_id.as_str());
        }
        let rows = rows
            .bind(limit as i64)
            .fetch_all(&self.pool)
            .await
            .map_err(db_err("due"))?;
        rows.iter().map(|r| crate::sql::due_fire(NAME, r)).collect()
    }

    pub(super) async fn start(&self, runs: &[StartRun]) -> Result<Vec<StartOutcome>> {
        let op = "start_runs";
        let (jobs, runs_t) = (self.t("jobs"), self.t("runs"));
        let mut tx = self.write(op).await?;
        let now = Self::now_in(&mut tx, op).await?;
        let mut out = Vec::with_capacity(runs.len());
        for r in runs {
            let row = sqlx::query(sqlx::AssertSqlSafe(format!(
                "SELECT enabled, version, running_run, next_fire_at, last_token FROM {jobs} WHERE id = ?"
            )))
            .bind(r.job_id.as_str())
            .fetch_optional(&mut *tx)
            .await
            .map_err(db_err(op))?;
            let refusal = match &row {
                None => Some(StartRefusal::NotFound),
                Some(row) => {
                    let get = |c: &str| row.try_get::<Option<i64>, _>(c).ok().flatten();
                    let last = get("last_token").unwrap_or(0) as u64;
                    if get("enabled") != Some(1) {
                        Some(StartRefusal::Disabled)
                    } else if get("version") != Some(r.version as i64) {
                        Some(StartRefusal::Changed)
                    } else if get("running_run").is_some() {
                        Some(StartRefusal::Running)
                    } else if get("next_fire_at") != Some(r.fire_at.as_millis()) {
                        Some(StartRefusal::NotDue)
                    } else if last > r.token {
                        Some(StartRefusal::Fenced { current: last })
                    } else {
                        None
                    }
                }
            };
            if let Some(refusal) = refusal {
                out.push(StartOutcome::Refused(refusal));
                continue;
            }
            let id: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
                "INSERT INTO {runs_t} (job_id, fire_at, trigger, node, attempt, token, status, started_at, will_retry,
                 covered_fires, covered_through)
                 VALUES (?, ?, ?, ?, ?, ?, 'running', ?, 0, ?, ?) RETURNING id"
            )))
            .bind(r.job_id.as_str())
            .bind(r.fire_at.as_millis())
            .bind(r.trigger.as_str())
            .bind(&r.node)
            .bind(i64::from(r.attempt))
            .bind(r.token as i64)
            .bind(now)
            .bind(crate::sql::span_columns(r.covers).0)
            .bind(crate::sql::span_columns(r.covers).1)
            .fetch_one(&mut *tx)
            .await
            .map_err(db_err(op))?;
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "UPDATE {jobs} SET last_token = ?, running_run = ? WHERE id = ?"
            )))
            .bind(r.token as i64)
            .bind(id)
            .bind(r.job_id.as_str())
            .execute(&mut *tx)
            .await
            .map_err(db_err(op))?;
            out.push(StartOutcome::Started {
                run_id: RunId(id),
                started_at: Timestamp::from_millis(now),
            });
        }
        tx.commit().await.map_err(db_err(op))?;
        Ok(out)
    }

    pub(super) async fn finish(&self, runs: &[FinishRun]) -> Result<Vec<FinishOutcome>> {
        let op = "finish_runs";
        let (jobs, runs_t) = (self.t("jobs"), self.t("runs"));
        let mut tx = self.write(op).await?;
        let now = Self::now_in(&mut tx, op).await?;
        let mut out = Vec::with_capacity(runs.len());
        for f in runs {
            let run = sqlx::query(sqlx::AssertSqlSafe(format!(
                "SELECT job_id, status, token, fire_at FROM {runs_t} WHERE id = ?"
            )))
            .bind(f.run_id.0)
            .fetch_optional(&mut *tx)
            .await
            .map_err(db_err(op))?;
            let Some(run) = run else {
                out.push(FinishOutcome::Refused(FinishRefusal::NotFound));
                continue;
            };
            let get = db_err(op);
            let status: String = run.try_get("status").map_err(&get)?;
            if status != RunStatus::Running.as_str() {
                out.push(FinishOutcome::Refused(FinishRefusal::NotRunning));
                continue;
            }
            let run_job: String = run.try_get("job_id").map_err(&get)?;
            let run_token = run.try_get::<i64, _>("token").map_err(&get)? as u64;
            let fire_at: i64 = run.try_get("fire_at").map_err(&get)?;
            let job = sqlx::query(sqlx::AssertSqlSafe(format!(
                "SELECT last_token, running_run, version, next_fire_at FROM {jobs} WHERE id = ?"
            )))
            .bind(f.job_id.as_str())
            .fetch_optional(&mut *tx)
            .await
            .map_err(db_err(op))?;
            let current = job
                .as_ref()
                .and_then(|j| j.try_get::<i64, _>("last_token").ok())
                .map_or(run_token, |t| t as u64);
            let token_ok = if f.takeover {
                f.token >= current && f.token >= run_token
            } else {
                f.token == run_token && f.token >= current
            };
            if !token_ok || run_job != f.job_id.as_str() {
                out.push(FinishOutcome::Refused(FinishRefusal::Fenced { current }));
                continue;
            }
            let mut rescheduled = false;
            if let Some(j) = &job {
                let version = j.try_get::<i64, _>("version").map_err(&get)?;
                let next = j.try_get::<Option<i64>, _>("next_fire_at").map_err(&get)?;
                rescheduled = version == f.version as i64 && next == Some(fire_at);
                let next_state = if rescheduled {
                    ", next_fire_at = ?, next_trigger = ?, attempt = ?, resume_after = ?"
                } else {
                    ""
                };
                let sql = format!(
                    "UPDATE {jobs} SET last_token = ?,
                     running_run = CASE WHEN running_run = ? THEN NULL ELSE running_run END{next_state} WHERE id = ?"
                );
                let mut q = sqlx::query(sqlx::AssertSqlSafe(sql.clone()))
                    .bind(f.token as i64)
                    .bind(f.run_id.0);
                if rescheduled {
                    q = q
                        .bind(f.next.at.map(Timestamp::as_millis))
                        .bind(f.next.trigger.as_str())
                        .bind(i64::from(f.next.attempt))
                        .bind(f.next.resume_after.map(Timestamp::as_millis));
                }
                q.bind(f.job_id.as_str())
                    .execute(&mut *tx)
                    .await
                    .map_err(db_err(op))?;
            }
            sqlx::query(sqlx::AssertSqlSafe(format!("UPDATE {runs_t} SET status = ?, ended_at = ?, error = ?, will_retry = ? WHERE id = ?")))
                .bind(f.status.as_str())
                .bind(now)
                .bind(&f.error)
                .bind(f.will_retry)
                .bind(f.run_id.0)
                .execute(&mut *tx)
                .await
                .map_err(db_err(op))?;
            self.insert_alarms(&mut tx, &f.alarms, now).await?;
            out.push(FinishOutcome::Finished {
                ended_at: Timestamp::from_millis(now),
                rescheduled,
            });
        }
        tx.commit().await.map_err(db_err(op))?;
        Ok(out)
    }
}
