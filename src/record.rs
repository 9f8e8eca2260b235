//! What a store keeps besides definitions: scheduling state, runs, nodes and alarm
//! events. These are plain data; the engine decides their values.

use crate::job::{Job, JobId};
use crate::policy::AlarmKind;
use crate::time::Timestamp;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

mod due;
pub use due::{DueFire, DueKey};

/// Id of a run, unique within one store.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RunId(pub i64);

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl fmt::Debug for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "run#{}", self.0)
    }
}

/// Why a fire happens.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TriggerKind {
    /// The job's schedule.
    #[default]
    Schedule,
    /// A retry of a failed attempt.
    Retry,
    /// `trigger_now` by an operator or program.
    Manual,
    /// A late fire run under the misfire policy.
    Misfire,
}

impl TriggerKind {
    /// Stable lower-case name, as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            TriggerKind::Schedule => "schedule",
            TriggerKind::Retry => "retry",
            TriggerKind::Manual => "manual",
            TriggerKind::Misfire => "misfire",
        }
    }

    /// Inverse of [`as_str`](Self::as_str).
    pub fn parse(s: &str) -> Option<Self> {
        [Self::Schedule, Self::Retry, Self::Manual, Self::Misfire]
            .into_iter()
            .find(|k| k.as_str() == s)
    }
}

/// State of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Started and not finished.
    Running,
    /// The handler returned `Ok`.
    Succeeded,
    /// The handler returned an error or panicked.
    Failed,
    /// The handler ran past the job's timeout and was cancelled.
    TimedOut,
    /// The run was cancelled (shutdown, lost lease).
    Cancelled,
    /// The run's node died or its lease expired; recorded by another node.
    Lost,
    /// The fire was late and the misfire policy skipped it.
    Misfired,
}

impl RunStatus {
    /// Every status.
    pub const ALL: [RunStatus; 7] = [
        RunStatus::Running,
        RunStatus::Succeeded,
        RunStatus::Failed,
        RunStatus::TimedOut,
        RunStatus::Cancelled,
        RunStatus::Lost,
        RunStatus::Misfired,
    ];

    /// Stable lower-case name, as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Succeeded => "succeeded",
            RunStatus::Failed => "failed",
            RunStatus::TimedOut => "timed_out",
            RunStatus::Cancelled => "cancelled",
            RunStatus::Lost => "lost",
            RunStatus::Misfired => "misfired",
        }
    }

    /// Inverse of [`as_str`](Self::as_str).
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// True for outcomes that count as a failed attempt.
    pub fn is_failure(self) -> bool {
        matches!(
            self,
            RunStatus::Failed | RunStatus::TimedOut | RunStatus::Cancelled | RunStatus::Lost
        )
    }
}

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
    /// Newest fencing token the store has accepted for this job.
    pub last_token: u64,
    /// The run in progress, if any. A job with a running run is never due.
    pub running: Option<RunId>,
    /// When the job was first stored (store clock).
    pub created_at: Timestamp,
    /// When its definition last changed (store clock).
    pub updated_at: Timestamp,
}

/// What `upsert` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpsertOutcome {
    /// The job did not exist and was created.
    Created,
    /// The definition changed: version bumped, scheduling state reset.
    Updated,
    /// The stored definition was already identical; nothing changed.
    Unchanged,
}

/// A request to record the start of a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StartRun {
    /// The job.
    pub job_id: JobId,
    /// Must equal the job's `next_fire_at`.
    pub fire_at: Timestamp,
    /// Must equal the job's `version`.
    pub version: u64,
    /// Fencing token of the caller's lease; must be ≥ the job's `last_token`.
    pub token: u64,
    /// The node that runs it.
    pub node: String,
    /// 1-based attempt number.
    pub attempt: u32,
    /// Kind of fire (the engine may turn a late fire into `Misfire`).
    pub trigger: TriggerKind,
}

/// Why a start was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartRefusal {
    /// The job does not exist (removed).
    NotFound,
    /// The job is paused.
    Disabled,
    /// The definition changed since the fire was read.
    Changed,
    /// `next_fire_at` differs: the fire was already handled or moved.
    NotDue,
    /// Another run of the job is in progress.
    Running,
    /// The token is older than the job's last token.
    Fenced {
        /// The job's last token.
        current: u64,
    },
}

/// Result of one [`StartRun`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StartOutcome {
    /// Recorded as `Running`.
    Started {
        /// The new run.
        run_id: RunId,
        /// Start instant (store clock).
        started_at: Timestamp,
    },
    /// Nothing was written.
    Refused(StartRefusal),
}

/// The scheduling state a finish writes into its job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NextFire {
    /// New `next_fire_at`.
    pub at: Option<Timestamp>,
    /// Kind of that fire.
    pub trigger: TriggerKind,
    /// New failed-attempt count.
    pub attempt: u32,
}

/// A request to record the end of a run.
#[derive(Clone, Debug, PartialEq)]
pub struct FinishRun {
    /// The run.
    pub run_id: RunId,
    /// Its job.
    pub job_id: JobId,
    /// Fencing token. Normally the run's own token, which must still be the job's
    /// last token. With `takeover` (recording a lost run from another node) a newer
    /// token that is ≥ the job's last token; it becomes the last token.
    pub token: u64,
    /// See `token`.
    pub takeover: bool,
    /// Final status (not `Running`).
    pub status: RunStatus,
    /// Error message for failures.
    pub error: Option<String>,
    /// Whether the engine scheduled a retry.
    pub will_retry: bool,
    /// Definition version the run belonged to.
    pub version: u64,
    /// Written into the job only when its version and `next_fire_at` are unchanged
    /// since the start (an upsert or `trigger_now` during the run wins).
    pub next: NextFire,
    /// Alarm events to put in the outbox in the same atomic step.
    pub alarms: Vec<AlarmEvent>,
}

/// Why a finish was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FinishRefusal {
    /// No such run.
    NotFound,
    /// The run is no longer `Running` (already finished or marked lost).
    NotRunning,
    /// The token is stale or does not belong to the run.
    Fenced {
        /// The job's last token.
        current: u64,
    },
}

/// Result of one [`FinishRun`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FinishOutcome {
    /// The run record, the job's state and the alarms were written.
    Finished {
        /// End instant (store clock).
        ended_at: Timestamp,
        /// Whether `next` was applied to the job (false when the job was removed or
        /// changed during the run).
        rescheduled: bool,
    },
    /// Nothing was written.
    Refused(FinishRefusal),
}

/// One run in the run log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunRecord {
    /// Id.
    pub id: RunId,
    /// Job.
    pub job_id: JobId,
    /// The fire this run belongs to.
    pub fire_at: Timestamp,
    /// Why it ran.
    pub trigger: TriggerKind,
    /// Node that ran it.
    pub node: String,
    /// 1-based attempt.
    pub attempt: u32,
    /// Fencing token it ran under.
    pub token: u64,
    /// State.
    pub status: RunStatus,
    /// Start (store clock).
    pub started_at: Timestamp,
    /// End (store clock), once finished.
    pub ended_at: Option<Timestamp>,
    /// Error message of a failure.
    pub error: Option<String>,
    /// Whether a retry was scheduled.
    pub will_retry: bool,
}

impl RunRecord {
    /// `ended_at - started_at`, once finished.
    pub fn duration(&self) -> Option<Duration> {
        self.ended_at.map(|e| e.duration_since(self.started_at))
    }
}

/// A run-log query. Results are newest first (by run id, descending).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunQuery {
    /// Only this job.
    pub job_id: Option<JobId>,
    /// Only this status.
    pub status: Option<RunStatus>,
    /// Only runs started at or after this.
    pub since: Option<Timestamp>,
    /// Only runs started before this.
    pub until: Option<Timestamp>,
    /// Only runs with an id below this (paging).
    pub before: Option<RunId>,
    /// At most this many (0 means 100).
    pub limit: usize,
}

impl RunQuery {
    /// The effective limit.
    pub fn effective_limit(&self) -> usize {
        if self.limit == 0 { 100 } else { self.limit }
    }

    /// Whether `r` passes every filter.
    pub fn matches(&self, r: &RunRecord) -> bool {
        self.job_id.as_ref().is_none_or(|j| *j == r.job_id)
            && self.status.is_none_or(|s| s == r.status)
            && self.since.is_none_or(|s| r.started_at >= s)
            && self.until.is_none_or(|u| r.started_at < u)
            && self.before.is_none_or(|b| r.id < b)
    }
}

/// Run counts of one UTC day (by start time), over the runs still in the log.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DailyStats {
    /// The day, UTC.
    pub day: chrono::NaiveDate,
    /// All runs.
    pub total: u64,
    /// Still running.
    pub running: u64,
    /// Succeeded.
    pub succeeded: u64,
    /// Failed.
    pub failed: u64,
    /// Timed out.
    pub timed_out: u64,
    /// Cancelled.
    pub cancelled: u64,
    /// Lost.
    pub lost: u64,
    /// Misfired.
    pub misfired: u64,
}

impl DailyStats {
    /// Counts one run of `status`.
    pub fn count(&mut self, status: RunStatus) {
        self.add(status, 1);
    }

    /// Counts `n` runs of `status`.
    pub fn add(&mut self, status: RunStatus, n: u64) {
        self.total += n;
        *match status {
            RunStatus::Running => &mut self.running,
            RunStatus::Succeeded => &mut self.succeeded,
            RunStatus::Failed => &mut self.failed,
            RunStatus::TimedOut => &mut self.timed_out,
            RunStatus::Cancelled => &mut self.cancelled,
            RunStatus::Lost => &mut self.lost,
            RunStatus::Misfired => &mut self.misfired,
        } += n;
    }
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

/// Id of an alarm event in the outbox.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct AlarmId(pub i64);

/// Something an operator should hear about.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlarmEvent {
    /// Kind.
    pub kind: AlarmKind,
    /// Job.
    pub job_id: JobId,
    /// Its handler.
    pub handler: String,
    /// The run, when there was one.
    pub run_id: Option<RunId>,
    /// The fire.
    pub fire_at: Timestamp,
    /// Zone the job's schedule uses (IANA name), for rendering `fire_at`.
    pub zone: String,
    /// 1-based attempt.
    pub attempt: u32,
    /// Attempts allowed per fire.
    pub max_attempts: u32,
    /// Node that ran it (or that detected the loss).
    pub node: String,
    /// Run duration in milliseconds, when known.
    pub duration_ms: Option<u64>,
    /// Error message.
    pub error: Option<String>,
    /// Whether a retry is scheduled.
    pub will_retry: bool,
    /// The job's next fire after this event.
    pub next_fire_at: Option<Timestamp>,
    /// Per-job recipients from the alarm policy.
    pub recipients: Vec<String>,
    /// When it happened (node clock at the moment of detection).
    pub occurred_at: Timestamp,
    /// Events of the same job and kind that a throttle suppressed since the last one
    /// delivered (0 when none; absent in events stored before it existed).
    #[serde(default)]
    pub suppressed: u32,
}

impl AlarmEvent {
    /// `fire_at` as a wall time in the job's zone, with the zone's abbreviation and
    /// offset (`2026-12-07 09:30:00 CET (+01:00)`); in UTC when the zone is unknown.
    pub fn fire_at_local(&self) -> String {
        local(self.fire_at, &self.zone)
    }

    /// `next_fire_at` rendered like [`fire_at_local`](Self::fire_at_local).
    pub fn next_fire_local(&self) -> Option<String> {
        self.next_fire_at.map(|t| local(t, &self.zone))
    }

    /// A one-line summary: `final_failure: job reports.daily (handler report) attempt 3/3`.
    pub fn summary(&self) -> String {
        format!(
            "{}: job {} (handler {}) attempt {}/{}",
            self.kind.as_str(),
            self.job_id,
            self.handler,
            self.attempt,
            self.max_attempts
        )
    }
}

fn local(t: Timestamp, zone: &str) -> String {
    let tz: chrono_tz::Tz = zone.parse().unwrap_or(chrono_tz::UTC);
    t.to_datetime()
        .with_timezone(&tz)
        .format("%Y-%m-%d %H:%M:%S %Z (%:z)")
        .to_string()
}

/// Delivery state of an alarm event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AlarmStatus {
    /// Waiting to be claimed.
    Pending,
    /// Claimed by one node, being delivered.
    Sending,
    /// Every alarm accepted it.
    Sent,
    /// Delivery failed; retried at `next_attempt_at` when that is set.
    Failed,
    /// No alarm needed to hear of it (none registered, or throttled).
    NotNeeded,
}

impl AlarmStatus {
    /// Stable lower-case name, as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            AlarmStatus::Pending => "pending",
            AlarmStatus::Sending => "sending",
            AlarmStatus::Sent => "sent",
            AlarmStatus::Failed => "failed",
            AlarmStatus::NotNeeded => "not_needed",
        }
    }

    /// Inverse of [`as_str`](Self::as_str).
    pub fn parse(s: &str) -> Option<Self> {
        [
            Self::Pending,
            Self::Sending,
            Self::Sent,
            Self::Failed,
            Self::NotNeeded,
        ]
        .into_iter()
        .find(|k| k.as_str() == s)
    }
}

/// An alarm event with its delivery state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlarmRecord {
    /// Id.
    pub id: AlarmId,
    /// The event.
    pub event: AlarmEvent,
    /// State.
    pub status: AlarmStatus,
    /// Delivery attempts so far (claims).
    pub attempts: u32,
    /// When a `Pending`/`Failed` event may next be claimed.
    pub next_attempt_at: Option<Timestamp>,
    /// Node holding the claim while `Sending`.
    pub claimed_by: Option<String>,
    /// When that claim lapses (store clock).
    pub claim_until: Option<Timestamp>,
    /// Last delivery error.
    pub last_error: Option<String>,
    /// When the event was stored.
    pub created_at: Timestamp,
}

/// How a claimed alarm's delivery ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AlarmDelivery {
    /// Delivered.
    Sent,
    /// Nobody needed it.
    NotNeeded,
    /// Delivery failed; claimable again at `retry_at`, or never when `None`.
    Failed {
        /// The error.
        error: String,
        /// Next try.
        retry_at: Option<Timestamp>,
    },
}
