//! [`AuditLog`] for [`SqlStore`], and the operator's alarm retry and discard (audited
//! in the same transaction).

use super::decode::{self, SqlRow};
use super::{Dialect, Sql, SqlStore};
use crate::error::Result;
use crate::record::{AuditEntry, AuditRecord};
use crate::store::{AlarmChange, AuditLog, AuditQuery};
use crate::time::Timestamp;
use async_trait::async_trait;

impl<D: Dialect> SqlStore<D> {
    /// The insert of an audit entry stamped with the database's clock.
    pub(super) fn audit_insert(&self, e: &AuditEntry) -> Sql {
        Sql::new(format!(
            "INSERT INTO {} (at, actor, action, target, before_json, after_json) VALUES ({}, ?, ?, ?, ?, ?)",
            self.d.t("audit"),
            D::NOW_MS
        ))
        .bind(e.actor.as_str())
        .bind(e.action.as_str())
        .bind(e.target.as_str())
        .bind(json_text(&e.before))
        .bind(json_text(&e.after))
    }

    /// `apply_alarm`: a pending or failed event becomes pending, claimable now
    /// (retry), or failed with no retry (discard); with `audit` appended in the same
    /// transaction when it was one.
    pub(super) async fn apply_alarm_row(
        &self,
        change: AlarmChange,
        audit: Option<&AuditEntry>,
    ) -> Result<bool> {
        let op = "apply_alarm";
        let set = match change {
            AlarmChange::Retry(_) => format!("status = 'pending', next_attempt_at = {}", D::NOW_MS),
            AlarmChange::Discard(_) => "status = 'failed', next_attempt_at = NULL".to_string(),
        };
        let q = Sql::new(format!(
            "UPDATE {} SET {set} WHERE id = ? AND status IN ('pending', 'failed')",
            self.d.t("alarms"),
        ))
        .bind(change.id().0);
        let Some(entry) = audit else {
            return Ok(self.d.exec(op, q).await? > 0);
        };
        let mut tx = self.d.begin(op).await?;
        let done = self.d.exec_in(&mut tx, op, q).await? > 0;
        if done {
            self.d
                .exec_in(&mut tx, op, self.audit_insert(entry))
                .await?;
        }
        self.d.commit(tx, op).await?;
        Ok(done)
    }
}

fn json_text(v: &Option<serde_json::Value>) -> Option<String> {
    v.as_ref().map(serde_json::Value::to_string)
}

fn audit_record(backend: &'static str, row: &impl SqlRow) -> Result<AuditRecord> {
    let w = "decode audit";
    let json = |c: &str| -> Result<Option<serde_json::Value>> {
        match decode::col(backend, w, row.opt_text(c))? {
            Some(t) => Ok(Some(decode::decode(backend, &t, w)?)),
            None => Ok(None),
        }
    };
    Ok(AuditRecord {
        id: decode::col(backend, w, row.int("id"))?,
        at: Timestamp::from_millis(decode::col(backend, w, row.int("at"))?),
        entry: AuditEntry {
            actor: decode::col(backend, w, row.text("actor"))?,
            action: decode::col(backend, w, row.text("action"))?,
            target: decode::col(backend, w, row.text("target"))?,
            before: json("before_json")?,
            after: json("after_json")?,
        },
    })
}

#[async_trait]
impl<D: Dialect> AuditLog for SqlStore<D> {
    async fn append_audit(&self, e: &AuditEntry) -> Result<()> {
        self.d
            .exec("append_audit", self.audit_insert(e))
            .await
            .map(|_| ())
    }

    async fn audit(&self, query: &AuditQuery) -> Result<Vec<AuditRecord>> {
        let mut q = Sql::new(format!("SELECT * FROM {} WHERE 1 = 1", self.d.t("audit")));
        if let Some(a) = &query.actor {
            q.push(" AND actor = ?", [a.as_str().into()]);
        }
        if let Some(t) = &query.target {
            q.push(" AND target = ?", [t.as_str().into()]);
        }
        if let Some(b) = query.before {
            q.push(" AND id < ?", [b.into()]);
        }
        q.push(
            " ORDER BY id DESC LIMIT ?",
            [(query.effective_limit() as i64).into()],
        );
        let rows = self.d.fetch("audit", q).await?;
        // A listing shows what it can read (as the alarm listing does).
        Ok(rows
            .iter()
            .filter_map(|r| audit_record(D::NAME, r).ok())
            .collect())
    }

    async fn purge_audit(&self, before: Timestamp) -> Result<u64> {
        let q = Sql::new(format!("DELETE FROM {} WHERE at < ?", self.d.t("audit")))
            .bind(before.as_millis());
        self.d.exec("purge_audit", q).await
    }
}
