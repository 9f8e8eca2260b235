//! [`AlarmOutbox`] for [`SqlStore`].

use super::decode::SqlRow;
use super::decode::{self, encode};
use super::{Dialect, Sql, SqlStore, marks, now_in};
use crate::error::Result;
use crate::record::*;
use crate::store::{AlarmClaim, AlarmOutbox, AlarmQuery, CorruptRow, Page};
use crate::time::{Timestamp, duration_ms};
use async_trait::async_trait;

/// Puts `events` in the outbox inside `tx`, as `Pending` from `now`: one statement.
pub(crate) async fn insert_alarms<D: Dialect>(
    d: &D,
    tx: &mut D::Tx,
    events: &[AlarmEvent],
    now: i64,
) -> Result<()> {
    if events.is_empty() {
        return Ok(());
    }
    let mut q = Sql::new(format!(
        "INSERT INTO {} (event, status, attempts, next_attempt_at, created_at) VALUES {}",
        d.t("alarms"),
        vec!["(?, 'pending', 0, ?, ?)"; events.len()].join(", ")
    ));
    for e in events {
        q = q.bind(encode(D::NAME, e)?).bind(now).bind(now);
    }
    d.exec_in(tx, "enqueue_alarms", q).await.map(|_| ())
}

impl<D: Dialect> SqlStore<D> {
    async fn claim(&self, claim: &AlarmClaim) -> Result<Page<AlarmRecord>> {
        let op = "claim_alarms";
        let (d, alarms) = (&self.d, self.d.t("alarms"));
        let mut tx = d.begin(op).await?;
        let now = now_in(d, &mut tx, op).await?;
        let read = Sql::new(format!(
            "SELECT * FROM {alarms} WHERE
                 (status IN ('pending', 'failed') AND next_attempt_at IS NOT NULL AND next_attempt_at <= ?)
                 OR (status = 'sending' AND claim_until <= ?)
             ORDER BY id LIMIT ?{}",
            D::SKIP_LOCKED
        ))
        .bind(now)
        .bind(now)
        .bind(crate::limits::page(claim.limit) as i64);
        let rows = d.fetch_in(&mut tx, op, read).await?;
        let mut page = Page::default();
        for row in &rows {
            match decode::alarm_record(D::NAME, row) {
                Ok(mut rec) => {
                    rec.status = AlarmStatus::Sending;
                    rec.claimed_by = Some(claim.owner.clone());
                    rec.claim_until = Some(Timestamp::from_millis(now + duration_ms(claim.lease)));
                    rec.attempts += 1;
                    page.items.push(rec);
                }
                Err(e) => page.corrupt.push(CorruptRow {
                    kind: "alarm",
                    id: row.int("id").map_or_else(|_| "?".into(), |i| i.to_string()),
                    due_key: None,
                    reason: e.to_string(),
                }),
            }
        }
        if !page.items.is_empty() {
            let mut update = Sql::new(format!(
                "UPDATE {alarms} SET status = 'sending', claimed_by = ?, claim_until = ?, attempts = attempts + 1
                 WHERE id IN ({})",
                marks(page.items.len())
            ))
            .bind(claim.owner.as_str())
            .bind(now + duration_ms(claim.lease));
            update.args.extend(page.items.iter().map(|r| r.id.0.into()));
            d.exec_in(&mut tx, op, update).await?;
        }
        // An event that cannot be read is never handed out: it fails for good.
        for bad in &page.corrupt {
            let Ok(id) = bad.id.parse::<i64>() else {
                continue;
            };
            let q = Sql::new(format!(
                "UPDATE {alarms} SET status = 'failed', next_attempt_at = NULL, claimed_by = NULL,
                 claim_until = NULL, last_error = ? WHERE id = ?"
            ))
            .bind(format!("cannot be read: {}", bad.reason))
            .bind(id);
            d.exec_in(&mut tx, op, q).await?;
        }
        d.commit(tx, op).await?;
        Ok(page)
    }
}

#[async_trait]
impl<D: Dialect> AlarmOutbox for SqlStore<D> {
    async fn claim_alarms(&self, claim: &AlarmClaim) -> Result<Page<AlarmRecord>> {
        super::retrying(|| self.claim(claim)).await
    }

    async fn complete_alarm(
        &self,
        id: AlarmId,
        owner: &str,
        delivery: &AlarmDelivery,
    ) -> Result<bool> {
        let (status, error, retry_at) = delivery.parts();
        let q = Sql::new(format!(
            "UPDATE {} SET status = ?, next_attempt_at = ?, last_error = COALESCE(?, last_error), claimed_by = NULL,
             claim_until = NULL WHERE id = ? AND status = 'sending' AND claimed_by = ?",
            self.d.t("alarms")
        ))
        .bind(status.as_str())
        .bind(retry_at.map(Timestamp::as_millis))
        .bind(error)
        .bind(id.0)
        .bind(owner);
        Ok(self.d.exec("complete_alarm", q).await? > 0)
    }

    async fn alarms(&self, query: &AlarmQuery) -> Result<Vec<AlarmRecord>> {
        let mut q = Sql::new(format!("SELECT * FROM {} WHERE 1 = 1", self.d.t("alarms")));
        if let Some(s) = query.status {
            q.push(" AND status = ?", [s.as_str().into()]);
        }
        if let Some(id) = query.id {
            q.push(" AND id = ?", [id.0.into()]);
        }
        q.push(
            " ORDER BY id DESC LIMIT ?",
            [(query.effective_limit().min(i64::MAX as usize) as i64).into()],
        );
        let rows = self.d.fetch("alarms", q).await?;
        // A listing shows what it can read: an unreadable event is failed at its claim.
        Ok(rows
            .iter()
            .filter_map(|r| decode::alarm_record(D::NAME, r).ok())
            .collect())
    }

    async fn purge_alarms(&self, before: Timestamp) -> Result<u64> {
        let q = Sql::new(format!(
            "DELETE FROM {} WHERE created_at < ? AND (status IN ('sent', 'not_needed')
             OR (status = 'failed' AND next_attempt_at IS NULL))",
            self.d.t("alarms")
        ))
        .bind(before.as_millis());
        self.d.exec("purge_alarms", q).await
    }

    async fn apply_alarm(
        &self,
        change: crate::store::AlarmChange,
        audit: Option<&crate::record::AuditEntry>,
    ) -> Result<bool> {
        self.apply_alarm_row(change, audit).await
    }
}
