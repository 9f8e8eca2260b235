//! The memory store's queues of releases (see [`dependency`](crate::dependency)):
//! queued by a finish or an operator, taken into a job's next fire under
//! [`rules::takes_release`] and [`rules::pick_release`], listed, dropped.

use super::store::{Inner, Queued};
use crate::job::JobId;
use crate::record::{AuditEntry, FireContext};
use crate::store::rules::{self, JobState};
use crate::time::Timestamp;

impl Inner {
    /// Queues `r` unless its job is missing or its key is queued (or, for a job
    /// that joins by a window, was taken: [`rules::WINDOW_KEPT`]).
    pub(super) fn queue(&mut self, r: &crate::dependency::Release, now: Timestamp) {
        if !self.jobs.contains_key(&r.job) {
            return;
        }
        let key = r.from.key();
        let q = self.releases.entry(r.job.clone()).or_default();
        if !q
            .iter()
            .any(|o| o.from.job == r.from.job && o.from.key() == key)
        {
            // A release of an instant already alarmed is listed alarmed too.
            let alarmed_at = q
                .iter()
                .find(|o| o.taken_at.is_none() && o.from.key() == key)
                .and_then(|o| o.alarmed_at);
            q.push(Queued {
                from: r.from.clone(),
                upstream: r.upstream.clone(),
                released_at: now,
                alarmed_at,
                taken_at: None,
            });
        }
    }

    /// Queues `r` again after a change replaced the fire it was taken into
    /// ([`rules::returns_release`]): its mark as taken goes first.
    pub(super) fn requeue(&mut self, r: &crate::dependency::Release, now: Timestamp) {
        let key = r.from.key();
        if let Some(q) = self.releases.get_mut(&r.job) {
            q.retain(|o| {
                !(o.taken_at.is_some() && o.from.job == r.from.job && o.from.key() == key)
            });
        }
        self.queue(r, now);
    }

    /// Lets `id` take the queued releases [`rules::pick_release`] picks when
    /// [`rules::takes_release`] allows; whether it did.
    pub(super) fn take_release(&mut self, id: &JobId, now: Timestamp) -> bool {
        let Some(rec) = self.jobs.get(id) else {
            return false;
        };
        let Some(q) = self.releases.get(id) else {
            return false;
        };
        if !rules::takes_release(Some(&JobState::from(rec)), rec.next_trigger(), now) {
            return false;
        }
        let after: Vec<&str> = rec.job.after().iter().map(JobId::as_str).collect();
        let windowed = rec.job.join_window().is_some();
        let live: Vec<usize> = (0..q.len()).filter(|&i| q[i].taken_at.is_none()).collect();
        let keys: Vec<rules::QueuedKey<'_>> = live
            .iter()
            .map(|&i| rules::QueuedKey {
                source: q[i].from.job.as_str(),
                fire_at: q[i].from.key(),
                released_at: q[i].released_at,
            })
            .collect();
        let Some(picked) = rules::pick_release(&after, &keys) else {
            return false;
        };
        let picked: Vec<usize> = picked.iter().map(|&k| live[k]).collect();
        let upstream: Vec<String> = picked.iter().map(|&i| q[i].upstream.clone()).collect();
        let q = self.releases.get_mut(id).expect("read above");
        if windowed {
            // Kept, marked taken: a later release of the window is not queued.
            for &i in &picked {
                q[i].taken_at = Some(now);
            }
        } else {
            let mut i = 0;
            q.retain(|_| {
                i += 1;
                !picked.contains(&(i - 1))
            });
        }
        if q.is_empty() {
            self.releases.remove(id);
        }
        let context = crate::dependency::context_of(&upstream);
        let context = FireContext::from_stored(Some(&context)).unwrap_or_default();
        self.with_job(id, |j| j.next = Some(rules::released_fire(context, now)));
        true
    }

    /// [`Jobs::releases`](crate::store::Jobs::releases).
    pub(super) fn queued_releases(
        &self,
        job: Option<&JobId>,
        limit: usize,
    ) -> Vec<crate::dependency::QueuedRelease> {
        let mut out: Vec<_> = self
            .releases
            .iter()
            .filter(|(id, _)| job.is_none_or(|j| j == *id))
            .flat_map(|(id, q)| {
                q.iter().filter(|r| r.taken_at.is_none()).map(|r| {
                    crate::dependency::QueuedRelease {
                        job: id.clone(),
                        from: r.from.clone(),
                        released_at: r.released_at,
                        alarmed_at: r.alarmed_at,
                    }
                })
            })
            .collect();
        out.sort_by(|a, b| a.list_order().cmp(&b.list_order()));
        out.truncate(limit);
        out
    }

    /// [`Jobs::queue_releases`](crate::store::Jobs::queue_releases).
    pub(super) fn queue_releases(
        &mut self,
        releases: &[crate::dependency::Release],
        audit: Option<&AuditEntry>,
        now: Timestamp,
    ) {
        for r in releases {
            self.queue(r, now);
        }
        for r in releases {
            self.take_release(&r.job, now);
        }
        if let Some(a) = audit {
            self.append_audit(a, now);
        }
    }

    /// [`Jobs::drop_releases`](crate::store::Jobs::drop_releases).
    pub(super) fn drop_releases(
        &mut self,
        job: &JobId,
        fire_at: Timestamp,
        audit: Option<&AuditEntry>,
        now: Timestamp,
    ) -> u64 {
        let Some(q) = self.releases.get_mut(job) else {
            return 0;
        };
        let before = q.len();
        q.retain(|r| r.taken_at.is_some() || r.from.key() != fire_at);
        let dropped = (before - q.len()) as u64;
        if q.is_empty() {
            self.releases.remove(job);
        }
        if let (Some(a), true) = (audit, dropped > 0) {
            self.append_audit(a, now);
        }
        dropped
    }

    /// [`Jobs::alarm_waiting`](crate::store::Jobs::alarm_waiting).
    pub(super) fn alarm_waiting(
        &mut self,
        job: &JobId,
        fire_at: Timestamp,
        event: &crate::record::AlarmEvent,
        now: Timestamp,
    ) -> bool {
        let Some(q) = self.releases.get_mut(job) else {
            return false;
        };
        let mut rows: Vec<&mut Queued> = q
            .iter_mut()
            .filter(|r| r.taken_at.is_none() && r.from.key() == fire_at)
            .collect();
        if rows.is_empty() || rows.iter().any(|r| r.alarmed_at.is_some()) {
            return false;
        }
        for r in &mut rows {
            r.alarmed_at = Some(now);
        }
        self.enqueue(std::slice::from_ref(event), now);
        true
    }

    /// [`Jobs::take_releases`](crate::store::Jobs::take_releases).
    pub(super) fn take_releases(&mut self, limit: usize, now: Timestamp) -> u64 {
        // Marks of windows taken long enough ago are forgotten.
        let cutoff = now - rules::WINDOW_KEPT;
        self.releases.retain(|_, q| {
            q.retain(|r| r.taken_at.is_none_or(|t| t >= cutoff));
            !q.is_empty()
        });
        let ids: Vec<JobId> = self.releases.keys().cloned().collect();
        let mut taken = 0;
        for id in ids {
            if taken >= limit as u64 {
                break;
            }
            taken += u64::from(self.take_release(&id, now));
        }
        taken
    }
}
