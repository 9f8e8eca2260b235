//! Runs: the requests that start and finish them, their records, and the run log.

use crate::job::JobId;
use crate::time::Timestamp;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

use super::{AlarmEvent, FireContext, FireState};

/// Id of a run, unique within one store.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
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
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
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
    /// A fire released by an upstream job's fire (the job is its child).
    Upstream,
}

impl TriggerKind {
    /// Stable lower-case name, as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            TriggerKind::Schedule => "schedule",
            TriggerKind::Retry => "retry",
            TriggerKind::Manual => "manual",
            TriggerKind::Misfire => "misfire",
            TriggerKind::Upstream => "upstream",
        }
    }

    /// Inverse of [`as_str`](Self::as_str).
    pub fn parse(s: &str) -> Option<Self> {
        [
            Self::Schedule,
            Self::Retry,
            Self::Manual,
            Self::Misfire,
            Self::Upstream,
        ]
        .into_iter()
        .find(|k| k.as_str() == s)
    }
}

/// State of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
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
    /// Started, then given back without executing: the node's executor slots stayed
    /// busy for longer than a started fire may wait for one (half a poll
    /// interval). The job is due at the same fire again, with the same attempt, and
    /// any node runs it; the fire's execution is the later record.
    Returned,
}

impl RunStatus {
    /// Every status.
    pub const ALL: [RunStatus; 8] = [
        RunStatus::Running,
        RunStatus::Succeeded,
        RunStatus::Failed,
        RunStatus::TimedOut,
        RunStatus::Cancelled,
        RunStatus::Lost,
        RunStatus::Misfired,
        RunStatus::Returned,
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
            RunStatus::Returned => "returned",
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
    /// For a run the misfire policy decided on, the scheduled fires it stands for;
    /// stored with the run ([`RunRecord::covers`]).
    pub covers: Option<FireSpan>,
    /// What the fire carries ([`FireState::context`]); stored with the run
    /// ([`RunRecord::context`]).
    pub context: FireContext,
}

/// Why a start was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
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
    /// A claim found the job's lease held by a holder whose lease has not run out
    /// (another node's claim, or a run this node keeps the lease for).
    Held,
}

/// A request to claim a due fire and record its run's start in one atomic step, on a
/// store that keeps each job's lease in the job's own row
/// ([`JobLeases::claim_runs`](crate::store::JobLeases::claim_runs)). It is a
/// [`StartRun`] whose token the store grants: the job's lease, when free, goes to
/// `node` for `ttl` under a token greater than every earlier one of the job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaimRun {
    /// The job.
    pub job_id: JobId,
    /// Must equal the job's `next_fire_at`.
    pub fire_at: Timestamp,
    /// Must equal the job's `version`.
    pub version: u64,
    /// The node that claims and runs it: the lease's holder.
    pub node: String,
    /// 1-based attempt number.
    pub attempt: u32,
    /// Kind of fire (the engine may turn a late fire into `Misfire`).
    pub trigger: TriggerKind,
    /// The scheduled fires a run the misfire policy decided on stands for.
    pub covers: Option<FireSpan>,
    /// What the fire carries.
    pub context: FireContext,
    /// How long the lease lasts from the claim (at least 1 ms).
    pub ttl: Duration,
}

impl ClaimRun {
    /// The start this claim records once the store has granted `token`.
    pub fn start(&self, token: u64) -> StartRun {
        StartRun {
            job_id: self.job_id.clone(),
            fire_at: self.fire_at,
            version: self.version,
            token,
            node: self.node.clone(),
            attempt: self.attempt,
            trigger: self.trigger,
            covers: self.covers,
            context: self.context.clone(),
        }
    }
}

/// Result of one [`ClaimRun`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClaimOutcome {
    /// The lease was granted and the run recorded as `Running` under its token.
    Started {
        /// The new run.
        run_id: RunId,
        /// Start instant (store clock).
        started_at: Timestamp,
        /// The lease granted: the run's token, held by the claiming node until the
        /// store's clock passes `expires_at`.
        lease: crate::lock::Lease,
    },
    /// Nothing was written.
    Refused(StartRefusal),
    /// Not claimed, though it might have been: as many candidates as the call wanted
    /// were claimed before it.
    Left,
}

/// What a finish does with the job's lease, on a store that keeps each job's lease
/// in the job's own row ([`JobLeases`](crate::store::JobLeases)). Written in the same
/// atomic step as the finish, and only when the finish is written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LeaseEnd {
    /// Leave the job's lease as it is: the lease lives with a lock provider of its
    /// own (the default; a store without leases in its rows ignores the field).
    #[default]
    Untouched,
    /// Free it: any node may claim the job's next fire at once.
    Release,
    /// Keep it with its holder and token for this long from the finish: the node runs
    /// the job's next fire (due within the scheduler's lookahead) without a claim.
    Keep(Duration),
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
    /// The executor instance that executed it (see [`RunRecord::executor`]); `None`
    /// for a local run.
    pub executor: Option<String>,
    /// Definition version the run belonged to.
    pub version: u64,
    /// The job's next fire (`None`: nothing is left to fire), written into the job
    /// only when its version and next fire are unchanged since the start (an upsert
    /// or `trigger_now` during the run wins).
    pub next: Option<FireState>,
    /// Alarm events to put in the outbox in the same atomic step.
    pub alarms: Vec<AlarmEvent>,
    /// Children released by this run's end, queued in the same atomic step (a
    /// release whose key is already queued is ignored); see
    /// [`dependency`](crate::dependency).
    pub releases: Vec<super::Release>,
    /// What happens to the job's lease when the store keeps it in the job's row
    /// ([`LeaseEnd::Untouched`] on the general path).
    pub lease: LeaseEnd,
}

/// Why a finish was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
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
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
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
    /// For a run of a remote executor group: the instance that executed it
    /// ([`ExecutedOn::summary`](crate::ExecutedOn::summary): several, joined, for a
    /// sharding broadcast), written with the run's end; `None` for a local run, a
    /// run still running, and a run no instance admitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executor: Option<String>,
    /// For a record of the misfire policy (a late run under `FireOnce` or `CatchUp`,
    /// or a `misfired` record), the scheduled fires it stands for.
    #[serde(default)]
    pub covers: Option<FireSpan>,
    /// What its fire carried (a manual trigger's payload override among it); its
    /// fields are inlined in the record's JSON (`payload`).
    #[serde(default, flatten)]
    pub context: FireContext,
}

impl RunRecord {
    /// The payload override it ran with, if any.
    pub fn payload(&self) -> Option<&serde_json::Value> {
        self.context.payload.as_ref()
    }

    /// `ended_at - started_at`, once finished.
    pub fn duration(&self) -> Option<Duration> {
        self.ended_at.map(|e| e.duration_since(self.started_at))
    }
}

/// Run counts of one UTC day (by start time), over the runs still in the log.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
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
    /// Given back unexecuted (the fire ran again as a later record).
    pub returned: u64,
}

impl DailyStats {
    /// Counts one run of `status`.
    pub fn count(&mut self, status: RunStatus) {
        self.add(status, 1);
    }

    /// Adds every count of `other` (another store's, or another shard's, of the same
    /// day) to these.
    pub fn add_all(&mut self, other: &DailyStats) {
        self.total += other.total;
        self.running += other.running;
        self.succeeded += other.succeeded;
        self.failed += other.failed;
        self.timed_out += other.timed_out;
        self.cancelled += other.cancelled;
        self.lost += other.lost;
        self.misfired += other.misfired;
        self.returned += other.returned;
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
            RunStatus::Returned => &mut self.returned,
        } += n;
    }
}

/// The scheduled fires one misfire record stands for: every fire of the job's
/// schedule in `[first, through]`.
///
/// A late run under `FireOnce` covers the fire it runs for and every fire it
/// coalesces (`through` is the instant it started); a `misfired` record covers the
/// fires it skipped; a late run under `CatchUp` covers itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
pub struct FireSpan {
    /// How many scheduled fires the span holds. Exact for intervals and one-shots;
    /// for cron, counted up to [`FireSpan::MAX_COUNTED`].
    pub fires: u64,
    /// The first fire: the record's own `fire_at`.
    pub first: Timestamp,
    /// The end of the span, inclusive.
    pub through: Timestamp,
}

impl FireSpan {
    /// The most cron fires counted for one span (a per-second expression reaches it
    /// after about 11.5 days of missed fires).
    pub const MAX_COUNTED: u64 = 1_000_000;

    /// The span a store kept as two nullable numbers beside the record's `fire_at`
    /// (`first`): `fires` and `through` (epoch milliseconds); `None` unless both are
    /// there.
    pub fn from_stored(first: Timestamp, fires: Option<i64>, through: Option<i64>) -> Option<Self> {
        Some(FireSpan {
            fires: fires?.max(0) as u64,
            first,
            through: Timestamp::from_millis(through?),
        })
    }
}

/// Lines of one run's log to append: `lines[i]` is the line at offset `first + i`.
/// Offsets count from 0 per run; a line stored at an offset is never replaced, so
/// the same chunk appended twice (a retried write) stores each line once.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogLines {
    /// The run the lines belong to.
    pub run_id: RunId,
    /// The offset of `lines[0]`.
    pub first: u64,
    /// The lines, oldest first, each without its line break.
    pub lines: Vec<String>,
}

/// One stored line of a run's log, with its offset.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogLine {
    /// Its offset in the run's log (0 is the first line).
    pub offset: u64,
    /// The line.
    pub line: String,
}
