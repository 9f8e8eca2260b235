//! What the SQL backends share: typed column access over each driver's row type, the
//! JSON columns, and decoding rows into the store's records.

use crate::error::{Error, Result};
use crate::job::{Job, JobId};
use crate::record::*;
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

/// Writes a JSON column.
pub(crate) fn encode<T: serde::Serialize>(backend: &'static str, v: &T) -> Result<String> {
    serde_json::to_string(v).map_err(|e| Error::backend(backend, "encode", false, e))
}

fn col<T>(backend: &'static str, what: &'static str, r: Result<T, sqlx::Error>) -> Result<T> {
    r.map_err(|e| Error::backend(backend, what, false, e))
}

/// A row of the jobs table.
pub(crate) fn job_record(backend: &'static str, row: &impl SqlRow) -> Result<JobRecord> {
    let w = "decode job";
    let job: Job = decode(backend, &col(backend, w, row.text("definition"))?, w)?;
    let trigger = col(backend, w, row.text("next_trigger"))?;
    Ok(JobRecord {
        job: Arc::new(job),
        version: col(backend, w, row.int("version"))? as u64,
        next_fire_at: col(backend, w, row.opt_int("next_fire_at"))?.map(Timestamp::from_millis),
        next_trigger: TriggerKind::parse(&trigger).unwrap_or_default(),
        attempt: col(backend, w, row.int32("attempt"))? as u32,
        resume_after: col(backend, w, row.opt_int("resume_after"))?.map(Timestamp::from_millis),
        last_token: col(backend, w, row.int("last_token"))? as u64,
        running: col(backend, w, row.opt_int("running_run"))?.map(RunId),
        created_at: Timestamp::from_millis(col(backend, w, row.int("created_at"))?),
        updated_at: Timestamp::from_millis(col(backend, w, row.int("updated_at"))?),
    })
}

/// A job row as a due fire.
pub(crate) fn due_fire(backend: &'static str, row: &impl SqlRow) -> Result<DueFire> {
    let r = job_record(backend, row)?;
    Ok(DueFire {
        job_id: r.job.id().clone(),
        fire_at: r.next_fire_at.unwrap_or_default(),
        version: r.version,
        trigger: r.next_trigger,
        attempt: r.attempt,
        resume_after: r.resume_after,
        job: r.job,
    })
}

/// A row of the runs table.
pub(crate) fn run_record(backend: &'static str, row: &impl SqlRow) -> Result<RunRecord> {
    let w = "decode run";
    let status = col(backend, w, row.text("status"))?;
    let trigger = col(backend, w, row.text("trigger"))?;
    let fire_at = Timestamp::from_millis(col(backend, w, row.int("fire_at"))?);
    let covers = match (
        col(backend, w, row.opt_int("covered_fires"))?,
        col(backend, w, row.opt_int("covered_through"))?,
    ) {
        (Some(fires), Some(through)) => Some(FireSpan {
            fires: fires.max(0) as u64,
            first: fire_at,
            through: Timestamp::from_millis(through),
        }),
        _ => None,
    };
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
        covers,
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

/// A row of the nodes table.
pub(crate) fn node_record(backend: &'static str, row: &impl SqlRow) -> Result<NodeRecord> {
    let w = "decode node";
    Ok(NodeRecord {
        info: decode(backend, &col(backend, w, row.text("info"))?, w)?,
        last_beat: Timestamp::from_millis(col(backend, w, row.int("last_beat"))?),
    })
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
