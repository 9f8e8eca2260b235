//! Starts and finishes decided in Rust by [`rules`] over rows locked in one
//! transaction, written with a fixed number of statements whatever the batch size:
//! the dialects without array parameters (SQLite, MySQL) use these.

use super::decode::SqlRow;
use super::outbox::insert_alarms;
use super::{Dialect, Sql, decode, marks, now_in, partitions, retrying};
use crate::error::{Error, Result};
use crate::record::*;
use crate::store::rules::{self, JobState, RunState};
use crate::time::Timestamp;
use std::collections::HashMap;

/// The locked state of the jobs named `ids`, by id; with `queued`, whether each has
/// a release queued (in the same statement, a finish's only read of the queue when it
/// releases nothing itself).
async fn job_states<D: Dialect>(
    d: &D,
    tx: &mut D::Tx,
    op: &'static str,
    ids: &[&str],
    queued: Option<&mut Vec<String>>,
) -> Result<HashMap<String, JobState>> {
    let column = if queued.is_some() {
        format!(
            ", CASE WHEN EXISTS (SELECT 1 FROM {} q WHERE q.job_id = j.id AND q.taken_at IS NULL) THEN 1 ELSE 0 END AS queued",
            d.t("releases")
        )
    } else {
        String::new()
    };
    let mut q = Sql::new(format!(
        "SELECT j.id AS id, j.enabled AS enabled, j.version AS version, j.running_run AS running_run, j.next_fire_at AS next_fire_at, j.last_token AS last_token{column} FROM {} j WHERE j.id IN ({}) ORDER BY j.id{}",
        d.t("jobs"),
        marks(ids.len()),
        D::FOR_UPDATE
    ));
    q.args.extend(ids.iter().map(|id| (*id).into()));
    let rows = d.fetch_in(tx, op, q).await?;
    let e = |err| d.err(op, err);
    if let Some(out) = queued {
        for r in &rows {
            if r.int32("queued").map_err(e)? != 0 {
                out.push(r.text("id").map_err(e)?);
            }
        }
    }
    rows.iter()
        .map(|r| Ok((r.text("id").map_err(e)?, decode::job_state(r).map_err(e)?)))
        .collect()
}

/// The runs `ids` (those that exist) with their start instants (ms), by id; `lock`
/// is the dialect's row-lock suffix, or empty.
async fn run_states<D: Dialect>(
    d: &D,
    tx: &mut D::Tx,
    op: &'static str,
    ids: &[i64],
    lock: &str,
) -> Result<HashMap<i64, (RunState, i64)>> {
    let mut read = Sql::new(format!(
        "SELECT id, job_id, status, token, fire_at, attempt, started_at FROM {} WHERE id IN ({}) ORDER BY id{lock}",
        d.t("runs"),
        marks(ids.len()),
    ));
    read.args.extend(ids.iter().map(|id| (*id).into()));
    let mut out = HashMap::new();
    for row in d.fetch_in(tx, op, read).await? {
        let e = |err| d.err(op, err);
        let job_id = row.text("job_id").map_err(e)?;
        let state = RunState {
            job_id: crate::job::JobId::new(&job_id)?,
            running: row.text("status").map_err(e)? == RunStatus::Running.as_str(),
            token: row.int("token").map_err(e)? as u64,
            fire_at: Timestamp::from_millis(row.int("fire_at").map_err(e)?),
            attempt: u32::try_from(row.int32("attempt").map_err(e)?).unwrap_or(0),
        };
        out.insert(
            row.int("id").map_err(e)?,
            (state, row.int("started_at").map_err(e)?),
        );
    }
    Ok(out)
}

/// Records starts: lock the jobs, decide in request order, insert the runs in one
/// statement, read their ids back, mark the jobs in one joined `UPDATE`. A request
/// whose job's running run carries its token is a repeat: its run is read (one more
/// statement, only then) and answered again.
pub(crate) async fn start<D: Dialect>(d: &D, runs: &[StartRun]) -> Result<Vec<StartOutcome>> {
    retrying(|| start_once(d, runs)).await
}

async fn start_once<D: Dialect>(d: &D, runs: &[StartRun]) -> Result<Vec<StartOutcome>> {
    let op = "start_runs";
    let mut tx = d.begin(op).await?;
    let now = now_in(d, &mut tx, op).await?;
    let ids: Vec<&str> = runs.iter().map(|r| r.job_id.as_str()).collect();
    let mut state = job_states(d, &mut tx, op, &ids, None).await?;
    // Only a job whose last token is the request's can be running the request's run.
    let repeats: Vec<i64> = runs
        .iter()
        .filter_map(|r| {
            state
                .get(r.job_id.as_str())
                .filter(|j| j.last_token == r.token)
        })
        .filter_map(|j| j.running.map(|id| id.0))
        .collect();
    let recorded = if repeats.is_empty() {
        HashMap::new()
    } else {
        run_states(d, &mut tx, op, &repeats, "").await?
    };
    let mut out = Vec::with_capacity(runs.len());
    let mut accepted = Vec::new();
    for (i, r) in runs.iter().enumerate() {
        let job = state.get_mut(r.job_id.as_str());
        let running = job
            .as_deref()
            .and_then(|j| j.running)
            .and_then(|id| recorded.get(&id.0).map(|(s, at)| (id, s, *at)));
        match rules::start(job.as_deref(), running.map(|(_, s, _)| s), r) {
            Ok(rules::Admit::Recorded) => {
                let (run_id, _, at) = running.expect("a recorded start has its run");
                out.push(Some(StartOutcome::Started {
                    run_id,
                    started_at: Timestamp::from_millis(at),
                }));
            }
            Ok(rules::Admit::Record) => {
                if let Some(j) = job {
                    // Running from here on, for the rest of the batch.
                    j.running = Some(RunId(-1));
                    j.last_token = r.token;
                }
                accepted.push(i);
                out.push(None);
            }
            Err(refusal) => out.push(Some(StartOutcome::Refused(refusal))),
        }
    }
    if !accepted.is_empty() {
        // Where the dialect writes run ids, each row's from the same clock reading as
        // its `started_at`.
        let (id_col, id_val) = match d.run_sequence() {
            Some(next) => (
                "id, ",
                format!(
                    "{}, ",
                    partitions::run_id_for(&now.to_string(), &next, D::DIV)
                ),
            ),
            None => ("", String::new()),
        };
        let row = format!("({id_val}?, ?, ?, ?, ?, ?, 'running', ?, ?, ?, ?, ?)");
        let mut insert = Sql::new(format!(
            "INSERT INTO {} ({id_col}job_id, fire_at, {}, node, attempt, token, status, started_at, will_retry,
             covered_fires, covered_through, context) VALUES {}",
            d.t("runs"),
            D::TRIGGER,
            vec![row; accepted.len()].join(", ")
        ));
        for &i in &accepted {
            let r = &runs[i];
            let (fires, through) = decode::span_columns(r.covers);
            insert = insert
                .bind(r.job_id.as_str())
                .bind(r.fire_at.as_millis())
                .bind(r.trigger.as_str())
                .bind(r.node.as_str())
                .bind(i64::from(r.attempt))
                .bind(r.token as i64)
                .bind(now)
                .bind(false)
                .bind(fires)
                .bind(through)
                .bind(r.context.to_stored());
        }
        d.exec_in(&mut tx, op, insert).await?;
        // Each job has one running run now, so (job, token) finds it.
        let mut read = Sql::new(format!(
            "SELECT id, job_id FROM {} WHERE status = 'running' AND job_id IN ({})",
            d.t("runs"),
            marks(accepted.len())
        ));
        read.args
            .extend(accepted.iter().map(|&i| runs[i].job_id.as_str().into()));
        let mut run_ids: HashMap<String, i64> = HashMap::new();
        for row in d.fetch_in(&mut tx, op, read).await? {
            let e = |err| d.err(op, err);
            run_ids.insert(row.text("job_id").map_err(e)?, row.int("id").map_err(e)?);
        }
        let mut update = Sql::new(d.update_from(
            &d.t("jobs"),
            "id",
            "last_token = v.t, running_run = v.r",
            &d.values(&["id", "t", "r"], accepted.len()),
        ));
        for &i in &accepted {
            let r = &runs[i];
            let run_id = *run_ids.get(r.job_id.as_str()).ok_or_else(|| {
                Error::backend(D::NAME, op, true, "an inserted run was not found")
            })?;
            update = update
                .bind(r.job_id.as_str())
                .bind(r.token as i64)
                .bind(run_id);
            out[i] = Some(StartOutcome::Started {
                run_id: RunId(run_id),
                started_at: Timestamp::from_millis(now),
            });
        }
        d.exec_in(&mut tx, op, update).await?;
    }
    d.commit(tx, op).await?;
    Ok(out
        .into_iter()
        .map(|o| o.expect("every item decided"))
        .collect())
}

/// What a finish writes into its job: the final token, running run and, when the
/// rules said so (`Some`), the next fire.
struct JobWrite<'a> {
    token: i64,
    running: Option<i64>,
    next: Option<Option<&'a FireState>>,
}

/// Records finishes: lock the jobs and runs, decide in request order, then one joined
/// `UPDATE` of the runs, one of the jobs and one `INSERT` of the alarm events.
pub(crate) async fn finish<D: Dialect>(d: &D, runs: &[FinishRun]) -> Result<Vec<FinishOutcome>> {
    retrying(|| finish_once(d, runs)).await
}

async fn finish_once<D: Dialect>(d: &D, runs: &[FinishRun]) -> Result<Vec<FinishOutcome>> {
    let op = "finish_runs";
    let mut tx = d.begin(op).await?;
    let now = now_in(d, &mut tx, op).await?;
    let job_ids: Vec<&str> = runs.iter().map(|f| f.job_id.as_str()).collect();
    let mut queued: Vec<String> = Vec::new();
    let mut jobs = job_states(d, &mut tx, op, &job_ids, Some(&mut queued)).await?;
    let ids: Vec<i64> = runs.iter().map(|f| f.run_id.0).collect();
    let mut run_state: HashMap<i64, RunState> = run_states(d, &mut tx, op, &ids, D::FOR_UPDATE)
        .await?
        .into_iter()
        .map(|(id, (state, _))| (id, state))
        .collect();
    let mut out = Vec::with_capacity(runs.len());
    let mut done: Vec<&FinishRun> = Vec::new();
    let mut writes: HashMap<&str, JobWrite<'_>> = HashMap::new();
    for f in runs {
        let job = jobs.get_mut(f.job_id.as_str());
        let run = run_state.get_mut(&f.run_id.0);
        let rescheduled = match rules::finish(run.as_deref(), job.as_deref(), f) {
            Ok(r) => r,
            Err(refusal) => {
                out.push(FinishOutcome::Refused(refusal));
                continue;
            }
        };
        if let Some(run) = run {
            run.running = false;
        }
        if let Some(j) = job {
            j.last_token = f.token;
            if j.running == Some(f.run_id) {
                j.running = None;
            }
            if rescheduled {
                j.next_fire_at = f.next.as_ref().map(|n| n.at);
            }
            let write = writes.entry(f.job_id.as_str()).or_insert(JobWrite {
                token: 0,
                running: None,
                next: None,
            });
            write.token = f.token as i64;
            write.running = j.running.map(|r| r.0);
            if rescheduled {
                write.next = Some(f.next.as_ref());
            }
        }
        done.push(f);
        out.push(FinishOutcome::Finished {
            ended_at: Timestamp::from_millis(now),
            rescheduled,
        });
    }
    if !done.is_empty() {
        let mut update = Sql::new(d.update_from(
            &d.t("runs"),
            "id",
            "status = v.s, error = v.e, will_retry = v.w, ended_at = v.at",
            &d.values(&["id", "s", "e", "w", "at"], done.len()),
        ));
        for f in &done {
            update = update
                .bind(f.run_id.0)
                .bind(f.status.as_str())
                .bind(f.error.clone())
                .bind(f.will_retry)
                .bind(now);
        }
        d.exec_in(&mut tx, op, update).await?;
    }
    if !writes.is_empty() {
        // `n` (rescheduled) picks the new next state or keeps the stored one.
        let mut update = Sql::new(d.update_from(
            &d.t("jobs"),
            "id",
            "last_token = v.t, running_run = v.r,
             next_fire_at = CASE WHEN v.n THEN v.nat ELSE next_fire_at END,
             next_trigger = CASE WHEN v.n THEN v.ntr ELSE next_trigger END,
             attempt = CASE WHEN v.n THEN v.na ELSE attempt END,
             resume_after = CASE WHEN v.n THEN v.nra ELSE resume_after END,
             next_context = CASE WHEN v.n THEN v.nc ELSE next_context END",
            &d.values(
                &["id", "t", "r", "n", "nat", "ntr", "na", "nra", "nc"],
                writes.len(),
            ),
        ));
        for (id, w) in &writes {
            update = update
                .bind(*id)
                .bind(w.token)
                .bind(w.running)
                .bind(w.next.is_some());
            update.args.extend(decode::fire_args(w.next.flatten()));
        }
        d.exec_in(&mut tx, op, update).await?;
    }
    let events: Vec<AlarmEvent> = done.iter().flat_map(|f| f.alarms.iter().cloned()).collect();
    insert_alarms(d, &mut tx, &events, now).await?;
    let releases: Vec<&crate::dependency::Release> =
        done.iter().flat_map(|f| f.releases.iter()).collect();
    super::releases::queue_in(d, &mut tx, op, &releases, now).await?;
    // The released jobs, and the finished ones that had a release queued, take one
    // if they can.
    let mut ids: Vec<&str> = releases.iter().map(|r| r.job.as_str()).collect();
    ids.extend(
        done.iter()
            .map(|f| f.job_id.as_str())
            .filter(|id| queued.iter().any(|q| q == id)),
    );
    ids.sort_unstable();
    ids.dedup();
    super::releases::take_in(d, &mut tx, op, &ids, now).await?;
    d.commit(tx, op).await?;
    Ok(out)
}
