//! The Redis store's methods on its queues of releases (see
//! [`dependency`](crate::dependency)); their scripts and key layout are in
//! `release_scripts`.

use super::shard::Shard;
use crate::error::Result;
use crate::job::JobId;
use crate::record::AuditEntry;
use crate::time::Timestamp;

impl Shard {
    /// [`Jobs::releases`](crate::store::Jobs::releases).
    pub(super) async fn queued_releases(
        &self,
        job: Option<&JobId>,
        limit: usize,
    ) -> Result<Vec<crate::dependency::QueuedRelease>> {
        let mut call = self.call(&self.scripts.releases);
        call.arg(job.map_or("", JobId::as_str));
        let out: Vec<String> = self.invoke(call, "releases").await?;
        let w = "decode releases";
        if !out.len().is_multiple_of(4) {
            return Err(super::decode::corrupt(w, format!("{} values", out.len())));
        }
        let mut got = Vec::new();
        for item in out.chunks_exact(4) {
            let [id, at, run, alarmed] = item else {
                continue;
            };
            let (Ok(job), Ok(from)) = (JobId::new(id), serde_json::from_str(run)) else {
                continue;
            };
            let alarmed_at = match alarmed.as_str() {
                "" => None,
                ms => Some(Timestamp::from_millis(super::decode::parse_int(ms, w)?)),
            };
            got.push(crate::dependency::QueuedRelease {
                job,
                from,
                released_at: Timestamp::from_millis(super::decode::parse_int(at, w)?),
                alarmed_at,
            });
        }
        got.sort_by(|a, b| a.list_order().cmp(&b.list_order()));
        got.truncate(limit);
        Ok(got)
    }

    /// [`Jobs::queue_releases`](crate::store::Jobs::queue_releases).
    pub(super) async fn queue_released(
        &self,
        releases: &[crate::dependency::Release],
        audit: Option<&AuditEntry>,
    ) -> Result<()> {
        let mut call = self.audited_call(&self.scripts.queue_releases, audit);
        call.arg(releases.len());
        for r in releases {
            call.arg(r.job.as_str())
                .arg(super::release_scripts::member(r))
                .arg(r.upstream.as_str());
        }
        self.invoke::<i64>(call, "queue_releases").await.map(drop)
    }

    /// [`Jobs::drop_releases`](crate::store::Jobs::drop_releases).
    pub(super) async fn drop_released(
        &self,
        job: &JobId,
        fire_at: Timestamp,
        audit: Option<&AuditEntry>,
    ) -> Result<u64> {
        let mut call = self.audited_call(&self.scripts.drop_releases, audit);
        call.arg(job.as_str()).arg(fire_at.as_millis());
        let n: i64 = self.invoke(call, "drop_releases").await?;
        Ok(n.max(0) as u64)
    }

    /// [`Jobs::alarm_waiting`](crate::store::Jobs::alarm_waiting).
    pub(super) async fn alarm_queued(
        &self,
        job: &JobId,
        fire_at: Timestamp,
        event: &crate::record::AlarmEvent,
    ) -> Result<bool> {
        let mut call = self.call(&self.scripts.alarm_waiting);
        call.arg(job.as_str())
            .arg(fire_at.as_millis())
            .arg(super::decode::encode(event)?);
        let n: i64 = self.invoke(call, "alarm_waiting").await?;
        Ok(n == 1)
    }

    /// [`Jobs::take_releases`](crate::store::Jobs::take_releases).
    pub(super) async fn take_queued(&self, limit: usize) -> Result<u64> {
        let mut call = self.call(&self.scripts.take_releases);
        call.arg(limit)
            .arg(crate::store::rules::WINDOW_KEPT.as_millis() as u64);
        let n: i64 = self.invoke(call, "take_releases").await?;
        Ok(n.max(0) as u64)
    }
}
