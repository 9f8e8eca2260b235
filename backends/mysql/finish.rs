//! Batched finishes for [`MySqlStore`]: one transaction, a fixed number of statements.

use super::store::MySqlStore;
use super::{NAME, db_err, marks, values};
use crate::error::Result;
use crate::record::*;
use crate::time::Timestamp;
use sqlx::{AssertSqlSafe, Row};
use std::collections::HashMap;

struct RunState {
    job_id: String,
    running: bool,
    token: i64,
    fire_at: i64,
}

struct JobState {
    last_token: i64,
    version: i64,
    next: Option<i64>,
    running: Option<i64>,
}

impl MySqlStore {
    /// Locks the jobs, then the runs (the order starts use too), decides each item in
    /// request order, then writes runs, jobs and alarm events with one statement each.
    pub(super) async fn finish(&self, runs: &[FinishRun]) -> Result<Vec<FinishOutcome>> {
        let op = "finish_runs";
        let (jobs, runs_t, alarms_t) = (self.t("jobs"), self.t("runs"), self.t("alarms"));
        let mut tx = self.pool.begin().await.map_err(db_err(op))?;
        let now = Self::now_in(&mut tx, op).await?;

        let mut q = sqlx::query(AssertSqlSafe(format!(
            "SELECT id, last_token, version, next_fire_at, running_run FROM {jobs} WHERE id IN ({}) ORDER BY id FOR UPDATE",
            marks(runs.len())
        )));
        for f in runs {
            q = q.bind(f.job_id.as_str());
        }
        let mut job_state: HashMap<String, JobState> = HashMap::new();
        for r in q.fetch_all(&mut *tx).await.map_err(db_err(op))? {
            let g = db_err(op);
            job_state.insert(
                r.try_get("id").map_err(&g)?,
                JobState {
                    last_token: r.try_get("last_token").map_err(&g)?,
                    version: r.try_get("version").map_err(&g)?,
                    next: r.try_get("next_fire_at").map_err(&g)?,
                    running: r.try_get("running_run").map_err(&g)?,
                },
            );
        }
        let mut q = sqlx::query(AssertSqlSafe(format!(
            "SELECT id, job_id, status, token, fire_at FROM {runs_t} WHERE id IN ({}) ORDER BY id FOR UPDATE",
            marks(runs.len())
        )));
        for f in runs {
            q = q.bind(f.run_id.0);
        }
        let mut run_state: HashMap<i64, RunState> = HashMap::new();
        for r in q.fetch_all(&mut *tx).await.map_err(db_err(op))? {
            let g = db_err(op);
            let status: String = r.try_get("status").map_err(&g)?;
            run_state.insert(
                r.try_get("id").map_err(&g)?,
                RunState {
                    job_id: r.try_get("job_id").map_err(&g)?,
                    running: status == RunStatus::Running.as_str(),
                    token: r.try_get("token").map_err(&g)?,
                    fire_at: r.try_get("fire_at").map_err(&g)?,
                },
            );
        }

        let mut out = Vec::with_capacity(runs.len());
        let mut done: Vec<&FinishRun> = Vec::new();
        let mut job_writes: HashMap<&str, (i64, i64, Option<&NextFire>)> = HashMap::new();
        for f in runs {
            let Some(run) = run_state.get_mut(&f.run_id.0) else {
                out.push(FinishOutcome::Refused(FinishRefusal::NotFound));
                continue;
            };
            if !run.running {
                out.push(FinishOutcome::Refused(FinishRefusal::NotRunning));
                continue;
            }
            let job = job_state.get_mut(f.job_id.as_str());
            let current = job.as_ref().map_or(run.token, |j| j.last_token);
            let token = f.token as i64;
            let ok = if f.takeover {
                token >= current && token >= run.token
            } else {
                token == run.token && token >= current
            };
            if !ok || run.job_id != f.job_id.as_str() {
                out.push(FinishOutcome::Refused(FinishRefusal::Fenced {
                    current: current as u64,
                }));
                continue;
            }
            run.running = false;
            let mut rescheduled = false;
            if let Some(j) = job {
                rescheduled = j.version == f.version as i64 && j.next == Some(run.fire_at);
                j.last_token = token;
                if j.running == Some(f.run_id.0) {
                    j.running = None;
                }
                if rescheduled {
                    j.next = f.next.at.map(Timestamp::as_millis);
                }
                job_writes.insert(
                    f.job_id.as_str(),
                    (token, f.run_id.0, rescheduled.then_some(&f.next)),
                );
            }
            done.push(f);
            out.push(FinishOutcome::Finished {
                ended_at: Timestamp::from_millis(now),
                rescheduled,
            });
        }

        if !done.is_empty() {
            let sql = format!(
                "UPDATE {runs_t} r JOIN {} ON r.id = v.id
                 SET r.status = v.s, r.error = v.e, r.will_retry = v.w, r.ended_at = ?",
                values(&["id", "s", "e", "w"], done.len())
            );
            let mut q = sqlx::query(AssertSqlSafe(sql));
            for f in &done {
                q = q
                    .bind(f.run_id.0)
                    .bind(f.status.as_str())
                    .bind(f.error.clone())
                    .bind(f.will_retry);
            }
            q = q.bind(now);
            q.execute(&mut *tx).await.map_err(db_err(op))?;
        }
        if !job_writes.is_empty() {
            // `n` (rescheduled) picks the new next fire or keeps the stored one.
            let sql = format!(
                "UPDATE {jobs} j JOIN {} ON j.id = v.id
                 SET j.last_token = v.t,
                     j.running_run = IF(j.running_run = v.r, NULL, j.running_run),
                     j.next_fire_at = IF(v.n, v.at, j.next_fire_at),
                     j.next_trigger = IF(v.n, v.tr, j.next_trigger),
                     j.attempt = IF(v.n, v.a, j.attempt),
                     j.resume_after = IF(v.n, v.ra, j.resume_after)",
                values(
                    &["id", "t", "r", "n", "at", "tr", "a", "ra"],
                    job_writes.len()
                )
            );
            let mut q = sqlx::query(AssertSqlSafe(sql));
            for (id, (token, run, next)) in &job_writes {
                q = q
                    .bind(*id)
                    .bind(*token)
                    .bind(*run)
                    .bind(next.is_some())
                    .bind(next.and_then(|n| n.at.map(Timestamp::as_millis)))
                    .bind(next.map_or("", |n| n.trigger.as_str()))
                    .bind(next.map_or(0, |n| n.attempt as i32))
                    .bind(next.and_then(|n| n.resume_after.map(Timestamp::as_millis)));
            }
            q.execute(&mut *tx).await.map_err(db_err(op))?;
        }
        let events: Vec<String> = done
            .iter()
            .flat_map(|f| f.alarms.iter())
            .map(|e| crate::sql::encode(NAME, e))
            .collect::<Result<_>>()?;
        if !events.is_empty() {
            let sql = format!(
                "INSERT INTO {alarms_t} (event, status, attempts, next_attempt_at, created_at) VALUES {}",
                vec!["(?, 'pending', 0, ?, ?)"; events.len()].join(", ")
            );
            let mut q = sqlx::query(AssertSqlSafe(sql));
            for e in events {
                q = q.bind(e).bind(now).bind(now);
            }
            q.execute(&mut *tx).await.map_err(db_err(op))?;
        }
        tx.commit().await.map_err(db_err(op))?;
        Ok(out)
    }
}
