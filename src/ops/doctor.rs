//! [`Doctor`]: a scan for stored rows the store cannot read.

use crate::error::Result;
use crate::job::JobId;
use crate::store::{CorruptRow, JobQuery, JobStore};

/// What a scan of the store found: every stored row it could not read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Doctor {
    /// Job rows skipped by every scan (they never fire until repaired or removed).
    pub jobs: Vec<CorruptRow>,
    /// Node rows skipped.
    pub nodes: Vec<CorruptRow>,
    /// Jobs whose alarm policy names events (the default policy does): with no
    /// alarm registered on the fleet's nodes, their events reach nobody.
    pub alarm_jobs: u64,
}

impl Doctor {
    /// Reads every job and node row of `store`, keeps those it cannot read and counts
    /// the jobs that name alarm events.
    pub async fn scan(store: &dyn JobStore) -> Result<Doctor> {
        let mut doctor = Doctor::default();
        let mut query = JobQuery::new(1000);
        loop {
            let page = store.list(&query).await?;
            let last = page
                .corrupt
                .iter()
                .filter_map(|c| JobId::new(&c.id).ok())
                .chain(page.items.iter().map(|r| r.job.id().clone()))
                .max();
            let full = page.rows() >= query.effective_limit();
            doctor.jobs.extend(page.corrupt);
            doctor.alarm_jobs += page
                .items
                .iter()
                .filter(|r| !r.job.alarm().events.is_empty())
                .count() as u64;
            match last {
                Some(id) if full => query = query.after(Some(id)),
                _ => break,
            }
        }
        doctor.nodes = store.nodes().await?.corrupt;
        Ok(doctor)
    }

    /// Whether every row could be read.
    pub fn is_healthy(&self) -> bool {
        self.jobs.is_empty() && self.nodes.is_empty()
    }
}
