//! The one-statement start and finish on PostgreSQL: array parameters (`UNNEST`) and
//! data-modifying CTEs decide and write a whole batch in one round trip, holding to
//! [`rules`](crate::store::rules) (the conformance suite's `rules_agree` drives every
//! combination of state through them).

use super::{NOW_MS, PgDialect, db_err};
use crate::error::Result;
use crate::record::*;
use crate::sql::Dialect;
use crate::store::rules;
use crate::time::Timestamp;
use sqlx::{AssertSqlSafe, Row};
use std::collections::HashMap;

impl PgDialect {
    /// Lets the jobs `ids`, just finished, take a queued release.
    async fn take_after_finish(&self, ids: &[&str]) -> Result<()> {
        let op = "finish_runs";
        let mut tx = self.begin(op).await?;
        let now = crate::sql::now_in(self, &mut tx, op).await?;
        crate::sql::releases::take_in(self, &mut tx, op, ids, now).await?;
        self.commit(tx, op).await
    }

    /// `upsert_many`'s new jobs in one statement: the batch as arrays (`UNNEST`),
    /// inserted unless their id is stored (`ON CONFLICT DO NOTHING`); answers the
    /// indexes inserted. One round trip and one parse for the whole batch, against a
    /// `SELECT … FOR UPDATE` and a multi-row insert per 500 jobs.
    pub(super) async fn insert_absent_jobs(
        &self,
        jobs: &[(crate::Job, Option<Timestamp>)],
        defs: &[String],
    ) -> Result<Vec<usize>> {
        let table = self.t("jobs");
        let rows = sqlx::query(AssertSqlSafe(format!(
            "WITH req AS (
                 SELECT * FROM UNNEST($1::text[], $2::text[], $3::bool[], $4::int8[])
                     WITH ORDINALITY AS r(id, def, enabled, next, ord)
             ), now AS (
                 SELECT {NOW_MS} AS ms
             ), ins AS (
                 INSERT INTO {table} (id, definition, version, enabled, next_fire_at, next_trigger, attempt,
                     last_token, created_at, updated_at)
                 SELECT id, def, 1, enabled, next, 'schedule', 0, 0, now.ms, now.ms FROM req, now
                 ON CONFLICT (id) DO NOTHING
                 RETURNING id
             )
             SELECT r.ord FROM req r JOIN ins ON ins.id = r.id"
        )))
        .bind(jobs.iter().map(|(j, _)| j.id().to_string()).collect::<Vec<_>>())
        .bind(defs)
        .bind(jobs.iter().map(|(j, _)| j.enabled()).collect::<Vec<_>>())
        .bind(
            jobs.iter()
                .map(|(_, next)| next.map(Timestamp::as_millis))
                .collect::<Vec<_>>(),
        )
        .fetch_all(&self.pool)
        .await
        .map_err(db_err("upsert_many"))?;
        rows.iter()
            .map(|r| {
                r.try_get::<i64, _>("ord")
                    .map(|o| (o - 1) as usize)
                    .map_err(db_err("upsert_many"))
            })
            .collect()
    }

    /// One statement for the whole batch: lock the qualifying job rows, insert the
    /// runs, mark the jobs running. Refused items are explained by a second read.
    pub(super) async fn start_batch(&self, runs: &[StartRun]) -> Result<Vec<StartOutcome>> {
        let (jobs, runs_t) = (self.t("jobs"), self.t("runs"));
        let run_id = crate::sql::partitions::run_id_for("n.ms", &self.next_run_id(), Self::DIV);
        let col = |f: fn(&StartRun) -> i64| runs.iter().map(f).collect::<Vec<i64>>();
        let contexts: Vec<Option<String>> = runs.iter().map(|r| r.context.to_stored()).collect();
        let sql = format!(
            "WITH req AS (
                 SELECT * FROM UNNEST($1::text[], $2::int8[], $3::int8[], $4::int8[], $5::text[], $6::int8[], $7::text[],
                                      $8::int8[], $9::int8[], $10::text[])
                     WITH ORDINALITY AS r(job_id, fire_at, version, token, node, attempt, trig, cfires, cthrough, context, ord)
             ), locked AS (
                 SELECT j.id, r.ord FROM {jobs} j JOIN req r ON j.id = r.job_id
                 WHERE j.enabled AND j.version = r.version AND j.running_run IS NULL
                   AND j.next_fire_at = r.fire_at AND j.last_token <= r.token
                 ORDER BY j.id FOR UPDATE OF j
             ), ok AS (
                 SELECT DISTINCT ON (r.job_id) r.* FROM req r JOIN locked l ON l.ord = r.ord ORDER BY r.job_id, r.ord
             ), ins AS (
                 INSERT INTO {runs_t} (id, job_id, fire_at, trigger, node, attempt, token, status, started_at, will_retry,
                     covered_fires, covered_through, context)
                 SELECT {run_id}, job_id, fire_at, trig, node, attempt::int4, token, 'running', n.ms, false, cfires, cthrough, context
                 FROM ok, (SELECT {NOW_MS} AS ms) n
                 RETURNING id, job_id, token, started_at
             ), upd AS (
                 UPDATE {jobs} j SET last_token = ins.token, running_run = ins.id FROM ins WHERE j.id = ins.job_id
             )
             SELECT r.ord, ins.id AS run_id, ins.started_at, j.id IS NOT NULL AS found, j.enabled, j.version,
                    j.running_run, j.next_fire_at, j.last_token
             FROM req r
             LEFT JOIN {jobs} j ON j.id = r.job_id
             LEFT JOIN ok ON ok.ord = r.ord
             LEFT JOIN ins ON ins.job_id = ok.job_id
             ORDER BY r.ord"
        );
        let query = || {
            sqlx::query(AssertSqlSafe(sql.clone()))
                .bind(
                    runs.iter()
                        .map(|r| r.job_id.to_string())
                        .collect::<Vec<_>>(),
                )
                .bind(col(|r| r.fire_at.as_millis()))
                .bind(col(|r| r.version as i64))
                .bind(col(|r| r.token as i64))
                .bind(runs.iter().map(|r| r.node.clone()).collect::<Vec<_>>())
                .bind(col(|r| i64::from(r.attempt)))
                .bind(
                    runs.iter()
                        .map(|r| r.trigger.as_str().to_string())
                        .collect::<Vec<_>>(),
                )
                .bind(
                    runs.iter()
                        .map(|r| crate::sql::decode::span_columns(r.covers).0)
                        .collect::<Vec<_>>(),
                )
                .bind(
                    runs.iter()
                        .map(|r| crate::sql::decode::span_columns(r.covers).1)
                        .collect::<Vec<_>>(),
                )
                .bind(contexts.clone())
        };
        let rows = match query().fetch_all(&self.pool).await {
            // A day with no partition of the run log (maintenance has not made it):
            // make the missing days and try once more.
            Err(e) if missing_partition(&e) => {
                tracing::warn!(
                    "a run started on a day the run log has no partition for; making it"
                );
                crate::sql::partitions::prepare(self).await?;
                query().fetch_all(&self.pool).await
            }
            other => other,
        }
        .map_err(db_err("start_runs"))?;
        // The job columns are the state before this statement; refusals are explained
        // in request order, as if the items ran one after another. A job running a
        // run under the request's token may be running the request's own run (a
        // repeated start): those runs are read, only then.
        let int =
            |row: &sqlx::postgres::PgRow, c: &str| row.try_get::<Option<i64>, _>(c).ok().flatten();
        let repeats: Vec<i64> = runs
            .iter()
            .zip(&rows)
            .filter(|(r, row)| {
                int(row, "run_id").is_none() && int(row, "last_token") == Some(r.token as i64)
            })
            .filter_map(|(_, row)| int(row, "running_run"))
            .collect();
        let recorded = self.run_states(&repeats).await?;
        let mut started_jobs = std::collections::HashSet::new();
        let mut out = Vec::with_capacity(runs.len());
        for (r, row) in runs.iter().zip(&rows) {
            let i = |c: &str| int(row, c);
            if let (Some(id), Some(at)) = (i("run_id"), i("started_at")) {
                started_jobs.insert(r.job_id.as_str());
                out.push(StartOutcome::Started {
                    run_id: RunId(id),
                    started_at: Timestamp::from_millis(at),
                });
                continue;
            }
            let mine = i("running_run")
                .and_then(|id| recorded.get(&id).map(|(s, at)| (id, s, *at)))
                .filter(|(_, s, _)| rules::recorded_by(s, r));
            let last = i("last_token").unwrap_or(0) as u64;
            let refusal = if !row.try_get::<bool, _>("found").unwrap_or(false) {
                StartRefusal::NotFound
            } else if let Some((id, _, at)) = mine {
                out.push(StartOutcome::Started {
                    run_id: RunId(id),
                    started_at: Timestamp::from_millis(at),
                });
                continue;
            } else if !row
                .try_get::<Option<bool>, _>("enabled")
                .ok()
                .flatten()
                .unwrap_or(false)
            {
                StartRefusal::Disabled
            } else if i("version") != Some(r.version as i64) {
                StartRefusal::Changed
            } else if i("running_run").is_some() || started_jobs.contains(r.job_id.as_str()) {
                StartRefusal::Running
            } else if i("next_fire_at") != Some(r.fire_at.as_millis()) {
                StartRefusal::NotDue
            } else if last > r.token {
                StartRefusal::Fenced { current: last }
            } else {
                // Locked by a concurrent start that won the row.
                StartRefusal::Running
            };
            out.push(StartOutcome::Refused(refusal));
        }
        Ok(out)
    }

    /// The runs `ids` (those that exist) with their start instants (ms), by id.
    async fn run_states(
        &self,
        ids: &[i64],
    ) -> Result<std::collections::HashMap<i64, (rules::RunState, i64)>> {
        if ids.is_empty() {
            return Ok(Default::default());
        }
        let rows: Vec<(i64, String, String, i64, i64, i32, i64)> = sqlx::query_as(AssertSqlSafe(format!(
            "SELECT id, job_id, status, token, fire_at, attempt, started_at FROM {} WHERE id = ANY($1)",
            self.t("runs")
        )))
        .bind(ids)
        .fetch_all(&self.pool)
        .await
        .map_err(db_err("start_runs"))?;
        rows.into_iter()
            .map(|(id, job, status, token, fire_at, attempt, started_at)| {
                let state = rules::RunState {
                    job_id: crate::job::JobId::new(&job)?,
                    running: status == RunStatus::Running.as_str(),
                    token: token as u64,
                    fire_at: Timestamp::from_millis(fire_at),
                    attempt: u32::try_from(attempt).unwrap_or(0),
                };
                Ok((id, (state, started_at)))
            })
            .collect()
    }

    /// One statement for the whole batch: lock the jobs and runs, check the tokens,
    /// write the runs, the jobs' next state (when unchanged since the start) and the
    /// alarm events. Refused items are explained by a second read.
    pub(super) async fn finish_batch(&self, runs: &[FinishRun]) -> Result<Vec<FinishOutcome>> {
        if runs.iter().any(|f| !f.releases.is_empty()) {
            // Releases are queued and taken in the finish's transaction: the
            // shared SQL store's finish, which decides in Rust over locked rows.
            return crate::sql::batch::finish(self, runs).await;
        }
        let (jobs, runs_t, alarms) = (self.t("jobs"), self.t("runs"), self.t("alarms"));
        let queue = self.t("releases");
        let i64s = |f: fn(&FinishRun) -> i64| runs.iter().map(f).collect::<Vec<i64>>();
        fn next(f: &FinishRun) -> Option<&FireState> {
            f.next.as_ref()
        }
        let next_contexts: Vec<Option<String>> = runs
            .iter()
            .map(|f| next(f).and_then(|n| n.context.to_stored()))
            .collect();
        let mut alarm_runs = Vec::new();
        let mut alarm_events = Vec::new();
        for f in runs {
            for e in &f.alarms {
                alarm_runs.push(f.run_id.0);
                alarm_events.push(crate::sql::decode::encode(super::NAME, e)?);
            }
        }
        let rows: Vec<(i64, i64, Option<bool>, String, bool)> = sqlx::query_as(AssertSqlSafe(format!(
            "WITH req AS (
                 SELECT * FROM UNNEST($1::int8[], $2::text[], $3::int8[], $4::bool[], $5::text[], $6::text[], $7::bool[],
                                      $8::int8[], $9::int8[], $10::text[], $11::int8[], $14::int8[], $15::text[])
                     AS r(run_id, job_id, token, takeover, status, error, will_retry, version, next_at, next_trigger, next_attempt,
                          next_resume, next_context)
             ), jl AS (
                 SELECT id, last_token, version, next_fire_at FROM {jobs}
                 WHERE id IN (SELECT job_id FROM req) ORDER BY id FOR UPDATE
             ), rl AS (
                 SELECT id, job_id, token, fire_at FROM {runs_t}
                 WHERE id IN (SELECT run_id FROM req) AND status = 'running' ORDER BY id FOR UPDATE
             ), ok AS (
                 SELECT DISTINCT ON (r.run_id) r.*, (jl.version = r.version AND jl.next_fire_at = rl.fire_at) AS resched
                 FROM req r JOIN rl ON rl.id = r.run_id AND rl.job_id = r.job_id
                 LEFT JOIN jl ON jl.id = r.job_id
                 WHERE CASE WHEN r.takeover
                       THEN r.token >= COALESCE(jl.last_token, rl.token) AND r.token >= rl.token
                       ELSE r.token = rl.token AND r.token >= COALESCE(jl.last_token, rl.token) END
                 ORDER BY r.run_id
             ), uj AS (
                 UPDATE {jobs} j SET last_token = ok.token,
                     running_run = CASE WHEN j.running_run = ok.run_id THEN NULL ELSE j.running_run END,
                     next_fire_at = CASE WHEN ok.resched THEN ok.next_at ELSE j.next_fire_at END,
                     next_trigger = CASE WHEN ok.resched THEN ok.next_trigger ELSE j.next_trigger END,
                     attempt = CASE WHEN ok.resched THEN ok.next_attempt::int4 ELSE j.attempt END,
                     resume_after = CASE WHEN ok.resched THEN ok.next_resume ELSE j.resume_after END,
                     next_context = CASE WHEN ok.resched THEN ok.next_context ELSE j.next_context END
                 FROM ok WHERE j.id = ok.job_id
             ), ur AS (
                 UPDATE {runs_t} ru SET status = ok.status, ended_at = {NOW_MS}, error = ok.error, will_retry = ok.will_retry
                 FROM ok WHERE ru.id = ok.run_id
                 RETURNING ru.id, ru.ended_at
             ), al AS (
                 INSERT INTO {alarms} (event, status, attempts, next_attempt_at, created_at)
                 SELECT a.event, 'pending', 0, {NOW_MS}, {NOW_MS}
                 FROM UNNEST($12::int8[], $13::text[]) WITH ORDINALITY AS a(run_id, event, ord)
                 JOIN ok ON ok.run_id = a.run_id ORDER BY a.ord
             )
             SELECT ur.id, ur.ended_at, ok.resched, ok.job_id,
                    EXISTS (SELECT 1 FROM {queue} q WHERE q.job_id = ok.job_id AND q.taken_at IS NULL) AS queued
             FROM ur JOIN ok ON ok.run_id = ur.id"
        )))
        .bind(i64s(|f| f.run_id.0))
        .bind(runs.iter().map(|f| f.job_id.to_string()).collect::<Vec<_>>())
        .bind(i64s(|f| f.token as i64))
        .bind(runs.iter().map(|f| f.takeover).collect::<Vec<_>>())
        .bind(runs.iter().map(|f| f.status.as_str().to_string()).collect::<Vec<_>>())
        .bind(
            runs.iter()
                .map(|f| f.error.clone().map(crate::sql::storable))
                .collect::<Vec<_>>(),
        )
        .bind(runs.iter().map(|f| f.will_retry).collect::<Vec<_>>())
        .bind(i64s(|f| f.version as i64))
        .bind(runs.iter().map(|f| next(f).map(|n| n.at.as_millis())).collect::<Vec<_>>())
        .bind(
            runs.iter()
                .map(|f| next(f).map_or(TriggerKind::Schedule, |n| n.trigger).as_str().to_string())
                .collect::<Vec<_>>(),
        )
        .bind(i64s(|f| f.next.as_ref().map_or(0, |n| i64::from(n.attempt))))
        .bind(alarm_runs)
        .bind(alarm_events)
        .bind(
            runs.iter()
                .map(|f| next(f).and_then(|n| n.resume_after).map(Timestamp::as_millis))
                .collect::<Vec<_>>(),
        )
        .bind(next_contexts)
        .fetch_all(&self.pool)
        .await
        .map_err(db_err("finish_runs"))?;
        let mut queued: Vec<&str> = rows.iter().filter(|r| r.4).map(|r| r.3.as_str()).collect();
        if !queued.is_empty() {
            // A finished job with releases queued takes one in a transaction of its
            // own (a node that dies before it leaves it to the maintenance pass).
            queued.sort_unstable();
            queued.dedup();
            // The finishes are written: a failure here only delays the take to the
            // next maintenance pass.
            if let Err(e) = self.take_after_finish(&queued).await {
                tracing::warn!(error = %e, "a finished job's queued release waits for the maintenance pass");
            }
        }
        let mut done: HashMap<i64, (i64, bool)> = rows
            .into_iter()
            .map(|(id, at, r, _, _)| (id, (at, r.unwrap_or(false))))
            .collect();
        let refused: Vec<&FinishRun> = runs
            .iter()
            .filter(|f| !done.contains_key(&f.run_id.0))
            .collect();
        // A refusal names the last token of the job the request names (as the rules
        // read it), which is not the run's own job when the two differ.
        let state: HashMap<i64, (String, u64, u64)> = if refused.is_empty() {
            HashMap::new()
        } else {
            let rows: Vec<(i64, String, i64, Option<i64>)> =
                sqlx::query_as(AssertSqlSafe(format!(
                    "SELECT ru.id, ru.status, ru.token, j.last_token
                 FROM UNNEST($1::int8[], $2::text[]) AS r(run_id, job_id)
                 JOIN {runs_t} ru ON ru.id = r.run_id
                 LEFT JOIN {jobs} j ON j.id = r.job_id"
                )))
                .bind(refused.iter().map(|f| f.run_id.0).collect::<Vec<_>>())
                .bind(
                    refused
                        .iter()
                        .map(|f| f.job_id.to_string())
                        .collect::<Vec<_>>(),
                )
                .fetch_all(&self.pool)
                .await
                .map_err(db_err("finish_runs"))?;
            rows.into_iter()
                .map(|(id, status, token, last)| {
                    (
                        id,
                        (
                            status,
                            token as u64,
                            last.map_or(token as u64, |l| l as u64),
                        ),
                    )
                })
                .collect()
        };
        Ok(runs
            .iter()
            .map(|f| match done.remove(&f.run_id.0) {
                Some((at, rescheduled)) => FinishOutcome::Finished {
                    ended_at: Timestamp::from_millis(at),
                    rescheduled,
                },
                None => FinishOutcome::Refused(match state.get(&f.run_id.0) {
                    None => FinishRefusal::NotFound,
                    Some((status, _, _)) if status != RunStatus::Running.as_str() => {
                        FinishRefusal::NotRunning
                    }
                    Some((_, _, current)) => FinishRefusal::Fenced { current: *current },
                }),
            })
            .collect())
    }
}

/// Whether PostgreSQL refused a row because no partition takes it (SQLSTATE 23514,
/// raised for a run whose day has no partition of the run log; the run log has no
/// other check).
fn missing_partition(e: &sqlx::Error) -> bool {
    e.as_database_error()
        .and_then(|d| d.code())
        .is_some_and(|c| c == "23514")
}
