//! The job leases in their rows on PostgreSQL, one statement per batch: a claim
//! grants the lease and records the run's start in the job's row with one write;
//! a grant ahead of a fire writes only the lease columns, none of them indexed, so
//! it stays on its page. The decisions are [`rules::claim`] and the shared
//! [`JobLeases`](crate::store::JobLeases) contract (the conformance suite's
//! `claim_rules_agree` drives every combination of state through them).

use super::{NOW_MS, PgDialect, db_err};
use crate::backends::sql::Dialect;
use crate::error::Result;
use crate::lock::{Lease, LockRequest};
use crate::record::*;
use crate::store::rules;
use crate::time::{Timestamp, duration_ms};
use sqlx::{AssertSqlSafe, Row};
use std::collections::HashMap;

/// The server's clock in µs.
const NOW_US: &str = <PgDialect as Dialect>::NOW_US;

impl PgDialect {
    /// One statement for the whole batch: lock up to `want` of the due, free rows the
    /// claims name, in the claims' order (skipping rows another call is writing),
    /// grant each lease and write each run into its job's row. Refusals are
    /// explained from the rows as they were before the statement, in the same
    /// statement.
    pub(super) async fn claim_batch(
        &self,
        claims: &[ClaimRun],
        want: usize,
    ) -> Result<Vec<ClaimOutcome>> {
        let jobs = self.t("jobs");
        let run_id =
            crate::backends::sql::run_ids::run_id_for("n.ms", &self.next_run_id(), Self::DIV);
        let col = |f: fn(&ClaimRun) -> i64| claims.iter().map(f).collect::<Vec<i64>>();
        let sql = format!(
            "WITH req AS (
                 SELECT * FROM UNNEST($1::text[], $2::int8[], $3::int8[], $4::text[], $5::int8[], $6::text[], $7::int8[],
                                      $8::int8[], $9::text[], $10::int8[])
                     WITH ORDINALITY AS r(job_id, fire_at, version, node, attempt, trig, cfires, cthrough, context, ttl, ord)
             ), n AS (
                 SELECT {NOW_MS} AS ms, {NOW_US} AS us
             ), first AS (
                 SELECT DISTINCT ON (r.job_id) r.* FROM req r ORDER BY r.job_id, r.ord
             ), locked AS (
                 SELECT j.id, r.ord FROM {jobs} j JOIN first r ON j.id = r.job_id CROSS JOIN n
                 WHERE j.enabled AND j.version = r.version AND j.running_run IS NULL
                   AND j.next_fire_at = r.fire_at AND j.lease_until <= n.ms
                 ORDER BY r.ord LIMIT $11 FOR UPDATE OF j SKIP LOCKED
             ), ok AS (
                 SELECT DISTINCT ON (r.job_id) r.* FROM req r JOIN locked l ON l.ord = r.ord ORDER BY r.job_id, r.ord
             ), upd AS (
                 UPDATE {jobs} j SET last_token = GREATEST(j.last_token + 1, n.us), lease_owner = ok.node,
                     lease_until = n.ms + ok.ttl, running_run = {run_id}, run_node = ok.node, run_fire_at = ok.fire_at,
                     run_trigger = ok.trig, run_attempt = ok.attempt::int4, run_token = GREATEST(j.last_token + 1, n.us),
                     run_started_at = n.ms, run_covered_fires = ok.cfires, run_covered_through = ok.cthrough,
                     run_context = ok.context
                 FROM ok, n WHERE j.id = ok.job_id
                 RETURNING j.id, ok.ord, j.running_run, j.run_started_at, j.last_token, j.lease_until
             )
             SELECT upd.id AS job_id, upd.ord AS written, NULL::int8 AS ord, upd.running_run AS run_id,
                    upd.run_started_at AS started_at,
                    upd.last_token AS token, upd.lease_until AS until, NULL::bool AS found, NULL::bool AS enabled,
                    NULL::int8 AS version, NULL::int8 AS running_run, NULL::int8 AS next_fire_at,
                    NULL::int8 AS held_until, NULL::int8 AS now
             FROM upd
             UNION ALL
             SELECT r.job_id, NULL, r.ord, NULL, NULL, NULL, NULL, j.id IS NOT NULL, j.enabled, j.version, j.running_run,
                    j.next_fire_at, j.lease_until, n.ms
             FROM req r CROSS JOIN n LEFT JOIN {jobs} j ON j.id = r.job_id"
        );
        let rows = sqlx::query(AssertSqlSafe(sql))
            .bind(
                claims
                    .iter()
                    .map(|c| c.job_id.to_string())
                    .collect::<Vec<_>>(),
            )
            .bind(col(|c| c.fire_at.as_millis()))
            .bind(col(|c| c.version as i64))
            .bind(claims.iter().map(|c| c.node.clone()).collect::<Vec<_>>())
            .bind(col(|c| i64::from(c.attempt)))
            .bind(
                claims
                    .iter()
                    .map(|c| c.trigger.as_str().to_string())
                    .collect::<Vec<_>>(),
            )
            .bind(
                claims
                    .iter()
                    .map(|c| crate::backends::sql::decode::span_columns(c.covers).0)
                    .collect::<Vec<_>>(),
            )
            .bind(
                claims
                    .iter()
                    .map(|c| crate::backends::sql::decode::span_columns(c.covers).1)
                    .collect::<Vec<_>>(),
            )
            .bind(
                claims
                    .iter()
                    .map(|c| c.context.to_stored())
                    .collect::<Vec<_>>(),
            )
            .bind(col(|c| duration_ms(c.ttl)))
            .bind(i64::try_from(want).unwrap_or(i64::MAX))
            .fetch_all(&self.pool)
            .await
            .map_err(db_err("claim_runs"))?;
        let int =
            |row: &sqlx::postgres::PgRow, c: &str| row.try_get::<Option<i64>, _>(c).ok().flatten();
        let full = rows.iter().filter(|r| int(r, "written").is_some()).count() >= want;
        // Each candidate's claim as written, or its job as it was before.
        let rows = super::by_place(&rows, claims.len(), "claim_runs")?;
        let mut claimed = std::collections::HashSet::new();
        let mut out = Vec::with_capacity(claims.len());
        for (c, row) in claims.iter().zip(rows) {
            let i = |name: &str| int(row, name);
            if let (Some(id), Some(at), Some(token), Some(until)) =
                (i("run_id"), i("started_at"), i("token"), i("until"))
            {
                claimed.insert(c.job_id.as_str());
                out.push(ClaimOutcome::Started {
                    run_id: RunId(id),
                    started_at: Timestamp::from_millis(at),
                    lease: Lease {
                        key: c.job_id.to_string(),
                        owner: c.node.clone(),
                        token: token as u64,
                        expires_at: Timestamp::from_millis(until),
                    },
                });
                continue;
            }
            // As the rows were before the statement; a job claimed by an earlier item
            // of this call runs, and a row another call was writing is held.
            let state = row
                .try_get::<bool, _>("found")
                .unwrap_or(false)
                .then(|| rules::JobState {
                    enabled: row
                        .try_get::<Option<bool>, _>("enabled")
                        .ok()
                        .flatten()
                        .unwrap_or(false),
                    version: i("version").unwrap_or(0) as u64,
                    next_fire_at: i("next_fire_at").map(Timestamp::from_millis),
                    running: i("running_run")
                        .map(RunId)
                        .or_else(|| claimed.contains(c.job_id.as_str()).then_some(RunId(-1))),
                    last_token: 0,
                });
            let free = i("held_until").unwrap_or(0) <= i("now").unwrap_or(0);
            out.push(match rules::claim(state.as_ref(), free, c) {
                Err(why) => ClaimOutcome::Refused(why),
                // Claimable as the rows were, yet not claimed: past the call's want,
                // or written by a concurrent call.
                Ok(()) if full => ClaimOutcome::Left,
                Ok(()) => ClaimOutcome::Refused(StartRefusal::Held),
            });
        }
        Ok(out)
    }

    /// One statement for the whole batch: grant each free lease among the jobs
    /// named (rows another call is writing are skipped, not granted); a key no job
    /// has is granted with the clock's token and excludes nothing.
    pub(super) async fn acquire_batch(
        &self,
        owner: &str,
        requests: &[LockRequest],
    ) -> Result<Vec<Option<Lease>>> {
        let jobs = self.t("jobs");
        let unique = crate::backends::sql::locks::distinct(requests);
        // Per key: the token and expiry granted, whether no job has the key, the
        // clock's µs and the expiry a grant of no job's key has.
        type Granted = (String, Option<i64>, Option<i64>, bool, i64, i64);
        let rows: Vec<Granted> =
            sqlx::query_as(AssertSqlSafe(format!(
                "WITH req AS (
                     SELECT * FROM UNNEST($1::text[], $2::int8[]) AS r(k, ttl)
                 ), n AS (
                     SELECT {NOW_MS} AS ms, {NOW_US} AS us
                 ), locked AS (
                     SELECT j.id FROM {jobs} j JOIN req r ON j.id = r.k CROSS JOIN n
                     WHERE j.lease_until <= n.ms ORDER BY j.id FOR UPDATE OF j SKIP LOCKED
                 ), upd AS (
                     UPDATE {jobs} j SET last_token = GREATEST(j.last_token + 1, n.us), lease_owner = $3,
                         lease_until = n.ms + r.ttl
                     FROM locked l JOIN req r ON r.k = l.id, n WHERE j.id = l.id
                     RETURNING j.id, j.last_token, j.lease_until
                 )
                 SELECT upd.id AS k, upd.last_token, upd.lease_until, false AS missing, 0::int8 AS us, 0::int8 AS until
                 FROM upd
                 UNION ALL
                 SELECT r.k, NULL, NULL, true, n.us, n.ms + r.ttl FROM req r CROSS JOIN n
                 WHERE NOT EXISTS (SELECT 1 FROM {jobs} j WHERE j.id = r.k)"
            )))
            .bind(unique.iter().map(|r| r.key.clone()).collect::<Vec<_>>())
            .bind(unique.iter().map(|r| duration_ms(r.ttl)).collect::<Vec<_>>())
            .bind(owner)
            .fetch_all(&self.pool)
            .await
            .map_err(db_err("acquire"))?;
        let mut granted: HashMap<String, (i64, i64)> = rows
            .into_iter()
            .filter_map(
                |(k, token, until, missing, us, no_job_until)| match (token, until) {
                    (Some(t), Some(u)) => Some((k, (t, u))),
                    _ if missing => Some((k, (us, no_job_until))),
                    _ => None,
                },
            )
            .collect();
        Ok(requests
            .iter()
            .map(|r| {
                granted.remove(&r.key).map(|(token, until)| Lease {
                    key: r.key.clone(),
                    owner: owner.to_string(),
                    token: token as u64,
                    expires_at: Timestamp::from_millis(until),
                })
            })
            .collect())
    }
}
