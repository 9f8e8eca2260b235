//! [`Credentials`] for [`SqlStore`]: one row per account or token (`body` is the
//! credential as JSON), each change audited in its transaction.

use super::decode::{self, SqlRow};
use super::{Dialect, Sql, SqlStore};
use crate::error::Result;
use crate::record::{AuditEntry, Credential, CredentialKind, CredentialRecord};
use crate::store::Credentials;
use crate::time::Timestamp;
use async_trait::async_trait;

fn credential(backend: &'static str, row: &impl SqlRow) -> Result<CredentialRecord> {
    let w = "decode credential";
    let body = decode::col(backend, w, row.text("body"))?;
    Ok(CredentialRecord {
        credential: decode::decode(backend, &body, w)?,
        created_at: Timestamp::from_millis(decode::col(backend, w, row.int("created_at"))?),
    })
}

#[async_trait]
impl<D: Dialect> Credentials for SqlStore<D> {
    async fn add_credential(&self, c: &Credential, audit: &AuditEntry) -> Result<bool> {
        let op = "add_credential";
        let insert = Sql::new(format!(
            "{} {} (kind, name, body, created_at) VALUES (?, ?, ?, {}){}",
            D::INSERT_IGNORE,
            self.d.t("credentials"),
            D::NOW_MS,
            D::ON_CONFLICT_IGNORE
        ))
        .bind(c.kind.as_str())
        .bind(c.name.as_str())
        .bind(decode::encode(D::NAME, c)?);
        let mut tx = self.d.begin(op).await?;
        let added = self.d.exec_in(&mut tx, op, insert).await? > 0;
        if added {
            self.d
                .exec_in(&mut tx, op, self.audit_insert(audit))
                .await?;
        }
        self.d.commit(tx, op).await?;
        Ok(added)
    }

    async fn remove_credential(
        &self,
        kind: CredentialKind,
        name: &str,
        audit: &AuditEntry,
    ) -> Result<bool> {
        let op = "remove_credential";
        let delete = Sql::new(format!(
            "DELETE FROM {} WHERE kind = ? AND name = ?",
            self.d.t("credentials")
        ))
        .bind(kind.as_str())
        .bind(name);
        let mut tx = self.d.begin(op).await?;
        let removed = self.d.exec_in(&mut tx, op, delete).await? > 0;
        if removed {
            self.d
                .exec_in(&mut tx, op, self.audit_insert(audit))
                .await?;
        }
        self.d.commit(tx, op).await?;
        Ok(removed)
    }

    async fn credentials(&self) -> Result<Vec<CredentialRecord>> {
        let q = Sql::new(format!(
            "SELECT * FROM {} ORDER BY kind, name",
            self.d.t("credentials")
        ));
        let rows = self.d.fetch("credentials", q).await?;
        Ok(rows
            .iter()
            .filter_map(|r| credential(D::NAME, r).ok())
            .collect())
    }
}
