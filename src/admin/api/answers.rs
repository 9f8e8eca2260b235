//! What the admin API answers, as types: the OpenAPI document's schemas are derived
//! from them, and the handlers answer nothing else.

use crate::admin::Role;
use crate::admin::views::{Fire, JobView};
use crate::record::{AlarmRecord, AuditRecord, DailyStats, ExecutorRecord, NodeRecord, RunRecord};
use crate::remote::protocol::LogChunk;
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
    /// The jobs the caller sees, each with how its recent runs went.
    pub(crate) items: Vec<JobListItem>,
    /// The `after` of the next page; `null` at the end.
    pub(crate) next: Option<String>,
}

/// A job in a list: its view, its latest run and how its recent runs ended.
#[derive(Serialize, JsonSchema)]
pub(crate) struct JobListItem {
    /// The job and its scheduling state.
    #[serde(flatten)]
    pub(crate) view: JobView,
    /// Its latest run since the job was created; `null` before the first.
    pub(crate) last_run: Option<RunBrief>,
    /// Its latest ended runs (at most [`RECENT_RUNS`]), by outcome.
    pub(crate) recent: Recent,
}

/// How many ended runs a job list's `recent` counts.
pub(crate) const RECENT_RUNS: usize = 20;

/// A run in brief.
#[derive(Serialize, JsonSchema)]
pub(crate) struct RunBrief {
    /// The run's id.
    pub(crate) id: i64,
    /// Its status.
    pub(crate) status: crate::record::RunStatus,
    /// When it started (store clock).
    pub(crate) started_at: Timestamp,
}

/// A job's latest ended runs, by outcome.
#[derive(Serialize, JsonSchema)]
pub(crate) struct Recent {
    /// Ended runs counted (`running` and `returned` records are not).
    pub(crate) ended: u32,
    /// Of those, `succeeded`.
    pub(crate) succeeded: u32,
}

/// What a job gets for each field its definition leaves out, and the limits in force.
#[derive(Serialize, JsonSchema)]
pub(crate) struct Defaults {
    /// The retry policy.
    pub(crate) retry: crate::policy::RetryPolicy,
    /// The misfire policy.
    pub(crate) misfire: crate::policy::MisfirePolicy,
    /// The lateness past which a fire misfires when the job names none (the
    /// scheduler's `misfire_threshold`), as a duration (`5s`).
    pub(crate) misfire_threshold: String,
    /// The alarm policy.
    pub(crate) alarm: crate::policy::AlarmPolicy,
    /// The routing of a remote job.
    pub(crate) routing: crate::placement::Routing,
    /// The block strategy of a remote job.
    pub(crate) block: crate::placement::BlockStrategy,
    /// Every routing strategy.
    pub(crate) routings: Vec<crate::placement::Routing>,
    /// Every block strategy.
    pub(crate) blocks: Vec<crate::placement::BlockStrategy>,
    /// Every alarm kind.
    pub(crate) alarm_kinds: Vec<crate::policy::AlarmKind>,
    /// The largest payload, in bytes of JSON.
    pub(crate) max_payload_bytes: usize,
    /// The alarms this server's node delivers through, by kind (`email`,
    /// `webhook`), one per configured alarm; empty: events are recorded and reach
    /// nobody from this server. A job's `recipients` are used by `email` alarms only.
    pub(crate) alarms: Vec<&'static str>,
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

/// A run's log lines from an offset: a remote run's from the executor instance that
/// keeps them, a local run's from the store.
#[derive(Serialize, JsonSchema)]
pub(crate) struct RunLog {
    /// The scheduler node that wrote the lines to the store: the node that ran a
    /// local run, or dispatched a remote one.
    pub(crate) instance: String,
    /// The lines.
    pub(crate) log: LogChunk,
}

impl RunLog {
    /// A run's stored lines read from `offset`: `first_offset` is the first
    /// line's (past `offset` when lines are missing there), `done` once the run
    /// has ended, `more` when the page of `limit` lines was full.
    pub(crate) fn stored(
        run: &crate::record::RunRecord,
        offset: u64,
        limit: usize,
        lines: Vec<crate::record::LogLine>,
    ) -> RunLog {
        let more = lines.len() >= limit;
        let first = lines.first().map_or(offset, |l| l.offset);
        let next = lines.last().map_or(offset, |l| l.offset + 1);
        RunLog {
            instance: run.node.clone(),
            log: LogChunk {
                lines: lines.into_iter().map(|l| l.line).collect(),
                next_offset: next,
                first_offset: first,
                done: run.ended_at.is_some(),
                more,
            },
        }
    }
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
    pub(crate) items: Vec<ExecutorView>,
}

/// A registered executor instance, whether it is live, and what it answered when
/// asked just now.
#[derive(Serialize, JsonSchema)]
pub(crate) struct ExecutorView {
    /// The registration.
    #[serde(flatten)]
    pub(crate) record: ExecutorRecord,
    /// Its last beat is within its group's `dead_after`: schedulers send it runs.
    /// `null` for a group this server does not dispatch to.
    pub(crate) live: Option<bool>,
    /// Its answer to a signed beat sent while answering this request (groups this
    /// server dispatches to only; `null` otherwise).
    pub(crate) probe: Option<Probe>,
}

/// An instance's answer to a beat.
#[derive(Serialize, JsonSchema)]
pub(crate) struct Probe {
    /// How long it took to answer, ms.
    pub(crate) ms: u64,
    /// Why there was no answer (`null` when it answered).
    pub(crate) error: Option<String>,
    /// Its name in its group.
    pub(crate) instance: Option<String>,
    /// Runs executing on it now.
    pub(crate) running: Option<usize>,
    /// Runs waiting behind a running run of the same job.
    pub(crate) queued: Option<usize>,
    /// Runs it executes at once.
    pub(crate) capacity: Option<usize>,
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

impl Probe {
    /// No answer, for `error`.
    pub(crate) fn failed(ms: u64, error: String) -> Probe {
        Probe {
            ms,
            error: Some(error),
            instance: None,
            running: None,
            queued: None,
            capacity: None,
        }
    }
}

/// Every account and token the caller may manage.
#[derive(Serialize, JsonSchema)]
pub(crate) struct AccessList {
    /// The configuration's, then the store's, by kind and name.
    pub(crate) items: Vec<crate::admin::access::AccessView>,
}

/// A removed account or token.
#[derive(Serialize, JsonSchema)]
pub(crate) struct AccessRemoved {
    /// What it was.
    pub(crate) removed: crate::admin::access::AccessView,
}
