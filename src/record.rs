//! What a store keeps besides definitions: scheduling state, runs, nodes, executor
//! instances and alarm events. These are plain data; the engine decides their values.

use crate::job::Job;
use crate::time::Timestamp;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

mod alarm;
mod audit;
mod credential;
mod due;
mod executor;
mod fire;
mod run;
mod upstream;
pub use alarm::*;
pub use audit::{AuditAction, AuditEntry, AuditRecord};
pub use credential::{Credential, CredentialKind, CredentialRecord};
pub use due::{DueFire, DueKey};
pub use executor::{ExecutorInfo, ExecutorRecord};
pub use fire::{FireContext, FireState};
pub use run::*;
pub use upstream::{QueuedRelease, Release, UpstreamRun};

/// A stored job: its definition plus the scheduling state the engine keeps in it.
#[derive(Clone, Debug, PartialEq)]
pub struct JobRecord {
    /// The definition.
    pub job: Arc<Job>,
    /// Bumped by the store on every change of definition (upsert, pause, resume).
    pub version: u64,
    /// Its next fire; `None` when nothing is left to fire.
    pub next: Option<FireState>,
    /// Newest fencing token the store has accepted for this job.
    pub last_token: u64,
    /// The run in progress, if any. A job with a running run is never due.
    pub running: Option<RunId>,
    /// When the job was first stored (store clock).
    pub created_at: Timestamp,
    /// When its definition last changed (store clock).
    pub updated_at: Timestamp,
}

impl JobRecord {
    /// When the job is next due; `None` when nothing is left to fire.
    pub fn next_fire_at(&self) -> Option<Timestamp> {
        self.next.as_ref().map(|f| f.at)
    }

    /// Why the next fire happens (`Schedule` when there is none).
    pub fn next_trigger(&self) -> TriggerKind {
        self.next
            .as_ref()
            .map_or(TriggerKind::Schedule, |f| f.trigger)
    }

    /// Failed attempts at the next fire so far (0 when there is none).
    pub fn attempt(&self) -> u32 {
        self.next.as_ref().map_or(0, |f| f.attempt)
    }

    /// Where the schedule resumes once the next fire's retries end, if it is a retry.
    pub fn resume_after(&self) -> Option<Timestamp> {
        self.next.as_ref().and_then(|f| f.resume_after)
    }

    /// The next fire's payload override, if any.
    pub fn next_payload(&self) -> Option<&serde_json::Value> {
        self.next.as_ref().and_then(FireState::payload)
    }
}

/// What `upsert` or `create` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum UpsertOutcome {
    /// The job did not exist and was created.
    Created,
    /// The definition changed: version bumped, scheduling state reset.
    Updated,
    /// The stored definition was already identical; nothing changed.
    Unchanged,
    /// `create` found a job with this id and left it as it was (whatever its
    /// definition): nothing changed, nothing was re-armed.
    Kept,
}

/// What a node tells the registry about itself.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct NodeInfo {
    /// Unique per process start.
    pub node_id: String,
    /// Host name.
    pub host: String,
    /// Process id.
    pub pid: u32,
    /// jobwheel version.
    pub version: String,
    /// When the node started (store clock).
    pub started_at: Timestamp,
    /// Executor slots.
    pub capacity: u32,
}

/// A registered node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct NodeRecord {
    /// What the node said.
    pub info: NodeInfo,
    /// Last heartbeat (store clock).
    pub last_beat: Timestamp,
}
