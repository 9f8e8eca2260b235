use super::{NAME, NOW_MS, check_prefix, db_err, marks, values};
use crate::error::{Error, Result};
use crate::job::{Job, JobId};
use crate::record::*;
use crate::time::Timestamp;
use sqlx::mysql::{MySql, MySqlPool};
use sqlx::{AssertSqlSafe, Row, Transaction};
use std::collections::HashMap;
use std::sync::Arc;

/// A [`JobStore`](crate::JobStore) in MySQL 8 or MariaDB 10.6+.
#[derive(Debug, Clone)]
pub struct MySqlStore {
    pub(super) pool: MySqlPool,
    pub(super) prefix: Arc<str>,
}

/// The scheduling columns of a job, read under lock.
#[derive(Clone)]
struct JobState {
    enabled: bool,
    version: i64,
    running: Option<i64>,
    next: Option<i64>,
    last_token: i64,
}

impl MySqlStore {
    /// A store on an existing pool. Errors when the prefix is not valid.
    pub fn from_pool(pool: MySqlPool, prefix: &str) -> Result<Self> {
        check_prefix(prefix)?;
        Ok(MySqlStore {
            pool,
            prefix: prefix.into(),
        })
    }

    /// The pool.
    pub fn pool(&self) -> &MySqlPool {
        &self.pool
    }

    /// The table prefix.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Creates the tables that do not exist yet. Idempotent; nodes running it at once
    /// take turns on a named lock.
    pub async fn migrate(&self) -> Result<()> {
        super::migrate(&self.pool, &self.prefix).await
    }

    pub(super) fn t(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }

    pub(super) async fn now_in(
        tx: &mut Transaction<'static, MySql>,
        op: &'static str,
    ) -> Result<i64> {
        sqlx::query_scalar(AssertSqlSafe(format!("SELECT {NOW_MS}")))
            .fetch_one(&mut **tx)
            .await
            .map_err(db_err(op))
    }

    async fn job_states(
        &self,
        tx: &mut Transaction<'static, MySql>,
        ids: &[&str],
        op: &'static str,
    ) -> Result<HashMap<String, JobState>> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        let sql = format!(
            "SELECT id, enabled, version, running_run, next_fire_at, last_token FROM {} WHERE id IN ({}) ORDER BY id FOR UPDATE",
            self.t("jobs"),
            marks(ids.len())
        );
        let mut q = sqlx::query(AssertSqlSafe(sql));
        for id in ids {
            q = q.bind(*id);
        }
        let rows = q.fetch_all(&mut **tx).await.map_err(db_err(op))?;
        rows.iter()
            .map(|r| {
                let g = db_err(op);
                Ok((
                    r.try_get::<String, _>("id").map_err(&g)?,
                    JobState {
                        enabled: r.try_get("enabled").map_err(&g)?,
                        version: r.try_get("version").map_err(&g)?,
                        running: r.try_get("running_run").map_err(&g)?,
                        next: r.try_get("next_fire_at").map_err(&g)?,
                        last_token: r.try_get("last_token").map_err(&g)?,
                    },
                ))
            })
            .collect()
    }

    pub(super) async fn upsert_job(
        &self,
        job: &Job,
        next: Option<Timestamp>,
    ) -> Result<UpsertOutcome> {
        let op = "upsert";
        let (def, jobs) = (crate::sql::encode(NAME, job)?, self.t("jobs"));
        let mut tx = self.pool.begin().await.map_err(db_err(op))?;
        let now = Self::now_in(&mut tx, op).await?;
        let stored: Option<String> = sqlx::query_scalar(AssertSqlSafe(format!(
            "SELECT definition FROM {jobs} WHERE id = ? FOR UPDATE"
        )))
        .bind(job.id().as_str())
        .fetch_optional(&mut *tx)
        .await
        .map_err(db_err(op))?;
        let outcome = match stored {
            Some(s) if s == def => UpsertOutcome::Unchanged,
            Some(_) => {
                sqlx::query(AssertSqlSafe(format!(
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
                sqlx::query(AssertSqlSafe(format!(
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
        let row = sqlx::query(AssertSqlSafe(format!(
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
        let rows = sqlx::query(AssertSqlSafe(format!(
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
        let r = sqlx::query(AssertSqlSafe(format!(
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
        let mut tx = self.pool.begin().await.map_err(db_err(op))?;
        let now = Self::now_in(&mut tx, op).await?;
        let stored: Option<String> = sqlx::query_scalar(AssertSqlSafe(format!(
            "SELECT definition FROM {jobs} WHERE id = ? FOR UPDATE"
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
            let resume = if enabled {
                ", next_fire_at = ?, next_trigger = 'schedule', attempt = 0, resume_after = NULL"
            } else {
                ""
            };
            let sql = format!(
                "UPDATE {jobs} SET definition = ?, enabled = ?, version = version + 1, updated_at = ?{resume} WHERE id = ?"
            );
            let mut q = sqlx::query(AssertSqlSafe(sql))
                .bind(crate::sql::encode(NAME, &job.with_enabled(enabled))?)
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
        let jobs = self.t("jobs");
        let mut tx = self.pool.begin().await.map_err(db_err("trigger"))?;
        let exists: Option<i64> = sqlx::query_scalar(AssertSqlSafe(format!(
            "SELECT 1 FROM {jobs} WHERE id = ? FOR UPDATE"
        )))
        .bind(id.as_str())
        .fetch_optional(&mut *tx)
        .await
        .map_err(db_err("trigger"))?;
        if exists.is_none() {
            return Err(Error::not_found("job", id));
        }
        sqlx::query(AssertSqlSafe(format!(
            "UPDATE {jobs} SET next_fire_at = ?, next_trigger = 'manual', attempt = 0, resume_after = NULL WHERE id = ?"
        )))
        .bind(at.as_millis())
        .bind(id.as_str())
        .execute(&mut *tx)
        .await
        .map_err(db_err("trigger"))?;
        tx.commit().await.map_err(db_err("trigger"))
    }

    pub(super) async fn due_fires(
        &self,
        until: Timestamp,
        after: Option<&DueKey>,
        limit: usize,
    ) -> Result<Vec<DueFire>> {
        // Written as an OR (not a row comparison) so that MariaDB builds two index ranges.
        let query = format!(
            "SELECT * FROM {} WHERE enabled = TRUE AND running_run IS NULL AND next_fire_at IS NOT NULL
             AND next_fire_at <= ? {} ORDER BY next_fire_at, id LIMIT ?",
            self.t("jobs"),
            if after.is_some() {
                "AND (next_fire_at > ? OR (next_fire_at = ? AND id > ?))"
            } else {
                ""
            }
        );
        let mut rows = sqlx::query(AssertSqlSafe(query)).bind(until.as_millis());
        if let Some(k) = after {
            rows = rows
                .bind(k.fire_at.as_millis())
                .bind(k.fire_at.as_millis())
                .bind(k.job_id.as_str());
        }
        let rows = rows
            .bind(limit as i64)
            .fetch_all(&self.pool)
            .await
            .map_err(db_err("due"))?;
        rows.iter().map(|r| crate::sql::due_fire(NAME, r)).collect()
    }

    /// One transaction per batch: lock the jobs, decide in request order, insert the
    /// runs in one statement, read their ids back, mark the jobs in one statement.
    pub(super) async fn start(&self, runs: &[StartRun]) -> Result<Vec<StartOutcome>> {
        let op = "start_runs";
        let (jobs, runs_t) = (self.t("jobs"), self.t("runs"));
        let mut tx = self.pool.begin().await.map_err(db_err(op))?;
        let now = Self::now_in(&mut tx, op).await?;
        let ids: Vec<&str> = runs.iter().map(|r| r.job_id.as_str()).collect();
        let mut state = self.job_states(&mut tx, &ids, op).await?;
        let mut out = Vec::with_capacity(runs.len());
        let mut accepted = Vec::new();
        for (i, r) in runs.iter().enumerate() {
            let refusal = match state.get_mut(r.job_id.as_str()) {
                None => Some(StartRefusal::NotFound),
                Some(j) if !j.enabled => Some(StartRefusal::Disabled),
                Some(j) if j.version != r.version as i64 => Some(StartRefusal::Changed),
                Some(j) if j.running.is_some() => Some(StartRefusal::Running),
                Some(j) if j.next != Some(r.fire_at.as_millis()) => Some(StartRefusal::NotDue),
                Some(j) if j.last_token as u64 > r.token => Some(StartRefusal::Fenced {
                    current: j.last_token as u64,
                }),
                Some(j) => {
                    j.running = Some(-1);
                    j.last_token = r.token as i64;
                    accepted.push(i);
                    None
                }
            };
            out.push(StartOutcome::Refused(
                refusal.unwrap_or(StartRefusal::Running),
            ));
        }
        if !accepted.is_empty() {
            let sql = format!(
                "INSERT INTO {runs_t} (job_id, fire_at, `trigger`, node, attempt, token, status, started_at, will_retry,
                 covered_fires, covered_through) VALUES {}",
                vec!["(?, ?, ?, ?, ?, ?, 'running', ?, FALSE, ?, ?)"; accepted.len()].join(", ")
            );
            let mut q = sqlx::query(AssertSqlSafe(sql));
            for &i in &accepted {
                let r = &runs[i];
                q = q
                    .bind(r.job_id.as_str())
                    .bind(r.fire_at.as_millis())
                    .bind(r.trigger.as_str())
                    .bind(&r.node)
                    .bind(r.attempt as i32)
                    .bind(r.token as i64)
                    .bind(now)
                    .bind(crate::sql::span_columns(r.covers).0)
                    .bind(crate::sql::span_columns(r.covers).1);
            }
            let first = q
                .execute(&mut *tx)
                .await
                .map_err(db_err(op))?
                .last_insert_id() as i64;
            let sql = format!(
                "SELECT id, job_id FROM {runs_t} WHERE id >= ? AND status = 'running' AND (job_id, token) IN ({})",
                vec!["(?, ?)"; accepted.len()].join(", ")
            );
            let mut q = sqlx::query_as::<_, (i64, String)>(AssertSqlSafe(sql)).bind(first);
            for &i in &accepted {
                q = q.bind(runs[i].job_id.as_str()).bind(runs[i].token as i64);
            }
            let run_ids: HashMap<String, i64> = q
                .fetch_all(&mut *tx)
                .await
                .map_err(db_err(op))?
                .into_iter()
                .map(|(id, j)| (j, id))
                .collect();
            let mut binds = Vec::new();
            for &i in &accepted {
                let r = &runs[i];
                let run_id = *run_ids.get(r.job_id.as_str()).ok_or_else(|| {
                    Error::backend(NAME, op, true, "an inserted run was not found")
                })?;
                binds.push((r.job_id.as_str(), r.token as i64, run_id));
                out[i] = StartOutcome::Started {
                    run_id: RunId(run_id),
                    started_at: Timestamp::from_millis(now),
                };
            }
            let sql = format!(
                "UPDATE {jobs} j JOIN {} ON j.id = v.id SET j.last_token = v.t, j.running_run = v.r",
                values(&["id", "t", "r"], binds.len())
            );
            let mut q = sqlx::query(AssertSqlSafe(sql));
            for (id, token, run) in &binds {
                q = q.bind(*id).bind(*token).bind(*run);
            }
            q.execute(&mut *tx).await.map_err(db_err(op))?;
        }
        tx.commit().await.map_err(db_err(op))?;
        Ok(out)
    }
}
