//! The one-statement start and finish on PostgreSQL: array parameters (`UNNEST`) and
//! data-modifying CTEs decide and write a whole batch in one round trip, holding to
//! [`rules`](crate::store::rules) (the conformance suite's `rules_agree` drives every
//! combination of state through them).

use super::{NOW_MS, PgDialect, db_err};
use crate::backends::sql::Dialect;
use crate::error::Result;
use crate::record::*;
use crate::store::rules;
use crate::time::Timestamp;
use sqlx::{AssertSqlSafe, Row};
use std::collections::HashMap;

impl PgDialect {
    /// Lets the jobs `ids`, just finished, take a queued release.
    async fn take_after_finish(&self, ids: &[&str]) -> Result<()> {
        let op = "finish_runs";
        let mut tx = self.begin(op).await?;
        let now = crate::backends::sql::now_in(self, &mut tx, op).await?;
        crate::backends::sql::releases::take_in(self, &mut tx, op, ids, now).await?;
        self.commit(tx, op).await
    }

    /// `upsert_many`'s new jobs in one statement: the batch as arrays (`UNNEST`),
    /// inserted unless their id is stored (`ON CONFLICT DO NOTHING`); answers the
    /// indexes inserted. One round trip and one parse for the whole batch, against a
    /// `SELECT … FOR UPDATE` and a multi-row insert per 500 jobs.
    pub(super) async fn insert_absent_jobs(
        &self,
        jobs: &[(crate::job::Job, Option<Timestamp>)],
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

    /// One statement for the whole batch: lock the qualifying job rows and write each
    /// run into its job's row. Refused items are explained from the rows as they
    /// were before the statement, in the same statement.
    pub(super) async fn start_batch(&self, runs: &[StartRun]) -> Result<Vec<StartOutcome>> {
        let jobs = self.t("jobs");
        let run_id =
            crate::backends::sql::run_ids::run_id_for("n.ms", &self.next_run_id(), Self::DIV);
        let col = |f: fn(&StartRun) -> i64| runs.iter().map(f).collect::<Vec<i64>>();
        let contexts: Vec<Option<String>> = runs.iter().map(|r| r.context.to_stored()).collect();
        let sql = format!(
            "WITH req AS (
                 SELECT * FROM UNNEST($1::text[], $2::int8[], $3::int8[], $4::int8[], $5::text[], $6::int8[], $7::text[],
                                      $8::int8[], $9::int8[], $10::text[])
                     WITH ORDINALITY AS r(job_id, fire_at, version, token, node, attempt, trig, cfires, cthrough, context, ord)
             ), n AS (
                 SELECT {NOW_MS} AS ms
             ), locked AS (
                 SELECT j.id, r.ord FROM {jobs} j JOIN req r ON j.id = r.job_id
                 WHERE j.enabled AND j.version = r.version AND j.running_run IS NULL
                   AND j.next_fire_at = r.fire_at AND j.last_token <= r.token
                 ORDER BY j.id FOR UPDATE OF j
             ), ok AS (
                 SELECT DISTINCT ON (r.job_id) r.* FROM req r JOIN locked l ON l.ord = r.ord ORDER BY r.job_id, r.ord
             ), upd AS (
                 UPDATE {jobs} j SET last_token = ok.token, running_run = {run_id}, run_node = ok.node,
                     run_fire_at = ok.fire_at, run_trigger = ok.trig, run_attempt = ok.attempt::int4, run_token = ok.token,
                     run_started_at = n.ms, run_covered_fires = ok.cfires, run_covered_through = ok.cthrough,
                     run_context = ok.context
                 FROM ok, n WHERE j.id = ok.job_id
                 RETURNING j.id, ok.ord, j.running_run, j.run_started_at
             )
             SELECT upd.id AS job_id, upd.ord AS written, NULL::int8 AS ord, upd.running_run AS run_id,
                    upd.run_started_at AS started_at,
                    NULL::bool AS found, NULL::bool AS enabled, NULL::int8 AS version, NULL::int8 AS running_run,
                    NULL::int8 AS next_fire_at, NULL::int8 AS last_token, NULL::text AS run_node, NULL::int8 AS run_token,
                    NULL::int8 AS run_fire_at, NULL::int4 AS run_attempt, NULL::int8 AS prev_started
             FROM upd
             UNION ALL
             SELECT r.job_id, NULL, r.ord, NULL, NULL, j.id IS NOT NULL, j.enabled, j.version, j.running_run,
                    j.next_fire_at, j.last_token, j.run_node, j.run_token, j.run_fire_at, j.run_attempt, j.run_started_at
             FROM req r LEFT JOIN {jobs} j ON j.id = r.job_id"
        );
        let rows = sqlx::query(AssertSqlSafe(sql))
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
                    .map(|r| crate::backends::sql::decode::span_columns(r.covers).0)
                    .collect::<Vec<_>>(),
            )
            .bind(
                runs.iter()
                    .map(|r| crate::backends::sql::decode::span_columns(r.covers).1)
                    .collect::<Vec<_>>(),
            )
            .bind(contexts)
            .fetch_all(&self.pool)
            .await
            .map_err(db_err("start_runs"))?;
        // The job columns are the state before this statement; refusals are explained
        // in request order, as if the items ran one after another. A job running a
        // run under the request's token, in its row, may be running the request's own
        // run (a repeated start).
        let int =
            |row: &sqlx::postgres::PgRow, c: &str| row.try_get::<Option<i64>, _>(c).ok().flatten();
        // Each request's start as written, or its job as it was before.
        let rows = super::by_place(&rows, runs.len(), "start_runs")?;
        let mut started_jobs = std::collections::HashSet::new();
        let mut out = Vec::with_capacity(runs.len());
        for (r, row) in runs.iter().zip(rows) {
            let i = |c: &str| int(row, c);
            if let (Some(id), Some(at)) = (i("run_id"), i("started_at")) {
                started_jobs.insert(r.job_id.as_str());
                out.push(StartOutcome::Started {
                    run_id: RunId(id),
                    started_at: Timestamp::from_millis(at),
                });
                continue;
            }
            let in_row = row
                .try_get::<Option<String>, _>("run_node")
                .ok()
                .flatten()
                .is_some();
            let mine = i("running_run")
                .filter(|_| in_row)
                .map(|id| {
                    let state = rules::RunState {
                        job_id: r.job_id.clone(),
                        running: true,
                        token: i("run_token").unwrap_or(0) as u64,
                        fire_at: Timestamp::from_millis(i("run_fire_at").unwrap_or(0)),
                        attempt: row
                            .try_get::<Option<i32>, _>("run_attempt")
                            .ok()
                            .flatten()
                            .map_or(0, |a| u32::try_from(a).unwrap_or(0)),
                    };
                    (id, state, i("prev_started").unwrap_or(0))
                })
                .filter(|(_, s, _)| {
                    !started_jobs.contains(r.job_id.as_str()) && rules::recorded_by(s, r)
                });
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

    /// One statement for the whole batch of runs kept in their job rows: lock the
    /// jobs, check the tokens, insert the run rows from the job rows with the
    /// outcomes, write the jobs' next state (when unchanged since the start) and
    /// leases, and the alarm events. The items it does not finish (refused, or a run
    /// in a run row of its own) go through the shared SQL finish, which records or
    /// explains them. A run row whose day has no partition makes it and tries again.
    pub(super) async fn finish_batch(&self, runs: &[FinishRun]) -> Result<Vec<FinishOutcome>> {
        if runs.iter().any(|f| !f.releases.is_empty()) {
            // Releases are queued and taken in the finish's transaction: the
            // shared SQL store's finish, which decides in Rust over locked rows.
            return self
                .with_days(runs, || crate::backends::sql::batch::finish(self, runs))
                .await;
        }
        let rows = self.with_days(runs, || self.finish_in_rows(runs)).await?;
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
        let mut out: Vec<Option<FinishOutcome>> = runs
            .iter()
            .map(|f| {
                done.remove(&f.run_id.0)
                    .map(|(at, rescheduled)| FinishOutcome::Finished {
                        ended_at: Timestamp::from_millis(at),
                        rescheduled,
                    })
            })
            .collect();
        let rest: Vec<usize> = (0..runs.len()).filter(|i| out[*i].is_none()).collect();
        if !rest.is_empty() {
            let again: Vec<FinishRun> = rest.iter().map(|&i| runs[i].clone()).collect();
            let answers = self
                .with_days(&again, || crate::backends::sql::batch::finish(self, &again))
                .await?;
            for (i, a) in rest.into_iter().zip(answers) {
                out[i] = Some(a);
            }
        }
        Ok(out
            .into_iter()
            .map(|o| o.expect("every item answered"))
            .collect())
    }

    /// Runs `write` once more after making the partitions of the run ids' days when
    /// it failed for want of one.
    async fn with_days<T, F, Fut>(&self, runs: &[FinishRun], write: F) -> Result<T>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        match write().await {
            Err(crate::error::Error::Backend { source, .. })
                if source
                    .downcast_ref::<sqlx::Error>()
                    .is_some_and(missing_partition) =>
            {
                tracing::warn!(
                    "a run finished on a day the run log has no partition for; making it"
                );
                let ids: Vec<i64> = runs.iter().map(|f| f.run_id.0).collect();
                crate::backends::sql::partitions::add_days_of(self, &ids).await?;
                write().await
            }
            other => other,
        }
    }

    /// The fused finish of the runs kept in job rows: `(run id, ended at, rescheduled,
    /// job id, has a release queued)` for each run it finished.
    async fn finish_in_rows(
        &self,
        runs: &[FinishRun],
    ) -> Result<Vec<(i64, i64, Option<bool>, String, bool)>> {
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
                alarm_events.push(crate::backends::sql::decode::encode(super::NAME, e)?);
            }
        }
        let lease = |f: &FinishRun| match f.lease {
            LeaseEnd::Untouched => (0i64, 0i64),
            LeaseEnd::Release => (1, 0),
            LeaseEnd::Keep(ttl) => (2, crate::time::duration_ms(ttl)),
        };
        let clear = crate::backends::sql::running::CLEAR_RUN;
        sqlx::query_as(AssertSqlSafe(format!(
            "WITH req AS (
                 SELECT * FROM UNNEST($1::int8[], $2::text[], $3::int8[], $4::bool[], $5::text[], $6::text[], $7::bool[],
                                      $8::int8[], $9::int8[], $10::text[], $11::int8[], $14::int8[], $15::text[],
                                      $16::int8[], $17::int8[], $18::text[])
                     AS r(run_id, job_id, token, takeover, status, error, will_retry, version, next_at, next_trigger, next_attempt,
                          next_resume, next_context, lease, lease_ms, executor)
             ), n AS (
                 SELECT {NOW_MS} AS ms
             ), jl AS (
                 SELECT id, last_token, version, next_fire_at, running_run, run_node, run_fire_at, run_trigger, run_attempt,
                        run_token, run_started_at, run_covered_fires, run_covered_through, run_context
                 FROM {jobs} WHERE id IN (SELECT job_id FROM req) ORDER BY id FOR UPDATE
             ), ok AS (
                 SELECT DISTINCT ON (r.run_id) r.*, jl.run_fire_at, jl.run_trigger, jl.run_node, jl.run_attempt, jl.run_token,
                        jl.run_started_at, jl.run_covered_fires, jl.run_covered_through, jl.run_context,
                        (jl.version = r.version AND jl.next_fire_at = jl.run_fire_at) AS resched
                 FROM req r JOIN jl ON jl.id = r.job_id AND jl.running_run = r.run_id AND jl.run_node IS NOT NULL
                 WHERE CASE WHEN r.takeover
                       THEN r.token >= jl.last_token AND r.token >= jl.run_token
                       ELSE r.token = jl.run_token AND r.token >= jl.last_token END
                 ORDER BY r.run_id
             ), ins AS (
                 INSERT INTO {runs_t} (id, job_id, fire_at, trigger, node, attempt, token, status, started_at, ended_at,
                     error, will_retry, covered_fires, covered_through, context, executor)
                 SELECT ok.run_id, ok.job_id, ok.run_fire_at, ok.run_trigger, ok.run_node, ok.run_attempt, ok.run_token,
                        ok.status, ok.run_started_at, n.ms, ok.error, ok.will_retry, ok.run_covered_fires,
                        ok.run_covered_through, ok.run_context, ok.executor
                 FROM ok, n
                 RETURNING id, ended_at
             ), uj AS (
                 UPDATE {jobs} j SET last_token = ok.token, {clear},
                     next_fire_at = CASE WHEN ok.resched THEN ok.next_at ELSE j.next_fire_at END,
                     next_trigger = CASE WHEN ok.resched THEN ok.next_trigger ELSE j.next_trigger END,
                     attempt = CASE WHEN ok.resched THEN ok.next_attempt::int4 ELSE j.attempt END,
                     resume_after = CASE WHEN ok.resched THEN ok.next_resume ELSE j.resume_after END,
                     next_context = CASE WHEN ok.resched THEN ok.next_context ELSE j.next_context END,
                     lease_owner = CASE WHEN ok.lease = 1 THEN NULL ELSE j.lease_owner END,
                     lease_until = CASE WHEN ok.lease = 1 THEN 0 WHEN ok.lease = 2 THEN n.ms + ok.lease_ms
                                        ELSE j.lease_until END
                 FROM ok, n WHERE j.id = ok.job_id
             ), al AS (
                 INSERT INTO {alarms} (event, status, attempts, next_attempt_at, created_at)
                 SELECT a.event, 'pending', 0, n.ms, n.ms
                 FROM UNNEST($12::int8[], $13::text[]) WITH ORDINALITY AS a(run_id, event, ord)
                 JOIN ok ON ok.run_id = a.run_id, n ORDER BY a.ord
             )
             SELECT ok.run_id, n.ms AS ended_at, ok.resched, ok.job_id,
                    EXISTS (SELECT 1 FROM {queue} q WHERE q.job_id = ok.job_id AND q.taken_at IS NULL) AS queued
             FROM ok, n"
        )))
        .bind(i64s(|f| f.run_id.0))
        .bind(runs.iter().map(|f| f.job_id.to_string()).collect::<Vec<_>>())
        .bind(i64s(|f| f.token as i64))
        .bind(runs.iter().map(|f| f.takeover).collect::<Vec<_>>())
        .bind(runs.iter().map(|f| f.status.as_str().to_string()).collect::<Vec<_>>())
        .bind(
            runs.iter()
                .map(|f| f.error.clone().map(crate::backends::sql::storable))
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
        .bind(runs.iter().map(|f| lease(f).0).collect::<Vec<_>>())
        .bind(runs.iter().map(|f| lease(f).1).collect::<Vec<_>>())
        .bind(
            runs.iter()
                .map(|f| f.executor.clone().map(crate::backends::sql::storable))
                .collect::<Vec<_>>(),
        )
        .fetch_all(&self.pool)
        .await
        .map_err(db_err("finish_runs"))
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
