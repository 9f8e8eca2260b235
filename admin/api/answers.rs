//! What the admin API answers, as types: the OpenAPI document's schemas are derived
//! from them, and the handlers answer nothing else.

use crate::admin::Role;
use crate::admin::views::{Fire, JobView};
use crate::executors::protocol::LogChunk;
use crate::record::{AlarmRecord, AuditRecord, DailyStats, ExecutorRecord, NodeRecord, RunRecord};
use crate::time::Timestamp;
use schemars::JsonSchema;
use serde::Serialize;

/// The server is up.
#[derive(Serialize, JsonSchema)]
pub(crate) struct Health {
    /// `ok`.
    pub(crate) status: &'static str,
}

/// Who is calling, as the server sees it.
#[derive(Serialize, JsonSchema)]
pub(crate) struct Session {
    /// The account's name, or `token:<name>`.
    pub(crate) name: String,
    /// Its role.
    pub(crate) role: Role,
    /// The executor groups it is limited to; `null`: every job.
    pub(crate) groups: Option<Vec<String>>,
    /// For a session cookie: the `X-CSRF-Token` its changes carry.
    pub(crate) csrf: Option<String>,
    /// Whether the server refuses every change.
    pub(crate) read_only: bool,
}

/// A page of jobs in id order.
#[derive(Serialize, JsonSchema)]
pub(crate) struct JobPage {
    /// The jobs the caller sees.
    pub(crate) items: Vec<JobView>,
    /// The `after` of the next page; `null` at the end.
    pub(crate) next: Option<String>,
}

/// A removed job.
#[derive(Serialize, JsonSchema)]
pub(crate) struct Removed {
    /// Its id.
    pub(crate) removed: String,
}

/// A job's next fires.
#[derive(Serialize, JsonSchema)]
pub(crate) struct Fires {
    /// The fires are after this instant (the store's now).
    pub(crate) after: Timestamp,
    /// In order.
    pub(crate) fires: Vec<Fire>,
}

/// A page of the run log, newest first.
#[derive(Serialize, JsonSchema)]
pub(crate) struct RunPage {
    /// The runs the caller sees.
    pub(crate) items: Vec<RunRecord>,
    /// The `before` of the next page; `null` at the end.
    pub(crate) next: Option<i64>,
}

/// One run, and the executor group its job runs on.
#[derive(Serialize, JsonSchema)]
pub(crate) struct RunDetail {
    /// The run.
    pub(crate) run: RunRecord,
    /// Its job's group; `null` for a local job (or one that is gone).
    pub(crate) group: Option<String>,
}

/// A remote run's log lines from an offset.
#[derive(Serialize, JsonSchema)]
pub(crate) struct RunLog {
    /// The instance that keeps it.
    pub(crate) instance: String,
    /// The lines.
    pub(crate) log: LogChunk,
}

/// Where a run was killed.
#[derive(Serialize, JsonSchema)]
pub(crate) struct Killed {
    /// Instance addresses or node ids that were running it.
    pub(crate) killed_on: Vec<String>,
}

/// Run counts per UTC day.
#[derive(Serialize, JsonSchema)]
pub(crate) struct Daily {
    /// The first day.
    pub(crate) from: chrono::NaiveDate,
    /// The last day.
    pub(crate) to: chrono::NaiveDate,
    /// The days that had runs.
    pub(crate) days: Vec<DailyStats>,
}

/// How many jobs the caller sees.
#[derive(Serialize, JsonSchema)]
pub(crate) struct JobCounts {
    /// All of them (up to the count's limit).
    pub(crate) total: u64,
    /// Paused.
    pub(crate) paused: u64,
    /// There are more than were counted.
    pub(crate) more: bool,
}

/// A job that failed in the runs the overview looked at.
#[derive(Serialize, JsonSchema)]
pub(crate) struct Failing {
    /// The job.
    pub(crate) job: String,
    /// Its failed runs.
    pub(crate) failures: u64,
}

/// A job's mean run time in the runs the overview looked at.
#[derive(Serialize, JsonSchema)]
pub(crate) struct Slow {
    /// The job.
    pub(crate) job: String,
    /// Mean run time, ms.
    pub(crate) mean_ms: u64,
    /// Runs measured.
    pub(crate) runs: u64,
}

/// The home page's figures.
#[derive(Serialize, JsonSchema)]
pub(crate) struct Overview {
    /// The store's now.
    pub(crate) now: Timestamp,
    /// Jobs.
    pub(crate) jobs: JobCounts,
    /// The last 14 days by outcome.
    pub(crate) days: Vec<DailyStats>,
    /// Succeeded of ended runs over those days; `null` without any.
    pub(crate) success_ratio: Option<f64>,
    /// Up to five jobs with the most failures.
    pub(crate) most_failing: Vec<Failing>,
    /// Up to five jobs with the longest mean run.
    pub(crate) slowest: Vec<Slow>,
    /// How many recent runs the two lists come from.
    pub(crate) runs_considered: usize,
    /// Registered scheduler nodes.
    pub(crate) nodes: Vec<NodeRecord>,
    /// Registered executor instances the caller sees.
    pub(crate) executors: Vec<ExecutorRecord>,
}

/// Scheduler nodes.
#[derive(Serialize, JsonSchema)]
pub(crate) struct Nodes {
    /// The store's now.
    pub(crate) now: Timestamp,
    /// The nodes.
    pub(crate) items: Vec<NodeRecord>,
    /// Node rows the store could not read.
    pub(crate) unreadable: usize,
}

/// Executor groups and instances.
#[derive(Serialize, JsonSchema)]
pub(crate) struct Executors {
    /// The store's now.
    pub(crate) now: Timestamp,
    /// The groups this server dispatches to.
    pub(crate) groups: Vec<String>,
    /// Registered instances the caller sees.
    pub(crate) items: Vec<ExecutorRecord>,
}

/// Alarm events, newest first.
#[derive(Serialize, JsonSchema)]
pub(crate) struct Alarms {
    /// The events the caller sees.
    pub(crate) items: Vec<AlarmRecord>,
}

/// An alarm event after an operator's retry or discard.
#[derive(Serialize, JsonSchema)]
pub(crate) struct AlarmChanged {
    /// The event.
    pub(crate) id: i64,
    /// `pending` (retried) or `failed` (discarded).
    pub(crate) status: &'static str,
}

/// A page of the audit log, newest first.
#[derive(Serialize, JsonSchema)]
pub(crate) struct AuditPage {
    /// The entries the caller may read.
    pub(crate) items: Vec<AuditRecord>,
    /// The `before` of the next page; `null` at the end.
    pub(crate) next: Option<i64>,
}
