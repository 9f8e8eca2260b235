//! A run in progress is kept in its job's row, and its run row is written once, at
//! its finish.
//!
//! The start writes the run's columns into the job row (`running_run`, its id, and
//! `run_node`, `run_fire_at`, `run_trigger`, `run_attempt`, `run_token`,
//! `run_started_at`, `run_covered_fires`, `run_covered_through`, `run_context`); the
//! finish inserts the run row from them, with the outcome, and clears them in the
//! same statement that writes the job's next fire. So a fire writes the job row at
//! its start and at its finish and the run row once: with the lease in the job row
//! too ([`JobLeases`](crate::store::JobLeases)), three row versions.
//!
//! The run log reads both: the run rows, and the job rows' running runs presented
//! with a run row's columns ([`as_run_columns`]). A running run whose job row has no
//! `run_node` is a run row of its own: one started before this layout, or one whose
//! job was removed while it ran (the removal moves it into the run log, [`move_out`]).
//! The finish handles both.

use super::decode::SqlRow;
use super::{Dialect, IN_ROW, Sql, decode, marks};
use crate::error::Result;
use crate::record::*;
use crate::store::rules::RunState;
use crate::time::Timestamp;

/// A run row's columns, in the order [`as_run_columns`] presents a job row's running
/// run in (`{trigger}`: the dialect's name of the trigger column).
pub(crate) fn run_columns<D: Dialect>() -> String {
    format!(
        "id, job_id, fire_at, {}, node, attempt, token, status, started_at, ended_at, error, will_retry, \
         covered_fires, covered_through, context, executor",
        D::TRIGGER
    )
}

/// A job row's running run as a run row's columns ([`run_columns`]), for the run
/// log's queries; the row must have one (`run_node IS NOT NULL`).
pub(crate) fn as_run_columns<D: Dialect>() -> String {
    format!(
        "running_run AS id, id AS job_id, run_fire_at AS fire_at, run_trigger AS {}, run_node AS node, \
         run_attempt AS attempt, run_token AS token, 'running' AS status, run_started_at AS started_at, \
         {} AS ended_at, {} AS error, {} AS will_retry, run_covered_fires AS covered_fires, \
         run_covered_through AS covered_through, run_context AS context, {} AS executor",
        D::TRIGGER,
        D::NULL_INT,
        D::NULL_TEXT,
        D::FALSE,
        D::NULL_TEXT
    )
}

/// Clears a job row's running run.
#[cfg(feature = "postgres")]
pub(crate) const CLEAR_RUN: &str = "running_run = NULL, run_node = NULL, run_fire_at = NULL, \
     run_trigger = NULL, run_attempt = NULL, run_token = NULL, run_started_at = NULL, \
     run_covered_fires = NULL, run_covered_through = NULL, run_context = NULL";

/// The job columns read with a job's state when its running run may be in its row.
pub(crate) const READ_RUN: &str = "j.run_node AS run_node, j.run_fire_at AS run_fire_at, \
     j.run_trigger AS run_trigger, j.run_attempt AS run_attempt, j.run_token AS run_token, \
     j.run_started_at AS run_started_at, j.run_covered_fires AS run_covered_fires, \
     j.run_covered_through AS run_covered_through, j.run_context AS run_context";

/// A running run as a job row holds it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct RowRun {
    pub(crate) id: i64,
    pub(crate) node: String,
    pub(crate) fire_at: i64,
    pub(crate) trigger: String,
    pub(crate) attempt: i64,
    pub(crate) token: i64,
    pub(crate) started_at: i64,
    pub(crate) covered_fires: Option<i64>,
    pub(crate) covered_through: Option<i64>,
    pub(crate) context: Option<String>,
}

impl RowRun {
    /// The run a start records: `id`, started at `now` (ms) as `r` asks.
    pub(crate) fn of_start(id: i64, r: &StartRun, now: i64) -> RowRun {
        let (covered_fires, covered_through) = decode::span_columns(r.covers);
        RowRun {
            id,
            node: r.node.clone(),
            fire_at: r.fire_at.as_millis(),
            trigger: r.trigger.as_str().to_string(),
            attempt: i64::from(r.attempt),
            token: r.token as i64,
            started_at: now,
            covered_fires,
            covered_through,
            context: r.context.to_stored(),
        }
    }

    /// The job row's running run (`None` when it holds none: no run, or a run row of
    /// its own), from the columns of [`READ_RUN`] and `running_run`.
    pub(crate) fn read(r: &impl SqlRow) -> std::result::Result<Option<RowRun>, sqlx::Error> {
        let (Some(id), Some(node)) = (r.opt_int("running_run")?, r.opt_text("run_node")?) else {
            return Ok(None);
        };
        Ok(Some(RowRun {
            id,
            node,
            fire_at: r.opt_int("run_fire_at")?.unwrap_or(0),
            trigger: r.opt_text("run_trigger")?.unwrap_or_default(),
            attempt: i64::from(r.opt_int32("run_attempt")?.unwrap_or(0)),
            token: r.opt_int("run_token")?.unwrap_or(0),
            started_at: r.opt_int("run_started_at")?.unwrap_or(0),
            covered_fires: r.opt_int("run_covered_fires")?,
            covered_through: r.opt_int("run_covered_through")?,
            context: r.opt_text("run_context")?,
        }))
    }

    /// As the rules read it, for the job `job_id`.
    pub(crate) fn state(&self, job_id: &crate::job::JobId) -> RunState {
        RunState {
            job_id: job_id.clone(),
            running: true,
            token: self.token as u64,
            fire_at: Timestamp::from_millis(self.fire_at),
            attempt: u32::try_from(self.attempt).unwrap_or(0),
        }
    }

    /// The arguments of [`SET_RUN`].
    pub(crate) fn set_args(&self) -> [super::Arg; 9] {
        [
            self.node.as_str().into(),
            self.fire_at.into(),
            self.trigger.as_str().into(),
            self.attempt.into(),
            self.token.into(),
            self.started_at.into(),
            self.covered_fires.into(),
            self.covered_through.into(),
            self.context.clone().into(),
        ]
    }
}

/// The run ids of `n` runs starting at `now` (ms), in `tx`: from the dialect's
/// sequence, carrying their day, where it has one; otherwise from the store's
/// counter of run ids (SQLite), which is past every id the run table ever held.
pub(crate) async fn new_ids<D: Dialect>(
    d: &D,
    tx: &mut D::Tx,
    op: &'static str,
    n: usize,
    now: i64,
) -> Result<Vec<i64>> {
    if n == 0 {
        return Ok(Vec::new());
    }
    let e = |err| d.err(op, err);
    match d.run_sequence() {
        Some(next) => {
            let id = super::run_ids::run_id_for(&now.to_string(), &next, D::DIV);
            let mut q = Sql::new(format!("SELECT {id} AS id FROM {}", d.values(&["k"], n)));
            q.args.extend((0..n as i64).map(Into::into));
            let rows = d.fetch_in(tx, op, q).await?;
            rows.iter().map(|r| r.int("id").map_err(e)).collect()
        }
        None => {
            let bump = Sql::new(format!("UPDATE {} SET n = n + ?", d.t("run_ids"))).bind(n as i64);
            d.exec_in(tx, op, bump).await?;
            let read = Sql::new(format!("SELECT n AS id FROM {}", d.t("run_ids")));
            let rows = d.fetch_in(tx, op, read).await?;
            let last = decode::col(
                D::NAME,
                op,
                rows.first()
                    .map(|r| r.int("id"))
                    .unwrap_or(Err(sqlx::Error::RowNotFound)),
            )?;
            Ok((last - n as i64 + 1..=last).collect())
        }
    }
}

/// Moves the running runs of the jobs `ids` that their rows hold into the run log,
/// as running run rows, in `tx`: before the rows are deleted, so a removed job's run
/// stays in the log and its finish is still recorded.
pub(crate) async fn move_out<D: Dialect>(
    d: &D,
    tx: &mut D::Tx,
    op: &'static str,
    ids: &[&str],
) -> Result<u64> {
    if ids.is_empty() {
        return Ok(0);
    }
    let mut q = Sql::new(format!(
        "INSERT INTO {} ({}) SELECT {} FROM {} WHERE {IN_ROW} AND id IN ({})",
        d.t("runs"),
        run_columns::<D>(),
        as_run_columns::<D>(),
        d.t("jobs"),
        marks(ids.len())
    ));
    q.args.extend(ids.iter().map(|id| (*id).into()));
    d.exec_in(tx, op, q).await
}
