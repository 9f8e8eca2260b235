//! What `JobStore::due` returns, and the key that pages through it.

use super::FireState;
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
    /// Definition version the fire belongs to.
    pub version: u64,
    /// The fire: the job's [`next`](super::JobRecord::next).
    pub fire: FireState,
}

impl DueFire {
    /// The fire's instant.
    pub fn fire_at(&self) -> Timestamp {
        self.fire.at
    }

    /// Why it fires.
    pub fn trigger(&self) -> super::TriggerKind {
        self.fire.trigger
    }

    /// Failed attempts at it so far.
    pub fn attempt(&self) -> u32 {
        self.fire.attempt
    }

    /// For a retry, where the schedule resumes once the retries end.
    pub fn resume_after(&self) -> Option<Timestamp> {
        self.fire.resume_after
    }

    /// Its payload override, if any.
    pub fn payload(&self) -> Option<&serde_json::Value> {
        self.fire.payload()
    }

    /// This fire's position in the due order, for [`Jobs::due`]'s `after`.
    ///
    /// [`Jobs::due`]: crate::store::Jobs::due
    pub fn key(&self) -> DueKey {
        DueKey {
            fire_at: self.fire.at,
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
