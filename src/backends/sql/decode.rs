//! Reading rows: typed column access over each driver's row type, the JSON columns,
//! and decoding rows into the store's records (skipping and reporting those that
//! cannot be read).

use crate::error::{Error, Result};
use crate::job::{Job, JobId};
use crate::record::*;
use crate::store::{CorruptRow, Page};
use crate::time::Timestamp;
use std::sync::Arc;

/// Typed column access, implemented for each driver's row type.
pub(crate) trait SqlRow {
    fn text(&self, column: &str) -> Result<String, sqlx::Error>;
    fn opt_text(&self, column: &str) -> Result<Option<String>, sqlx::Error>;
    fn int(&self, column: &str) -> Result<i64, sqlx::Error>;
    fn opt_int(&self, column: &str) -> Result<Option<i64>, sqlx::Error>;
    /// A 32-bit `INTEGER` / `INT` column.
    fn int32(&self, column: &str) -> Result<i32, sqlx::Error>;
    /// A nullable 32-bit column.
    fn opt_int32(&self, column: &str) -> Result<Option<i32>, sqlx::Error>;
    fn flag(&self, column: &str) -> Result<bool, sqlx::Error>;
}

macro_rules! sql_row {
    ($row:ty) => {
        impl SqlRow for $row {
            fn text(&self, c: &str) -> Result<String, sqlx::Error> {
                sqlx::Row::try_get(self, c)
            }
            fn opt_text(&self, c: &str) -> Result<Option<String>, sqlx::Error> {
                sqlx::Row::try_get(self, c)
            }
            fn int(&self, c: &str) -> Result<i64, sqlx::Error> {
                sqlx::Row::try_get(self, c)
            }
            fn opt_int(&self, c: &str) -> Result<Option<i64>, sqlx::Error> {
                sqlx::Row::try_get(self, c)
            }
            fn int32(&self, c: &str) -> Result<i32, sqlx::Error> {
                sqlx::Row::try_get(self, c)
            }
            fn opt_int32(&self, c: &str) -> Result<Option<i32>, sqlx::Error> {
                sqlx::Row::try_get(self, c)
            }
            fn flag(&self, c: &str) -> Result<bool, sqlx::Error> {
                sqlx::Row::try_get(self, c)
            }
        }
    };
}

#[cfg(feature = "sqlite")]
sql_row!(sqlx::sqlite::SqliteRow);
#[cfg(feature = "postgres")]
sql_row!(sqlx::postgres::PgRow);
#[cfg(feature = "mysql")]
sql_row!(sqlx::mysql::MySqlRow);

/// Reads a JSON column.
pub(crate) fn decode<T: serde::de::DeserializeOwned>(
    backend: &'static str,
    text: &str,
    what: &'static str,
) -> Result<T> {
    serde_json::from_str(text).map_err(|e| Error::backend(backend, what, false, e))
}

/// The bind arguments of a job's next fire (`None`: nothing to fire), in the order
/// `next_fire_at, next_trigger, attempt, resume_after, next_context`.
pub(crate) fn fire_args(fire: Option<&FireState>) -> [super::Arg; 5] {
    match fire {
        Some(f) => [
            f.at.as_millis().into(),
            f.trigger.as_str().into(),
            i64::from(f.attempt).into(),
            f.resume_after.map(Timestamp::as_millis).into(),
            f.context.to_stored().into(),
        ],
        None => [
            None::<i64>.into(),
            TriggerKind::Schedule.as_str().into(),
            0i64.into(),
            None::<i64>.into(),
            None::<String>.into(),
        ],
    }
}

/// The next fire of a job row: its columns `next_fire_at`, `next_trigger`,
/// `attempt`, `resume_after` and `next_context`.
fn next_fire(row: &impl SqlRow) -> Result<Option<FireState>, String> {
    let e = |e: sqlx::Error| e.to_string();
    let Some(at) = row.opt_int("next_fire_at").map_err(e)? else {
        return Ok(None);
    };
    let trigger = row.text("next_trigger").map_err(e)?;
    Ok(Some(FireState {
        at: Timestamp::from_millis(at),
        trigger: TriggerKind::parse(&trigger).unwrap_or_default(),
        attempt: row.int32("attempt").map_err(e)?.max(0) as u32,
        resume_after: row
            .opt_int("resume_after")
            .map_err(e)?
            .map(Timestamp::from_millis),
        context: FireContext::from_stored(row.opt_text("next_context").map_err(e)?.as_deref())
            .map_err(|e| e.to_string())?,
    }))
}

/// Writes a JSON column.
pub(crate) fn encode<T: serde::Serialize>(backend: &'static str, v: &T) -> Result<String> {
    serde_json::to_string(v).map_err(|e| Error::backend(backend, "encode", false, e))
}

pub(crate) fn col<T>(
    backend: &'static str,
    what: &'static str,
    r: Result<T, sqlx::Error>,
) -> Result<T> {
    r.map_err(|e| Error::backend(backend, what, false, e))
}

/// The error for a stored row of `what` that cannot be read.
fn corrupt(what: &'static str, id: &str, reason: impl std::fmt::Display) -> Error {
    Error::Corrupt {
        what,
        id: id.to_string(),
        reason: reason.to_string(),
    }
}

/// A row of the jobs table. A definition that cannot be read (or a column of the
/// wrong shape) is [`Error::Corrupt`]; the definition is read leniently
/// ([`Job::from_stored`]).
pub(crate) fn job_record(backend: &'static str, row: &impl SqlRow) -> Result<JobRecord> {
    let w = "decode job";
    let id = col(backend, w, row.text("id"))?;
    let bad = |e: &dyn std::fmt::Display| corrupt("job", &id, e);
    let job =
        Job::from_stored(&row.text("definition").map_err(|e| bad(&e))?).map_err(|e| bad(&e))?;
    if job.id().as_str() != id {
        return Err(bad(&format!(
            "its definition names job {:?}",
            job.id().as_str()
        )));
    }
    let int = |c: &str| row.int(c).map_err(|e| bad(&e));
    let opt = |c: &str| row.opt_int(c).map_err(|e| bad(&e));
    Ok(JobRecord {
        job: Arc::new(job),
        version: int("version")? as u64,
        next: next_fire(row).map_err(|e| bad(&e))?,
        last_token: int("last_token")? as u64,
        running: opt("running_run")?.map(RunId),
        created_at: Timestamp::from_millis(int("created_at")?),
        updated_at: Timestamp::from_millis(int("updated_at")?),
    })
}

/// Reads job rows into a page: rows that cannot be read are skipped and reported,
/// with their due key when they have a next fire.
pub(crate) fn job_page<R: SqlRow>(backend: &'static str, rows: &[R]) -> Result<Page<JobRecord>> {
    let mut page = Page::default();
    for row in rows {
        match job_record(backend, row) {
            Ok(r) => page.items.push(r),
            Err(Error::Corrupt { id, reason, .. }) => {
                let due_key = match (row.opt_int("next_fire_at"), JobId::new(&id)) {
                    (Ok(Some(at)), Ok(job_id)) => Some(DueKey {
                        fire_at: Timestamp::from_millis(at),
                        job_id,
                    }),
                    _ => None,
                };
                page.corrupt.push(CorruptRow {
                    kind: "job",
                    id,
                    due_key,
                    reason,
                });
            }
            Err(e) => return Err(e),
        }
    }
    Ok(page)
}

/// The part of a job row the rules read (columns `enabled`, `version`,
/// `next_fire_at`, `running_run`, `last_token`).
pub(crate) fn job_state(
    r: &impl SqlRow,
) -> std::result::Result<crate::store::rules::JobState, sqlx::Error> {
    Ok(crate::store::rules::JobState {
        enabled: r.flag("enabled")?,
        version: r.int("version")? as u64,
        next_fire_at: r.opt_int("next_fire_at")?.map(Timestamp::from_millis),
        running: r.opt_int("running_run")?.map(RunId),
        last_token: r.int("last_token")? as u64,
    })
}

/// A job record as a due fire (`None` when it has no next fire).
pub(crate) fn due_fire(r: JobRecord) -> Option<DueFire> {
    Some(DueFire {
        job_id: r.job.id().clone(),
        version: r.version,
        fire: r.next?,
        job: r.job,
    })
}

/// A row of the runs table.
pub(crate) fn run_record(backend: &'static str, row: &impl SqlRow) -> Result<RunRecord> {
    let w = "decode run";
    let status = col(backend, w, row.text("status"))?;
    let trigger = col(backend, w, row.text("trigger"))?;
    let fire_at = Timestamp::from_millis(col(backend, w, row.int("fire_at"))?);
    let covers = FireSpan::from_stored(
        fire_at,
        col(backend, w, row.opt_int("covered_fires"))?,
        col(backend, w, row.opt_int("covered_through"))?,
    );
    Ok(RunRecord {
        id: RunId(col(backend, w, row.int("id"))?),
        job_id: JobId::new(col(backend, w, row.text("job_id"))?)?,
        fire_at,
        trigger: TriggerKind::parse(&trigger).unwrap_or_default(),
        node: col(backend, w, row.text("node"))?,
        attempt: col(backend, w, row.int32("attempt"))? as u32,
        token: col(backend, w, row.int("token"))? as u64,
        status: RunStatus::parse(&status).ok_or_else(|| {
            Error::backend(backend, w, false, format!("unknown status {status:?}"))
        })?,
        started_at: Timestamp::from_millis(col(backend, w, row.int("started_at"))?),
        ended_at: col(backend, w, row.opt_int("ended_at"))?.map(Timestamp::from_millis),
        error: col(backend, w, row.opt_text("error"))?,
        will_retry: col(backend, w, row.flag("will_retry"))?,
        executor: col(backend, w, row.opt_text("executor"))?,
        covers,
        context: FireContext::from_stored(col(backend, w, row.opt_text("context"))?.as_deref())?,
    })
}

/// A row of the alarms table.
pub(crate) fn alarm_record(backend: &'static str, row: &impl SqlRow) -> Result<AlarmRecord> {
    let w = "decode alarm";
    let status = col(backend, w, row.text("status"))?;
    Ok(AlarmRecord {
        id: AlarmId(col(backend, w, row.int("id"))?),
        event: decode(backend, &col(backend, w, row.text("event"))?, w)?,
        status: AlarmStatus::parse(&status).unwrap_or(AlarmStatus::Pending),
        attempts: col(backend, w, row.int32("attempts"))? as u32,
        next_attempt_at: col(backend, w, row.opt_int("next_attempt_at"))?
            .map(Timestamp::from_millis),
        claimed_by: col(backend, w, row.opt_text("claimed_by"))?,
        claim_until: col(backend, w, row.opt_int("claim_until"))?.map(Timestamp::from_millis),
        last_error: col(backend, w, row.opt_text("last_error"))?,
        created_at: Timestamp::from_millis(col(backend, w, row.int("created_at"))?),
    })
}

/// Reads node rows into a page, skipping and reporting those that cannot be read.
pub(crate) fn node_page<R: SqlRow>(backend: &'static str, rows: &[R]) -> Result<Page<NodeRecord>> {
    let w = "decode node";
    let mut page = Page::default();
    for row in rows {
        let id = col(backend, w, row.text("node_id"))?;
        let info = row
            .text("info")
            .map_err(|e| e.to_string())
            .and_then(|t| serde_json::from_str::<NodeInfo>(&t).map_err(|e| e.to_string()));
        match (info, row.int("last_beat")) {
            (Ok(info), Ok(beat)) => page.items.push(NodeRecord {
                info,
                last_beat: Timestamp::from_millis(beat),
            }),
            (Err(reason), _) => page.corrupt.push(CorruptRow {
                kind: "node",
                id,
                due_key: None,
                reason,
            }),
            (_, Err(e)) => page.corrupt.push(CorruptRow {
                kind: "node",
                id,
                due_key: None,
                reason: e.to_string(),
            }),
        }
    }
    Ok(page)
}

/// Decodes `grp, address, info, registered_at, last_beat` rows; a row whose info or
/// instants cannot be read is reported, keyed `group/address`.
pub(crate) fn executor_page<R: SqlRow>(
    backend: &'static str,
    rows: &[R],
) -> Result<Page<ExecutorRecord>> {
    let w = "decode executor";
    let mut page = Page::default();
    for row in rows {
        let id = format!(
            "{}/{}",
            col(backend, w, row.text("grp"))?,
            col(backend, w, row.text("address"))?
        );
        let read = || -> std::result::Result<ExecutorRecord, String> {
            let info = row.text("info").map_err(|e| e.to_string())?;
            let info: ExecutorInfo = serde_json::from_str(&info).map_err(|e| e.to_string())?;
            Ok(ExecutorRecord {
                info,
                registered_at: Timestamp::from_millis(
                    row.int("registered_at").map_err(|e| e.to_string())?,
                ),
                last_beat: Timestamp::from_millis(row.int("last_beat").map_err(|e| e.to_string())?),
            })
        };
        match read() {
            Ok(e) => page.items.push(e),
            Err(reason) => page.corrupt.push(CorruptRow {
                kind: "executor",
                id,
                due_key: None,
                reason,
            }),
        }
    }
    Ok(page)
}

/// The first row's `now` column.
pub(crate) fn first_int(
    backend: &'static str,
    rows: &[impl SqlRow],
    what: &'static str,
) -> Result<i64> {
    let row = rows
        .first()
        .ok_or_else(|| Error::backend(backend, what, false, "no row returned"))?;
    col(backend, what, row.int("now"))
}

/// Milliseconds in a UTC day.
pub(crate) const DAY_MS: i64 = 86_400_000;

/// Epoch milliseconds of the start of a UTC day.
pub(crate) fn day_start_ms(day: chrono::NaiveDate) -> i64 {
    day.and_hms_opt(0, 0, 0)
        .map_or(0, |t| t.and_utc().timestamp_millis())
}

/// Folds `(day, status, n)` rows, ordered by day, into one entry per day.
pub(crate) fn daily_stats(backend: &'static str, rows: &[impl SqlRow]) -> Result<Vec<DailyStats>> {
    let w = "daily_stats";
    let mut out: Vec<DailyStats> = Vec::new();
    for row in rows {
        let day = Timestamp::from_millis(col(backend, w, row.int("day"))? * DAY_MS)
            .to_datetime()
            .date_naive();
        if out.last().is_none_or(|d| d.day != day) {
            out.push(DailyStats {
                day,
                ..DailyStats::default()
            });
        }
        if let Some(status) = RunStatus::parse(&col(backend, w, row.text("status"))?) {
            let n = col(backend, w, row.int("n"))?.max(0) as u64;
            out.last_mut().expect("pushed above").add(status, n);
        }
    }
    Ok(out)
}

/// A span's two stored columns, `covered_fires` and `covered_through`.
pub(crate) fn span_columns(covers: Option<FireSpan>) -> (Option<i64>, Option<i64>) {
    match covers {
        Some(c) => (
            Some(i64::try_from(c.fires).unwrap_or(i64::MAX)),
            Some(c.through.as_millis()),
        ),
        None => (None, None),
    }
}
