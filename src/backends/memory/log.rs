//! The run log, node registry and alarm outbox of [`MemoryStore`].

use super::store::MemoryStore;
use crate::error::Result;
use crate::record::*;
use crate::store::{
    AlarmChange, AlarmClaim, AlarmOutbox, AlarmQuery, AuditLog, AuditQuery, Credentials,
    NodeRegistry, Page, RunLog, RunQuery,
};
use crate::time::Timestamp;
use async_trait::async_trait;
use chrono::NaiveDate;
use std::collections::BTreeMap;
use std::time::Duration;

#[async_trait]
impl RunLog for MemoryStore {
    async fn runs(&self, query: &RunQuery) -> Result<Vec<RunRecord>> {
        let inner = self.inner();
        Ok(inner
            .runs
            .values()
            .rev()
            .filter(|r| query.matches(r))
            .take(query.effective_limit())
            .cloned()
            .collect())
    }

    async fn purge_runs(&self, before: Timestamp) -> Result<u64> {
        let mut inner = self.inner();
        let n = inner.runs.len();
        inner
            .runs
            .retain(|_, r| r.ended_at.is_none() || r.started_at >= before);
        let purged = n - inner.runs.len();
        if purged > 0 {
            let inner = &mut *inner;
            let runs = &inner.runs;
            inner.lines.retain(|(run, _), _| runs.contains_key(run));
        }
        Ok(purged as u64)
    }

    async fn append_lines(&self, chunks: &[LogLines]) -> Result<()> {
        let mut inner = self.inner();
        for c in chunks {
            for (offset, line) in (c.first..).zip(&c.lines) {
                inner
                    .lines
                    .entry((c.run_id, offset))
                    .or_insert_with(|| line.clone());
            }
        }
        Ok(())
    }

    async fn lines(&self, run: RunId, offset: u64, limit: usize) -> Result<Vec<LogLine>> {
        let inner = self.inner();
        Ok(inner
            .lines
            .range((run, offset)..=(run, u64::MAX))
            .take(limit)
            .map(|((_, offset), line)| LogLine {
                offset: *offset,
                line: line.clone(),
            })
            .collect())
    }

    async fn daily_stats(&self, from: NaiveDate, to: NaiveDate) -> Result<Vec<DailyStats>> {
        let inner = self.inner();
        let mut days: BTreeMap<NaiveDate, DailyStats> = BTreeMap::new();
        for r in inner.runs.values() {
            let day = r.started_at.to_datetime().date_naive();
            if day >= from && day <= to {
                days.entry(day)
                    .or_insert_with(|| DailyStats {
                        day,
                        ..DailyStats::default()
                    })
                    .count(r.status);
            }
        }
        Ok(days.into_values().collect())
    }
}

#[async_trait]
impl NodeRegistry for MemoryStore {
    async fn heartbeat(&self, node: &NodeInfo) -> Result<Timestamp> {
        let now = self.clock.now();
        self.inner().nodes.insert(
            node.node_id.clone(),
            NodeRecord {
                info: node.clone(),
                last_beat: now,
            },
        );
        Ok(now)
    }

    async fn nodes(&self) -> Result<Page<NodeRecord>> {
        Ok(Page::of(self.inner().nodes.values().cloned().collect()))
    }

    async fn reap_nodes(&self, silent_for: Duration) -> Result<Vec<String>> {
        let cutoff = self.clock.now() - silent_for;
        let mut inner = self.inner();
        let dead: Vec<String> = inner
            .nodes
            .values()
            .filter(|n| n.last_beat < cutoff)
            .map(|n| n.info.node_id.clone())
            .collect();
        for id in &dead {
            inner.nodes.remove(id);
        }
        Ok(dead)
    }

    async fn deregister(&self, node_id: &str) -> Result<bool> {
        Ok(self.inner().nodes.remove(node_id).is_some())
    }

    async fn orphaned_runs(&self, limit: usize) -> Result<Vec<RunRecord>> {
        let inner = self.inner();
        Ok(inner
            .running
            .iter()
            .filter_map(|id| inner.runs.get(id))
            .filter(|r| !inner.nodes.contains_key(&r.node))
            .take(limit)
            .cloned()
            .collect())
    }

    async fn executor_beat(&self, instance: &ExecutorInfo) -> Result<Timestamp> {
        let now = self.clock.now();
        let key = (instance.group.clone(), instance.address.clone());
        let mut inner = self.inner();
        let registered_at = inner.executors.get(&key).map_or(now, |e| e.registered_at);
        inner.executors.insert(
            key,
            ExecutorRecord {
                info: instance.clone(),
                registered_at,
                last_beat: now,
            },
        );
        Ok(now)
    }

    async fn executors(&self, group: Option<&str>) -> Result<Page<ExecutorRecord>> {
        let inner = self.inner();
        Ok(Page::of(
            inner
                .executors
                .values()
                .filter(|e| group.is_none_or(|g| e.info.group == g))
                .cloned()
                .collect(),
        ))
    }

    async fn reap_executors(&self, silent_for: Duration) -> Result<Vec<(String, String)>> {
        let cutoff = self.clock.now() - silent_for;
        let mut inner = self.inner();
        let dead: Vec<(String, String)> = inner
            .executors
            .iter()
            .filter(|(_, e)| e.last_beat < cutoff)
            .map(|(k, _)| k.clone())
            .collect();
        for k in &dead {
            inner.executors.remove(k);
        }
        Ok(dead)
    }

    async fn deregister_executor(&self, group: &str, address: &str) -> Result<bool> {
        let key = (group.to_string(), address.to_string());
        Ok(self.inner().executors.remove(&key).is_some())
    }
}

#[async_trait]
impl AlarmOutbox for MemoryStore {
    async fn claim_alarms(&self, claim: &AlarmClaim) -> Result<Page<AlarmRecord>> {
        let now = self.clock.now();
        let mut inner = self.inner();
        let inner = &mut *inner;
        let mut out = Vec::new();
        for id in &inner.claimable {
            if out.len() >= claim.limit {
                break;
            }
            let Some(rec) = inner.alarms.get_mut(id) else {
                continue;
            };
            let due = match rec.status {
                AlarmStatus::Pending | AlarmStatus::Failed => {
                    rec.next_attempt_at.is_some_and(|t| t <= now)
                }
                AlarmStatus::Sending => rec.claim_until.is_some_and(|t| t <= now),
                AlarmStatus::Sent | AlarmStatus::NotNeeded => false,
            };
            if due {
                rec.status = AlarmStatus::Sending;
                rec.claimed_by = Some(claim.owner.clone());
                rec.claim_until = Some(now + claim.lease);
                rec.attempts += 1;
                out.push(rec.clone());
            }
        }
        Ok(Page::of(out))
    }

    async fn complete_alarm(
        &self,
        id: AlarmId,
        owner: &str,
        delivery: &AlarmDelivery,
    ) -> Result<bool> {
        let mut inner = self.inner();
        let Some(rec) = inner.alarms.get_mut(&id) else {
            return Ok(false);
        };
        if rec.status != AlarmStatus::Sending || rec.claimed_by.as_deref() != Some(owner) {
            return Ok(false);
        }
        rec.claimed_by = None;
        rec.claim_until = None;
        let (status, error, retry_at) = delivery.parts();
        rec.status = status;
        rec.next_attempt_at = retry_at;
        if let Some(e) = error {
            rec.last_error = Some(e.to_string());
        }
        if rec.next_attempt_at.is_none() {
            inner.claimable.remove(&id);
        }
        Ok(true)
    }

    async fn alarms(&self, query: &AlarmQuery) -> Result<Vec<AlarmRecord>> {
        Ok(self
            .inner()
            .alarms
            .values()
            .rev()
            .filter(|a| query.matches(a))
            .take(query.effective_limit())
            .cloned()
            .collect())
    }

    async fn purge_alarms(&self, before: Timestamp) -> Result<u64> {
        let mut inner = self.inner();
        let inner = &mut *inner;
        let n = inner.alarms.len();
        let claimable = &inner.claimable;
        inner
            .alarms
            .retain(|id, a| claimable.contains(id) || a.created_at >= before);
        Ok((n - inner.alarms.len()) as u64)
    }

    async fn apply_alarm(&self, change: AlarmChange, audit: Option<&AuditEntry>) -> Result<bool> {
        let now = self.clock.now();
        let mut inner = self.inner();
        let id = change.id();
        let Some(rec) = inner.alarms.get_mut(&id) else {
            return Ok(false);
        };
        if !matches!(rec.status, AlarmStatus::Pending | AlarmStatus::Failed) {
            return Ok(false);
        }
        match change {
            AlarmChange::Retry(_) => {
                rec.status = AlarmStatus::Pending;
                rec.next_attempt_at = Some(now);
                inner.claimable.insert(id);
            }
            AlarmChange::Discard(_) => {
                rec.status = AlarmStatus::Failed;
                rec.next_attempt_at = None;
                inner.claimable.remove(&id);
            }
        }
        if let Some(entry) = audit {
            inner.append_audit(entry, now);
        }
        Ok(true)
    }
}

#[async_trait]
impl AuditLog for MemoryStore {
    async fn append_audit(&self, entry: &AuditEntry) -> Result<()> {
        let at = self.clock.now();
        self.inner().append_audit(entry, at);
        Ok(())
    }

    async fn audit(&self, query: &AuditQuery) -> Result<Vec<AuditRecord>> {
        Ok(self
            .inner()
            .audit
            .iter()
            .rev()
            .filter(|r| query.matches(r))
            .take(query.effective_limit())
            .cloned()
            .collect())
    }

    async fn purge_audit(&self, before: Timestamp) -> Result<u64> {
        let mut inner = self.inner();
        let n = inner.audit.len();
        inner.audit.retain(|r| r.at >= before);
        Ok((n - inner.audit.len()) as u64)
    }
}

#[async_trait]
impl Credentials for MemoryStore {
    async fn add_credential(&self, c: &Credential, audit: &AuditEntry) -> Result<bool> {
        let now = self.clock.now();
        let mut inner = self.inner();
        let key = (c.kind, c.name.clone());
        if inner.credentials.contains_key(&key) {
            return Ok(false);
        }
        inner.credentials.insert(
            key,
            CredentialRecord {
                credential: c.clone(),
                created_at: now,
            },
        );
        inner.append_audit(audit, now);
        Ok(true)
    }

    async fn remove_credential(
        &self,
        kind: CredentialKind,
        name: &str,
        audit: &AuditEntry,
    ) -> Result<bool> {
        let now = self.clock.now();
        let mut inner = self.inner();
        if inner
            .credentials
            .remove(&(kind, name.to_string()))
            .is_none()
        {
            return Ok(false);
        }
        inner.append_audit(audit, now);
        Ok(true)
    }

    async fn credentials(&self) -> Result<Vec<CredentialRecord>> {
        Ok(self.inner().credentials.values().cloned().collect())
    }
}
