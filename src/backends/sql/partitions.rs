//! The run log in day partitions (PostgreSQL, MariaDB).
//!
//! A run id carries the UTC day its run started on: `day * 2^33 + (a sequence's next
//! value mod 2^33)` (`run_ids.rs`), and the run and line tables are partitioned by
//! range of the run id, one partition per day, tagged `dYYYYMMDD`. The tables as
//! they were before partitioning are one partition tagged `legacy`, holding every id
//! below the day they were converted on. So a lookup by id reads one partition, a
//! query by job reads each partition's `(job_id, id)` index newest first, and
//! retention drops a day whole ([`purge`]): one catalog change instead of a delete
//! per row, per index entry and per line.
//!
//! [`prepare`] keeps the partitions of today and the next
//! [`DAYS_AHEAD`](crate::store::DAYS_AHEAD) days; nodes doing it at once are
//! harmless (a change that fails is checked against the catalog: one that another
//! node made is done).

use super::decode::SqlRow;
#[cfg(feature = "postgres")]
use super::run_ids::LEGACY_BELOW;
use super::run_ids::{DAY_MS, ID_STEP};
use super::{Dialect, Sql};
use crate::error::Result;
use crate::store::DAYS_AHEAD;
use chrono::{Datelike, NaiveDate};

/// A partition of the run log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Part {
    /// The runs that started on this UTC day (days since 1970-01-01).
    Day(i64),
    /// The tables as they were before partitioning (ids below their first day's).
    Legacy,
}

impl Part {
    /// The tag in the partition's name: `dYYYYMMDD` or `legacy`.
    pub(crate) fn tag(self) -> String {
        match self {
            Part::Day(d) => {
                let date = NaiveDate::default() + chrono::Days::new(d.max(0) as u64);
                format!("d{:04}{:02}{:02}", date.year(), date.month(), date.day())
            }
            Part::Legacy => "legacy".into(),
        }
    }

    /// The partition a tag names; `None` for another (MariaDB's `pmax`).
    pub(crate) fn parse(tag: &str) -> Option<Part> {
        if tag == "legacy" {
            return Some(Part::Legacy);
        }
        let date = NaiveDate::parse_from_str(tag.strip_prefix('d')?, "%Y%m%d").ok()?;
        Some(Part::Day((date - NaiveDate::default()).num_days()))
    }
}

/// What a dialect whose run log is partitioned by day says in SQL.
pub(crate) trait DayParts: Dialect {
    /// A query listing the run table's partitions, their tag (see [`Part::tag`]) in
    /// a text column `tag` (others, such as MariaDB's `pmax`, are skipped).
    fn list_parts(&self) -> Sql;
    /// A `FROM` item reading partition `tag` of table `table` (`runs` or `run_lines`).
    fn part_of(&self, table: &str, tag: &str) -> String;
    /// Statements adding day `day`'s partition to the run and line tables; the day
    /// partitions already there end before it.
    fn add_day(&self, day: i64) -> Vec<Sql>;
    /// Statements dropping partition `tag` of the run and line tables.
    fn drop_part(&self, tag: &str) -> Vec<Sql>;
}

/// The run log's partitions, in the order the catalog lists them.
pub(crate) async fn parts<D: DayParts>(d: &D) -> Result<Vec<Part>> {
    let rows = d.fetch("log partitions", d.list_parts()).await?;
    let mut out = Vec::new();
    for r in rows {
        let tag = r.text("tag").map_err(|e| d.err("log partitions", e))?;
        out.extend(Part::parse(&tag));
    }
    Ok(out)
}

/// Creates the missing partitions of today (the store's clock) and the next
/// [`DAYS_AHEAD`] days, in day order.
pub(crate) async fn prepare<D: DayParts>(d: &D) -> Result<()> {
    let rows = d
        .fetch(
            "log partitions",
            Sql::new(format!("SELECT {} AS now", D::NOW_MS)),
        )
        .await?;
    let now_ms = match rows.first() {
        Some(r) => r.int("now").map_err(|e| d.err("log partitions", e))?,
        None => return Ok(()),
    };
    let today = now_ms.div_euclid(DAY_MS);
    let have = parts(d).await?;
    for day in today..=today + i64::from(DAYS_AHEAD) {
        if have.contains(&Part::Day(day)) {
            continue;
        }
        if let Err(e) = run_all(d, d.add_day(day)).await {
            // Another node may have added it since the catalog was read.
            if !parts(d).await?.contains(&Part::Day(day)) {
                return Err(e);
            }
        }
    }
    Ok(())
}

/// Creates the missing partitions of the days the run ids `ids` carry: a run row
/// written at its finish goes into its start day's partition, which a day without
/// maintenance (or a run longer than the days kept ahead) may not have.
#[cfg(feature = "postgres")]
pub(crate) async fn add_days_of<D: DayParts>(d: &D, ids: &[i64]) -> Result<()> {
    let mut days: Vec<i64> = ids
        .iter()
        .map(|id| id.div_euclid(ID_STEP))
        .filter(|day| *day * ID_STEP >= LEGACY_BELOW)
        .collect();
    days.sort_unstable();
    days.dedup();
    let have = parts(d).await?;
    for day in days {
        if have.contains(&Part::Day(day)) {
            continue;
        }
        if let Err(e) = run_all(d, d.add_day(day)).await
            && !parts(d).await?.contains(&Part::Day(day))
        {
            return Err(e);
        }
    }
    Ok(())
}

/// Deletes the finished runs that started before `before` (ms) and their lines:
/// a partition whose runs all go (every run of it started before `before` and has
/// ended) is dropped whole; in one that keeps some, the others are deleted row by
/// row. Partitions of days from `before`'s on are not touched. Returns how many
/// runs went.
pub(crate) async fn purge<D: DayParts>(d: &D, before: i64) -> Result<u64> {
    let mut total = 0;
    for part in parts(d).await? {
        let whole = match part {
            Part::Legacy => true,
            Part::Day(day) if (day + 1) * DAY_MS <= before => true,
            Part::Day(day) if day * DAY_MS < before => false,
            Part::Day(_) => continue,
        };
        let tag = part.tag();
        let runs = d.part_of("runs", &tag);
        if whole {
            // A run of the day still running in its job's row keeps the day too.
            let (lo, hi) = match part {
                Part::Day(day) => (day * ID_STEP, (day + 1) * ID_STEP),
                Part::Legacy => (0, 0),
            };
            let count = Sql::new(format!(
                "SELECT COUNT(*) AS n, COUNT(CASE WHEN ended_at IS NULL OR started_at >= ? THEN 1 END)
                     + (SELECT COUNT(*) FROM {jobs} WHERE {in_row} AND running_run >= ? AND running_run < ?) AS kept
                 FROM {runs}",
                jobs = d.t("jobs"),
                in_row = super::IN_ROW,
            ))
            .bind(before)
            .bind(lo)
            .bind(hi);
            let rows = d.fetch("purge_runs", count).await?;
            let (n, kept) = match rows.first() {
                Some(r) => (
                    r.int("n").map_err(|e| d.err("purge_runs", e))?,
                    r.int("kept").map_err(|e| d.err("purge_runs", e))?,
                ),
                None => (0, 0),
            };
            if kept == 0 {
                if let Err(e) = run_all(d, d.drop_part(&tag)).await {
                    // Another node's purge may have dropped it since.
                    if parts(d).await?.contains(&part) {
                        return Err(e);
                    }
                    continue;
                }
                total += n.max(0) as u64;
                continue;
            }
        }
        total += delete_rows(d, &tag, before).await?;
    }
    Ok(total)
}

/// Deletes, in partition `tag`, the finished runs started before `before` and their
/// lines, in one transaction.
async fn delete_rows<D: DayParts>(d: &D, tag: &str, before: i64) -> Result<u64> {
    let op = "purge_runs";
    let (runs, lines) = (d.part_of("runs", tag), d.part_of("run_lines", tag));
    let gone = "ended_at IS NOT NULL AND started_at < ?";
    let mut tx = d.begin(op).await?;
    let purge_lines = Sql::new(format!(
        "DELETE FROM {lines} WHERE run_id IN (SELECT id FROM {runs} WHERE {gone})"
    ))
    .bind(before);
    d.exec_in(&mut tx, op, purge_lines).await?;
    let purge_runs = Sql::new(format!("DELETE FROM {runs} WHERE {gone}")).bind(before);
    let n = d.exec_in(&mut tx, op, purge_runs).await?;
    d.commit(tx, op).await?;
    Ok(n)
}

/// Runs statements in one transaction: one change on PostgreSQL, where DDL is
/// transactional; one after another on MariaDB, where each commits on its own (and
/// its statements are written to be repeated).
async fn run_all<D: Dialect>(d: &D, statements: Vec<Sql>) -> Result<()> {
    let op = "log partitions";
    let mut tx = d.begin(op).await?;
    for s in statements {
        d.exec_in(&mut tx, op, s).await?;
    }
    d.commit(tx, op).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_name_days_and_back() {
        let day = (NaiveDate::from_ymd_opt(2026, 12, 6).unwrap() - NaiveDate::default()).num_days();
        assert_eq!(Part::Day(day).tag(), "d20261206");
        assert_eq!(Part::parse("d20261206"), Some(Part::Day(day)));
        assert_eq!(Part::parse("legacy"), Some(Part::Legacy));
        assert_eq!(Part::parse("pmax"), None);
        assert_eq!(Part::parse("d2026120"), None);
        // Ids of the year 2200 stay below 2^53.
        assert!((day + 200 * 366) * ID_STEP < 1 << 53);
    }
}
