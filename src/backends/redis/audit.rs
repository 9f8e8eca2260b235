//! The audit log of one shard of [`RedisStore`](super::RedisStore), and the runtime credentials (each change
//! audited by its script).

use super::decode::{Fields, corrupt, decode, field, int, opt_text};
use super::shard::{PURGE_CHUNK, Shard};
use crate::error::Result;
use crate::record::{AuditEntry, AuditRecord, Credential, CredentialKind, CredentialRecord};
use crate::store::{AuditLog, AuditQuery, Credentials};
use crate::time::Timestamp;
use async_trait::async_trait;

/// Ids read per page while a query filters the log.
const PAGE: usize = 256;

fn json(h: &Fields, name: &str) -> Result<Option<serde_json::Value>> {
    match opt_text(h, name) {
        Some(t) if !t.is_empty() => Ok(Some(decode(&t, "decode audit")?)),
        _ => Ok(None),
    }
}

fn decode_audit(id: &str, h: &Fields) -> Result<AuditRecord> {
    let w = "decode audit";
    Ok(AuditRecord {
        id: id.parse().map_err(|_| corrupt(w, id))?,
        at: Timestamp::from_millis(int(h, "at", w)?),
        entry: AuditEntry {
            actor: field(h, "actor", w)?.to_string(),
            action: field(h, "action", w)?.to_string(),
            target: field(h, "target", w)?.to_string(),
            before: json(h, "before")?,
            after: json(h, "after")?,
        },
    })
}

#[async_trait]
impl AuditLog for Shard {
    async fn append_audit(&self, e: &AuditEntry) -> Result<()> {
        let call = self.audited_call(&self.scripts.append_audit, Some(e));
        let _: i64 = self.invoke(call, "append_audit").await?;
        Ok(())
    }

    async fn audit(&self, query: &AuditQuery) -> Result<Vec<AuditRecord>> {
        let limit = query.effective_limit();
        let filtered = query.actor.is_some() || query.target.is_some();
        let page = if filtered { PAGE } else { limit.max(1) };
        let mut before = query.before;
        let mut out = Vec::new();
        while out.len() < limit {
            let ids = self.ids_below("audit", before, page).await?;
            let Some(last) = ids.last() else { break };
            before = Some(last.parse().map_err(|_| corrupt("read audit", last))?);
            let exhausted = ids.len() < page;
            let keys = ids.iter().map(|id| self.key(&format!("audit:{id}")));
            let hashes = self.hashes(keys, "read audit").await?;
            for (id, h) in ids.iter().zip(hashes) {
                // A listing shows what it can read (as the alarm listing does).
                if let Ok(r) = decode_audit(id, &h)
                    && query.matches(&r)
                    && out.len() < limit
                {
                    out.push(r);
                }
            }
            if exhausted {
                break;
            }
        }
        Ok(out)
    }

    async fn purge_audit(&self, before: Timestamp) -> Result<u64> {
        let mut total = 0;
        loop {
            let mut call = self.call(&self.scripts.purge_audit);
            call.arg(PURGE_CHUNK).arg(before.as_millis());
            let n: usize = self.invoke(call, "purge_audit").await?;
            total += n as u64;
            if n < PURGE_CHUNK {
                return Ok(total);
            }
        }
    }
}

#[async_trait]
impl Credentials for Shard {
    async fn add_credential(&self, c: &Credential, audit: &AuditEntry) -> Result<bool> {
        let body = serde_json::to_string(c).map_err(|e| corrupt("encode credential", e))?;
        let mut call = self.audited_call(&self.scripts.add_credential, Some(audit));
        call.arg(c.kind.as_str()).arg(&c.name).arg(body);
        let n: i64 = self.invoke(call, "add_credential").await?;
        Ok(n == 1)
    }

    async fn remove_credential(
        &self,
        kind: CredentialKind,
        name: &str,
        audit: &AuditEntry,
    ) -> Result<bool> {
        let mut call = self.audited_call(&self.scripts.remove_credential, Some(audit));
        call.arg(kind.as_str()).arg(name);
        let n: i64 = self.invoke(call, "remove_credential").await?;
        Ok(n == 1)
    }

    async fn credentials(&self) -> Result<Vec<CredentialRecord>> {
        let w = "read credentials";
        let members: Vec<String> = redis::cmd("ZRANGE")
            .arg(self.key("creds"))
            .arg(0)
            .arg(-1)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(super::redis_err(w))?;
        let keys = members.iter().map(|m| self.key(&format!("cred:{m}")));
        let hashes = self.hashes(keys, w).await?;
        // A listing shows what it can read (as the audit listing does).
        Ok(hashes
            .iter()
            .filter_map(|h| {
                Some(CredentialRecord {
                    credential: decode(&opt_text(h, "body")?, w).ok()?,
                    created_at: Timestamp::from_millis(int(h, "created_at", w).ok()?),
                })
            })
            .collect())
    }
}
