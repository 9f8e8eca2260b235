//! What `JobStore::due` returns, and the key that pages through it.

use super::TriggerKind;
use crate::job::{Job, JobId};
use crate::time::Timestamp;
use std::sync::Arc;

/// A due fire returned by `due`.
#[derive(Clone, Debug, PartialEq)]
pub struct DueFire {
    /// The job.
    pub job_id: JobId,
    /// Its definition (read in the same step as the fire, so the engine needs no
    /// further round trip).
    pub job: Arc<Job>,
    /// The fire's instant (the job's `next_fire_at`).
    pub fire_at: Timestamp,
    /// Definition version the fire belongs to.
    pub version: u64,
    /// Kind of fire.
    pub trigger: TriggerKind,
    /// Failed attempts so far; this run will be attempt `attempt + 1`.
    pub attempt: u32,
    /// For a retry, where the schedule resumes once the retries end (the job's
    /// [`resume_after`](super::JobRecord::resume_after)).
    pub resume_after: Option<Timestamp>,
    /// The payload of this fire when it is not the job's own (the job's
    /// [`next_payload`](super::JobRecord::next_payload): a manual trigger's override);
    /// `None` runs the job's payload.
    pub payload: Option<serde_json::Value>,
}

impl DueFire {
    /// This fire's position in the due order, for [`Jobs::due`]'s `after`.
    ///
    /// [`Jobs::due`]: crate::store::Jobs::due
    pub fn key(&self) -> DueKey {
        DueKey {
            fire_at: self.fire_at,
            job_id: self.job_id.clone(),
        }
    }
}

/// A position in the due order, `(fire_at, job id)`: [`Jobs::due`] with
/// `after = Some(key)` returns only fires that sort strictly after it. The key need not
/// be a fire that is still due. Job ids compare bytewise (every bundled store orders
/// them so, PostgreSQL through the `"C"` collation of its id columns).
///
/// [`Jobs::due`]: crate::store::Jobs::due
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DueKey {
    /// The fire's instant.
    pub fire_at: Timestamp,
    /// The job.
    pub job_id: JobId,
}
