//! What a store keeps besides definitions: scheduling state, runs, nodes, executor
//! instances and alarm events. These are plain data; the engine decides their values.

use crate::job::Job;
use crate::time::Timestamp;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

mod alarm;
mod audit;
mod due;
mod executor;
mod run;
pub use alarm::*;
pub use audit::{AuditEntry, AuditRecord};
pub use due::{DueFire, DueKey};
pub use executor::{ExecutorInfo, ExecutorRecord};
pub use run::*;

/// A stored job: its definition plus the scheduling state the engine keeps in it.
#[derive(Clone, Debug, PartialEq)]
pub struct JobRecord {
    /// The definition.
    pub job: Arc<Job>,
    /// Bumped by the store on every change of definition (upsert, pause, resume).
    pub version: u64,
    /// When the job is next due; `None` when nothing is left to fire.
    pub next_fire_at: Option<Timestamp>,
    /// Kind of the next fire.
    pub next_trigger: TriggerKind,
    /// Failed attempts of the current fire so far (0 when fresh).
    pub attempt: u32,
    /// While a retry is pending: where the schedule resumes once the retries end
    /// (see [`NextFire::resume_after`]).
    pub resume_after: Option<Timestamp>,
    /// The payload of the next fire when it is not the job's own: set by a manual
    /// trigger with a payload, kept through that fire's retries, cleared once the
    /// fire is done, by a change of definition and by resume.
    pub next_payload: Option<serde_json::Value>,
    /// Newest fencing token the store has accepted for this job.
    pub last_token: u64,
    /// The run in progress, if any. A job with a running run is never due.
    pub running: Option<RunId>,
    /// When the job was first stored (store clock).
    pub created_at: Timestamp,
    /// When its definition last changed (store clock).
    pub updated_at: Timestamp,
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
pub struct NodeRecord {
    /// What the node said.
    pub info: NodeInfo,
    /// Last heartbeat (store clock).
    pub last_beat: Timestamp,
}
