//! [`RunLog`] and [`NodeRegistry`] for [`SqlStore`].

use super::decode::SqlRow;
use super::decode::{self, DAY_MS, day_start_ms, encode};
use super::{Dialect, Sql, SqlStore, marks, now_in, running, value_rows};

/// Log lines inserted per statement (three parameters each: under every server's
/// parameter limit).
const LINES_PER_STATEMENT: usize = 1_000;
use crate::error::Result;
use crate::record::*;
use crate::store::{NodeRegistry, Page, RunLog, RunQuery};
use crate::time::{Timestamp, duration_ms};
use async_trait::async_trait;
use chrono::NaiveDate;
use std::time::Duration;

#[async_trait]
impl<D: Dialect> RunLog for SqlStore<D> {
    async fn runs(&self, q: &RunQuery) -> Result<Vec<RunRecord>> {
        // The run rows and the running runs kept in job rows, each newest first and
        // cut at the limit, merged.
        let limit = q.effective_limit().min(i64::MAX as usize) as i64;
        let mut sql = Sql::new(format!(
            "SELECT * FROM (SELECT * FROM (SELECT {} FROM {} WHERE 1 = 1",
            running::run_columns::<D>(),
            self.d.t("runs")
        ));
        if let Some(j) = &q.job_id {
            sql.push(" AND job_id = ?", [j.as_str().into()]);
        }
        if let Some(s) = q.status {
            // A literal from a closed set, so that PostgreSQL can prove the query
            // within its partial indexes (runs that did not succeed; running runs).
            sql.push(&format!(" AND status = '{}'", s.as_str()), []);
        }
        if let Some(n) = &q.node {
            sql.push(" AND node = ?", [n.as_str().into()]);
        }
        if let Some(t) = q.trigger {
            sql.push(&format!(" AND {} = ?", D::TRIGGER), [t.as_str().into()]);
        }
        if let Some(t) = q.since {
            sql.push(" AND started_at >= ?", [t.as_millis().into()]);
        }
        if let Some(t) = q.until {
            sql.push(" AND started_at < ?", [t.as_millis().into()]);
        }
        if let Some(b) = q.before {
            sql.push(" AND id < ?", [b.0.into()]);
        }
        if self.d.run_sequence().is_some() {
            let (since, until) = (
                q.since.map(|t| t.as_millis()),
                q.until.map(|t| t.as_millis()),
            );
            for (cond, args) in super::run_ids::id_bounds(since, until) {
                sql.push(cond, args.into_iter().map(Into::into));
            }
        }
        sql.push(" ORDER BY id DESC LIMIT ?) a", [limit.into()]);
        if q.status.is_none_or(|s| s == RunStatus::Running) {
            sql.push(
                &format!(
                    " UNION ALL SELECT * FROM (SELECT {} FROM {} WHERE {} AND running_run IS NOT NULL",
                    running::as_run_columns::<D>(),
                    self.d.t("jobs"),
                    super::IN_ROW
                ),
                [],
            );
            if let Some(j) = &q.job_id {
                sql.push(" AND id = ?", [j.as_str().into()]);
            }
            if let Some(n) = &q.node {
                sql.push(" AND run_node = ?", [n.as_str().into()]);
            }
            if let Some(t) = q.trigger {
                sql.push(" AND run_trigger = ?", [t.as_str().into()]);
            }
            if let Some(t) = q.since {
                sql.push(" AND run_started_at >= ?", [t.as_millis().into()]);
            }
            if let Some(t) = q.until {
                sql.push(" AND run_started_at < ?", [t.as_millis().into()]);
            }
            if let Some(b) = q.before {
                sql.push(" AND running_run < ?", [b.0.into()]);
            }
            sql.push(" ORDER BY running_run DESC LIMIT ?) b", [limit.into()]);
        }
        sql.push(") u ORDER BY id DESC LIMIT ?", [limit.into()]);
        let rows = self.d.fetch("runs", sql).await?;
        rows.iter()
            .map(|r| decode::run_record(D::NAME, r))
            .collect()
    }

    async fn purge_runs(&self, before: Timestamp) -> Result<u64> {
        self.d.purge_runs(before.as_millis()).await
    }

    async fn prepare_log(&self) -> Result<()> {
        self.d.prepare_log().await
    }

    async fn append_lines(&self, chunks: &[LogLines]) -> Result<()> {
        let op = "append_lines";
        let rows: Vec<(i64, i64, &str)> = chunks
            .iter()
            .flat_map(|c| {
                (c.first..)
                    .zip(&c.lines)
                    .map(|(seq, line)| (c.run_id.0, seq.min(i64::MAX as u64) as i64, line.as_str()))
            })
            .collect();
        for part in rows.chunks(LINES_PER_STATEMENT) {
            let mut q = Sql::new(format!(
                "{} {} (run_id, seq, line) VALUES {}{}",
                D::INSERT_IGNORE,
                self.d.t("run_lines"),
                value_rows(3, part.len()),
                D::ON_CONFLICT_IGNORE
            ));
            for (run, seq, line) in part {
                q = q.bind(*run).bind(*seq).bind(*line);
            }
            self.d.exec(op, q).await?;
        }
        Ok(())
    }

    async fn lines(&self, run: RunId, offset: u64, limit: usize) -> Result<Vec<LogLine>> {
        let q = Sql::new(format!(
            "SELECT seq, line FROM {} WHERE run_id = ? AND seq >= ? ORDER BY seq LIMIT ?",
            self.d.t("run_lines")
        ))
        .bind(run.0)
        .bind(offset.min(i64::MAX as u64) as i64)
        .bind(limit.min(i64::MAX as usize) as i64);
        let rows = self.d.fetch("lines", q).await?;
        let w = "decode log line";
        rows.iter()
            .map(|r| {
                Ok(LogLine {
                    offset: decode::col(D::NAME, w, r.int("seq"))?.max(0) as u64,
                    line: decode::col(D::NAME, w, r.text("line"))?,
                })
            })
            .collect()
    }

    async fn daily_stats(&self, from: NaiveDate, to: NaiveDate) -> Result<Vec<DailyStats>> {
        // The run rows by day and status, and the running runs kept in job rows (a
        // day and status read twice adds up).
        let div = D::DIV;
        let q = Sql::new(format!(
            "SELECT day, status, n FROM (
                 SELECT started_at {div} {DAY_MS} AS day, status, COUNT(*) AS n FROM {runs}
                 WHERE started_at >= ? AND started_at < ? GROUP BY started_at {div} {DAY_MS}, status
                 UNION ALL
                 SELECT run_started_at {div} {DAY_MS} AS day, 'running' AS status, COUNT(*) AS n FROM {jobs}
                 WHERE {in_row} AND run_started_at >= ? AND run_started_at < ? GROUP BY run_started_at {div} {DAY_MS}
             ) s ORDER BY day",
            runs = self.d.t("runs"),
            jobs = self.d.t("jobs"),
            in_row = super::IN_ROW,
        ))
        .bind(day_start_ms(from))
        .bind(day_start_ms(to) + DAY_MS)
        .bind(day_start_ms(from))
        .bind(day_start_ms(to) + DAY_MS);
        let rows = self.d.fetch("daily_stats", q).await?;
        decode::daily_stats(D::NAME, &rows)
    }
}

#[async_trait]
impl<D: Dialect> NodeRegistry for SqlStore<D> {
    async fn heartbeat(&self, node: &NodeInfo) -> Result<Timestamp> {
        let op = "heartbeat";
        let (d, nodes) = (&self.d, self.d.t("nodes"));
        let info = encode(D::NAME, node)?;
        let mut tx = d.begin(op).await?;
        let now = now_in(d, &mut tx, op).await?;
        let insert = Sql::new(format!(
            "{} {nodes} (node_id, info, last_beat) VALUES (?, ?, ?){}",
            D::INSERT_IGNORE,
            D::ON_CONFLICT_IGNORE
        ))
        .bind(node.node_id.as_str())
        .bind(info.as_str())
        .bind(now);
        if d.exec_in(&mut tx, op, insert).await? == 0 {
            let update = Sql::new(format!(
                "UPDATE {nodes} SET info = ?, last_beat = ? WHERE node_id = ?"
            ))
            .bind(info.as_str())
            .bind(now)
            .bind(node.node_id.as_str());
            d.exec_in(&mut tx, op, update).await?;
        }
        d.commit(tx, op).await?;
        Ok(Timestamp::from_millis(now))
    }

    async fn nodes(&self) -> Result<Page<NodeRecord>> {
        let q = Sql::new(format!(
            "SELECT node_id, info, last_beat FROM {} ORDER BY node_id",
            self.d.t("nodes")
        ));
        let rows = self.d.fetch("nodes", q).await?;
        decode::node_page(D::NAME, &rows)
    }

    async fn reap_nodes(&self, silent_for: Duration) -> Result<Vec<String>> {
        let op = "reap_nodes";
        let (d, nodes) = (&self.d, self.d.t("nodes"));
        let mut tx = d.begin(op).await?;
        let now = now_in(d, &mut tx, op).await?;
        let read = Sql::new(format!(
            "SELECT node_id FROM {nodes} WHERE last_beat < ? ORDER BY node_id{}",
            D::FOR_UPDATE
        ))
        .bind(now.saturating_sub(duration_ms(silent_for)));
        let dead: Vec<String> = d
            .fetch_in(&mut tx, op, read)
            .await?
            .iter()
            .map(|r| r.text("node_id").map_err(|e| d.err(op, e)))
            .collect::<Result<_>>()?;
        if !dead.is_empty() {
            let mut delete = Sql::new(format!(
                "DELETE FROM {nodes} WHERE node_id IN ({})",
                marks(dead.len())
            ));
            delete.args.extend(dead.iter().map(|n| n.as_str().into()));
            d.exec_in(&mut tx, op, delete).await?;
        }
        d.commit(tx, op).await?;
        Ok(dead)
    }

    async fn deregister(&self, node_id: &str) -> Result<bool> {
        let q = Sql::new(format!(
            "DELETE FROM {} WHERE node_id = ?",
            self.d.t("nodes")
        ))
        .bind(node_id);
        Ok(self.d.exec("deregister", q).await? > 0)
    }

    async fn orphaned_runs(&self, limit: usize) -> Result<Vec<RunRecord>> {
        let limit = crate::limits::page(limit) as i64;
        let q = Sql::new(format!(
            "SELECT * FROM (
                 SELECT * FROM (SELECT {cols} FROM {runs} WHERE status = 'running' AND node NOT IN (SELECT node_id FROM {nodes})
                     ORDER BY id LIMIT ?) a
                 UNION ALL
                 SELECT * FROM (SELECT {as_run} FROM {jobs} WHERE {in_row} AND running_run IS NOT NULL
                     AND run_node NOT IN (SELECT node_id FROM {nodes}) ORDER BY running_run LIMIT ?) b
             ) u ORDER BY id LIMIT ?",
            cols = running::run_columns::<D>(),
            as_run = running::as_run_columns::<D>(),
            runs = self.d.t("runs"),
            jobs = self.d.t("jobs"),
            nodes = self.d.t("nodes"),
            in_row = super::IN_ROW,
        ))
        .bind(limit)
        .bind(limit)
        .bind(limit);
        let rows = self.d.fetch("orphaned_runs", q).await?;
        rows.iter()
            .map(|r| decode::run_record(D::NAME, r))
            .collect()
    }

    async fn executor_beat(&self, instance: &ExecutorInfo) -> Result<Timestamp> {
        let op = "executor_beat";
        let (d, executors) = (&self.d, self.d.t("executors"));
        let info = encode(D::NAME, instance)?;
        let mut tx = d.begin(op).await?;
        let now = now_in(d, &mut tx, op).await?;
        let insert = Sql::new(format!(
            "{} {executors} (grp, address, info, registered_at, last_beat) VALUES (?, ?, ?, ?, ?){}",
            D::INSERT_IGNORE,
            D::ON_CONFLICT_IGNORE
        ))
        .bind(instance.group.as_str())
        .bind(instance.address.as_str())
        .bind(info.as_str())
        .bind(now)
        .bind(now);
        if d.exec_in(&mut tx, op, insert).await? == 0 {
            let update = Sql::new(format!(
                "UPDATE {executors} SET info = ?, last_beat = ? WHERE grp = ? AND address = ?"
            ))
            .bind(info.as_str())
            .bind(now)
            .bind(instance.group.as_str())
            .bind(instance.address.as_str());
            d.exec_in(&mut tx, op, update).await?;
        }
        d.commit(tx, op).await?;
        Ok(Timestamp::from_millis(now))
    }

    async fn executors(&self, group: Option<&str>) -> Result<Page<ExecutorRecord>> {
        let executors = self.d.t("executors");
        let columns = "grp, address, info, registered_at, last_beat";
        let q = match group {
            Some(g) => Sql::new(format!(
                "SELECT {columns} FROM {executors} WHERE grp = ? ORDER BY address"
            ))
            .bind(g),
            None => Sql::new(format!(
                "SELECT {columns} FROM {executors} ORDER BY grp, address"
            )),
        };
        let rows = self.d.fetch("executors", q).await?;
        decode::executor_page(D::NAME, &rows)
    }

    async fn reap_executors(&self, silent_for: Duration) -> Result<Vec<(String, String)>> {
        let op = "reap_executors";
        let (d, executors) = (&self.d, self.d.t("executors"));
        let mut tx = d.begin(op).await?;
        let now = now_in(d, &mut tx, op).await?;
        let cutoff = now.saturating_sub(duration_ms(silent_for));
        let read = Sql::new(format!(
            "SELECT grp, address FROM {executors} WHERE last_beat < ? ORDER BY grp, address{}",
            D::FOR_UPDATE
        ))
        .bind(cutoff);
        let dead: Vec<(String, String)> = d
            .fetch_in(&mut tx, op, read)
            .await?
            .iter()
            .map(|r| {
                Ok((
                    r.text("grp").map_err(|e| d.err(op, e))?,
                    r.text("address").map_err(|e| d.err(op, e))?,
                ))
            })
            .collect::<Result<_>>()?;
        if !dead.is_empty() {
            // The rows read are locked until the commit: a beat that refreshes one
            // waits, and then finds it gone and registers it again.
            let delete =
                Sql::new(format!("DELETE FROM {executors} WHERE last_beat < ?")).bind(cutoff);
            d.exec_in(&mut tx, op, delete).await?;
        }
        d.commit(tx, op).await?;
        Ok(dead)
    }

    async fn deregister_executor(&self, group: &str, address: &str) -> Result<bool> {
        let q = Sql::new(format!(
            "DELETE FROM {} WHERE grp = ? AND address = ?",
            self.d.t("executors")
        ))
        .bind(group)
        .bind(address);
        Ok(self.d.exec("deregister_executor", q).await? > 0)
    }
}

/// Deletes the finished runs started before `before` (ms) and their lines, in one
/// transaction (a run log in one table).
pub(crate) async fn purge_rows<D: Dialect>(d: &D, before: i64) -> Result<u64> {
    let op = "purge_runs";
    let (runs, lines) = (d.t("runs"), d.t("run_lines"));
    let gone = "ended_at IS NOT NULL AND started_at < ?";
    let purge_lines = Sql::new(format!(
        "DELETE FROM {lines} WHERE run_id IN (SELECT id FROM {runs} WHERE {gone})"
    ))
    .bind(before);
    let purge_runs = Sql::new(format!("DELETE FROM {runs} WHERE {gone}")).bind(before);
    let mut tx = d.begin(op).await?;
    d.exec_in(&mut tx, op, purge_lines).await?;
    let n = d.exec_in(&mut tx, op, purge_runs).await?;
    d.commit(tx, op).await?;
    Ok(n)
}
