//! Starts and finishes decided in Rust by [`rules`] over rows locked in one
//! transaction, written with a fixed number of statements whatever the batch size:
//! the dialects without array parameters (SQLite, MySQL) use these, and PostgreSQL
//! for a finish that releases children.
//!
//! A start writes the run into its job's row; a finish inserts the run row from it
//! (see [`running`](super::running)), or, for a run kept in a run row of its own,
//! updates that row.

use super::decode::SqlRow;
use super::outbox::insert_alarms;
use super::running::{self, RowRun};
use super::{Dialect, Sql, decode, marks, now_in, retrying};
use crate::error::Result;
use crate::record::*;
use crate::store::rules::{self, JobState, RunState};
use crate::time::{Timestamp, duration_ms};
use std::collections::HashMap;

/// A locked job row as a start or finish reads it: the rules' view of it, and its
/// running run when its row holds it.
pub(crate) struct JobRow {
    pub(crate) state: JobState,
    pub(crate) run: Option<RowRun>,
    /// When the lease in its row runs out (ms; 0 when nobody holds it).
    pub(crate) lease_until: i64,
}

/// The locked rows of the jobs named `ids`, by id; with `queued`, whether each has
/// a release queued (in the same statement, a finish's only read of the queue when it
/// releases nothing itself).
pub(crate) async fn job_rows<D: Dialect>(
    d: &D,
    tx: &mut D::Tx,
    op: &'static str,
    ids: &[&str],
    queued: Option<&mut Vec<String>>,
) -> Result<HashMap<String, JobRow>> {
    read_job_rows(d, tx, op, ids, queued, D::FOR_UPDATE).await
}

/// The rows of the jobs named `ids` locked with `lock` (the dialect's suffix: a
/// claim skips the rows another call is writing), by id.
pub(crate) async fn job_rows_locked<D: Dialect>(
    d: &D,
    tx: &mut D::Tx,
    op: &'static str,
    ids: &[&str],
    lock: &str,
) -> Result<HashMap<String, JobRow>> {
    read_job_rows(d, tx, op, ids, None, lock).await
}

async fn read_job_rows<D: Dialect>(
    d: &D,
    tx: &mut D::Tx,
    op: &'static str,
    ids: &[&str],
    queued: Option<&mut Vec<String>>,
    lock: &str,
) -> Result<HashMap<String, JobRow>> {
    let column = if queued.is_some() {
        format!(
            ", CASE WHEN EXISTS (SELECT 1 FROM {} q WHERE q.job_id = j.id AND q.taken_at IS NULL) THEN 1 ELSE 0 END AS queued",
            d.t("releases")
        )
    } else {
        String::new()
    };
    let mut q = Sql::new(format!(
        "SELECT j.id AS id, j.enabled AS enabled, j.version AS version, j.running_run AS running_run, j.next_fire_at AS next_fire_at, j.last_token AS last_token, j.lease_until AS lease_until, {}{column} FROM {} j WHERE j.id IN ({}) ORDER BY j.id{lock}",
        running::READ_RUN,
        d.t("jobs"),
        marks(ids.len()),
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
        .map(|r| {
            let row = JobRow {
                state: decode::job_state(r).map_err(e)?,
                run: RowRun::read(r).map_err(e)?,
                lease_until: r.int("lease_until").map_err(e)?,
            };
            Ok((r.text("id").map_err(e)?, row))
        })
        .collect()
}

/// The runs `ids` that have a run row (those that exist) with their start instants
/// (ms), by id; `lock` is the dialect's row-lock suffix, or empty.
pub(crate) async fn run_states<D: Dialect>(
    d: &D,
    tx: &mut D::Tx,
    op: &'static str,
    ids: &[i64],
    lock: &str,
) -> Result<HashMap<i64, (RunState, i64)>> {
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
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

/// The runs `ids` that job rows hold, by id, as the rules read them (not locked: a
/// request naming another job than the run's is refused whatever the row).
async fn runs_in_rows<D: Dialect>(
    d: &D,
    tx: &mut D::Tx,
    op: &'static str,
    ids: &[i64],
) -> Result<Vec<(i64, RunState)>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut q = Sql::new(format!(
        "SELECT j.id AS id, j.running_run AS running_run, {} FROM {} j WHERE j.{} AND j.running_run IN ({})",
        running::READ_RUN,
        d.t("jobs"),
        super::IN_ROW,
        marks(ids.len())
    ));
    q.args.extend(ids.iter().map(|id| (*id).into()));
    let e = |err| d.err(op, err);
    let mut out = Vec::new();
    for r in d.fetch_in(tx, op, q).await? {
        let job = crate::job::JobId::new(r.text("id").map_err(e)?)?;
        if let Some(run) = RowRun::read(&r).map_err(e)? {
            out.push((run.id, run.state(&job)));
        }
    }
    Ok(out)
}

/// The running run of a job as a start reads it to tell a repeated start: its id,
/// the rules' view of it, and its start (ms). A run its row holds is read from the
/// row; a run row of its own from `legacy`.
fn running_of(
    job_id: &crate::job::JobId,
    row: &JobRow,
    legacy: &HashMap<i64, (RunState, i64)>,
) -> Option<(RunId, RunState, i64)> {
    match &row.run {
        Some(run) => Some((RunId(run.id), run.state(job_id), run.started_at)),
        None => {
            let id = row.state.running?;
            legacy.get(&id.0).map(|(s, at)| (id, s.clone(), *at))
        }
    }
}

/// Records starts: lock the jobs, decide in request order, take the new runs' ids,
/// write each run into its job's row in one joined `UPDATE`. A request whose job's
/// running run carries its token is a repeat, answered with that run.
pub(crate) async fn start<D: Dialect>(d: &D, runs: &[StartRun]) -> Result<Vec<StartOutcome>> {
    retrying(|| async {
        let op = "start_runs";
        let mut tx = d.begin(op).await?;
        let now = now_in(d, &mut tx, op).await?;
        let out = start_in(d, &mut tx, op, runs, now).await?;
        d.commit(tx, op).await?;
        Ok(out)
    })
    .await
}

/// [`start`] in `tx` at the store's instant `now` (ms).
pub(crate) async fn start_in<D: Dialect>(
    d: &D,
    tx: &mut D::Tx,
    op: &'static str,
    runs: &[StartRun],
    now: i64,
) -> Result<Vec<StartOutcome>> {
    let ids: Vec<&str> = runs.iter().map(|r| r.job_id.as_str()).collect();
    let mut rows = job_rows(d, tx, op, &ids, None).await?;
    // A run row of its own (written before runs lived in job rows) can be a repeat's
    // only when the job's last token is the request's.
    let legacy_ids: Vec<i64> = runs
        .iter()
        .filter_map(|r| rows.get(r.job_id.as_str()).map(|j| (r, j)))
        .filter(|(r, j)| j.run.is_none() && j.state.last_token == r.token)
        .filter_map(|(_, j)| j.state.running.map(|id| id.0))
        .collect();
    let legacy = run_states(d, tx, op, &legacy_ids, "").await?;
    let mut out = Vec::with_capacity(runs.len());
    let mut accepted = Vec::new();
    for (i, r) in runs.iter().enumerate() {
        let job = rows.get_mut(r.job_id.as_str());
        let running = job
            .as_deref()
            .and_then(|j| running_of(&r.job_id, j, &legacy));
        match rules::start(
            job.as_deref().map(|j| &j.state),
            running.as_ref().map(|(_, s, _)| s),
            r,
        ) {
            Ok(rules::Admit::Recorded) => {
                let (run_id, _, at) = running.expect("a recorded start has its run");
                out.push(Some(StartOutcome::Started {
                    run_id,
                    started_at: Timestamp::from_millis(at),
                }));
            }
            Ok(rules::Admit::Record) => {
                if let Some(j) = job {
                    // Running from here on, for the rest of the batch (and never the
                    // repeat of a later item).
                    j.state.running = Some(RunId(-1));
                    j.state.last_token = r.token;
                    j.run = None;
                }
                accepted.push(i);
                out.push(None);
            }
            Err(refusal) => out.push(Some(StartOutcome::Refused(refusal))),
        }
    }
    if !accepted.is_empty() {
        let new = running::new_ids(d, tx, op, accepted.len(), now).await?;
        let started: Vec<(usize, RowRun)> = accepted
            .iter()
            .zip(new)
            .map(|(&i, id)| (i, RowRun::of_start(id, &runs[i], now)))
            .collect();
        write_runs(d, tx, op, &started, runs, None).await?;
        for (i, run) in started {
            out[i] = Some(StartOutcome::Started {
                run_id: RunId(run.id),
                started_at: Timestamp::from_millis(now),
            });
        }
    }
    Ok(out
        .into_iter()
        .map(|o| o.expect("every item decided"))
        .collect())
}

/// Writes each started run into its job's row (`runs[i]`'s job), in one joined
/// `UPDATE`, with the job's last token the run's; with `lease`, the owner and the
/// expiry (ms) of a lease granted with it.
pub(crate) async fn write_runs<D: Dialect>(
    d: &D,
    tx: &mut D::Tx,
    op: &'static str,
    started: &[(usize, RowRun)],
    runs: &[StartRun],
    lease: Option<&[i64]>,
) -> Result<()> {
    let mut cols = vec![
        "id", "r", "nd", "fa", "tr", "at", "tk", "sa", "cf", "ct", "cx",
    ];
    let mut set = String::from(
        "last_token = v.tk, running_run = v.r, run_node = v.nd, run_fire_at = v.fa, run_trigger = v.tr, \
         run_attempt = v.at, run_token = v.tk, run_started_at = v.sa, run_covered_fires = v.cf, \
         run_covered_through = v.ct, run_context = v.cx",
    );
    if lease.is_some() {
        cols.push("lu");
        set.push_str(", lease_owner = v.nd, lease_until = v.lu");
    }
    let mut update =
        Sql::new(d.update_from(&d.t("jobs"), "id", &set, &d.values(&cols, started.len())));
    for (k, (i, run)) in started.iter().enumerate() {
        update = update.bind(runs[*i].job_id.as_str()).bind(run.id);
        update.args.extend(run.set_args());
        if let Some(until) = lease {
            update = update.bind(until[k]);
        }
    }
    d.exec_in(tx, op, update).await?;
    Ok(())
}

/// What a finish writes into its job: the final token, running run and, when the
/// rules said so (`Some`), the next fire; what happens to its lease.
struct JobWrite<'a> {
    token: i64,
    running: Option<i64>,
    next: Option<Option<&'a FireState>>,
    lease: LeaseEnd,
}

/// The code a joined `UPDATE` reads a [`LeaseEnd`] by, and the expiry it sets (ms).
fn lease_code(lease: LeaseEnd, now: i64) -> (i64, i64) {
    match lease {
        LeaseEnd::Untouched => (0, 0),
        LeaseEnd::Release => (1, 0),
        LeaseEnd::Keep(ttl) => (2, now.saturating_add(duration_ms(ttl))),
    }
}

/// Records finishes: lock the jobs and the run rows the batch names, decide in
/// request order, then insert the run rows of the runs kept in job rows, update the
/// run rows of the others, update the jobs in one joined `UPDATE` and insert the
/// alarm events.
pub(crate) async fn finish<D: Dialect>(d: &D, runs: &[FinishRun]) -> Result<Vec<FinishOutcome>> {
    retrying(|| finish_once(d, runs)).await
}

async fn finish_once<D: Dialect>(d: &D, runs: &[FinishRun]) -> Result<Vec<FinishOutcome>> {
    let op = "finish_runs";
    let mut tx = d.begin(op).await?;
    let now = now_in(d, &mut tx, op).await?;
    let job_ids: Vec<&str> = runs.iter().map(|f| f.job_id.as_str()).collect();
    let mut queued: Vec<String> = Vec::new();
    let mut jobs = job_rows(d, &mut tx, op, &job_ids, Some(&mut queued)).await?;
    let in_row = |jobs: &HashMap<String, JobRow>, f: &FinishRun| {
        jobs.get(f.job_id.as_str())
            .and_then(|j| j.run.as_ref())
            .is_some_and(|r| r.id == f.run_id.0)
    };
    let own_rows: Vec<i64> = runs
        .iter()
        .filter(|f| !in_row(&jobs, f))
        .map(|f| f.run_id.0)
        .collect();
    let mut run_rows: HashMap<i64, RunState> = run_states(d, &mut tx, op, &own_rows, D::FOR_UPDATE)
        .await?
        .into_iter()
        .map(|(id, (state, _))| (id, state))
        .collect();
    // A run kept in the row of a job the request does not name: refused, with the
    // rules' reason.
    let elsewhere: Vec<i64> = own_rows
        .iter()
        .copied()
        .filter(|id| !run_rows.contains_key(id))
        .collect();
    for (id, state) in runs_in_rows(d, &mut tx, op, &elsewhere).await? {
        run_rows.insert(id, state);
    }
    let mut out = Vec::with_capacity(runs.len());
    let mut inserted: Vec<(&FinishRun, RowRun)> = Vec::new();
    let mut updated: Vec<&FinishRun> = Vec::new();
    let mut done: Vec<&FinishRun> = Vec::new();
    let mut writes: HashMap<&str, JobWrite<'_>> = HashMap::new();
    for f in runs {
        let job = jobs.get_mut(f.job_id.as_str());
        let row_run = job
            .as_deref()
            .and_then(|j| j.run.clone())
            .filter(|r| r.id == f.run_id.0);
        let run_state = match &row_run {
            Some(r) => Some(r.state(&f.job_id)),
            None => run_rows.get(&f.run_id.0).cloned(),
        };
        let rescheduled =
            match rules::finish(run_state.as_ref(), job.as_deref().map(|j| &j.state), f) {
                Ok(r) => r,
                Err(refusal) => {
                    out.push(FinishOutcome::Refused(refusal));
                    continue;
                }
            };
        match row_run {
            Some(r) => inserted.push((f, r)),
            None => {
                if let Some(s) = run_rows.get_mut(&f.run_id.0) {
                    s.running = false;
                }
                updated.push(f);
            }
        }
        if let Some(j) = job {
            j.state.last_token = f.token;
            if j.state.running == Some(f.run_id) {
                j.state.running = None;
                j.run = None;
            }
            if rescheduled {
                j.state.next_fire_at = f.next.as_ref().map(|n| n.at);
            }
            let write = writes.entry(f.job_id.as_str()).or_insert(JobWrite {
                token: 0,
                running: None,
                next: None,
                lease: LeaseEnd::Untouched,
            });
            write.token = f.token as i64;
            write.running = j.state.running.map(|r| r.0);
            if rescheduled {
                write.next = Some(f.next.as_ref());
            }
            if f.lease != LeaseEnd::Untouched {
                write.lease = f.lease;
            }
        }
        done.push(f);
        out.push(FinishOutcome::Finished {
            ended_at: Timestamp::from_millis(now),
            rescheduled,
        });
    }
    if !inserted.is_empty() {
        let row = format!("({})", marks(16));
        let mut insert = Sql::new(format!(
            "INSERT INTO {} ({}) VALUES {}",
            d.t("runs"),
            running::run_columns::<D>(),
            vec![row; inserted.len()].join(", ")
        ));
        for (f, r) in &inserted {
            insert = insert
                .bind(r.id)
                .bind(f.job_id.as_str())
                .bind(r.fire_at)
                .bind(r.trigger.as_str())
                .bind(r.node.as_str())
                .bind(r.attempt)
                .bind(r.token)
                .bind(f.status.as_str())
                .bind(r.started_at)
                .bind(now)
                .bind(f.error.clone())
                .bind(f.will_retry)
                .bind(r.covered_fires)
                .bind(r.covered_through)
                .bind(r.context.clone())
                .bind(f.executor.clone());
        }
        d.exec_in(&mut tx, op, insert).await?;
    }
    if !updated.is_empty() {
        let mut update = Sql::new(d.update_from(
            &d.t("runs"),
            "id",
            "status = v.s, error = v.e, will_retry = v.w, ended_at = v.at, executor = v.x",
            &d.values(&["id", "s", "e", "w", "at", "x"], updated.len()),
        ));
        for f in &updated {
            update = update
                .bind(f.run_id.0)
                .bind(f.status.as_str())
                .bind(f.error.clone())
                .bind(f.will_retry)
                .bind(now)
                .bind(f.executor.clone());
        }
        d.exec_in(&mut tx, op, update).await?;
    }
    if !writes.is_empty() {
        // `n` (rescheduled) picks the new next state or keeps the stored one; a
        // cleared running run clears its columns; `l` says what happens to the lease.
        let clear = |c: &str| format!("{c} = CASE WHEN v.r IS NULL THEN NULL ELSE {c} END");
        let run_cols = [
            "run_node",
            "run_fire_at",
            "run_trigger",
            "run_attempt",
            "run_token",
            "run_started_at",
            "run_covered_fires",
            "run_covered_through",
            "run_context",
        ]
        .map(clear)
        .join(", ");
        let mut update = Sql::new(d.update_from(
            &d.t("jobs"),
            "id",
            &format!(
                "last_token = v.t, running_run = v.r, {run_cols},
                 next_fire_at = CASE WHEN v.n THEN v.nat ELSE next_fire_at END,
                 next_trigger = CASE WHEN v.n THEN v.ntr ELSE next_trigger END,
                 attempt = CASE WHEN v.n THEN v.na ELSE attempt END,
                 resume_after = CASE WHEN v.n THEN v.nra ELSE resume_after END,
                 next_context = CASE WHEN v.n THEN v.nc ELSE next_context END,
                 lease_owner = CASE WHEN v.l = 1 THEN NULL ELSE lease_owner END,
                 lease_until = CASE WHEN v.l = 1 THEN 0 WHEN v.l = 2 THEN v.lu ELSE lease_until END"
            ),
            &d.values(
                &[
                    "id", "t", "r", "n", "nat", "ntr", "na", "nra", "nc", "l", "lu",
                ],
                writes.len(),
            ),
        ));
        for (id, w) in &writes {
            let (l, lu) = lease_code(w.lease, now);
            update = update
                .bind(*id)
                .bind(w.token)
                .bind(w.running)
                .bind(w.next.is_some());
            update.args.extend(decode::fire_args(w.next.flatten()));
            update = update.bind(l).bind(lu);
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
